"""Principle 7: the build sees only the workspace and the toolchain (catalog 52 and after).

Each case is a workspace written to read a file outside it through the compiler: by a directive, a
macro, a planted link, a file name, the environment. A secret file holds two canary tokens, written so
that including it would make the compiler quote them (an undefined identifier on a source line); every
case asserts the build failed for the named reason and that no canary reached the result, its
diagnostics or its log.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.build import BuildCache, Builder, BuildFlags, discover_toolchain
from cuda_agent_mcp.build.confinement import plan_view
from cuda_agent_mcp.executors import LocalExecutor
from cuda_agent_mcp.executors.sandboxed import view_backend
from cuda_agent_mcp.results import BuildResult
from cuda_agent_mcp.tools import Session, compile_kernels
from tests.redteam.workspaces import HONEST_LAUNCH, RELU_KERNEL, launcher, relu_session
from tests.sandbox.conftest import docker_executor, sandboxed_executor

pytestmark = pytest.mark.nvcc

HONEST = RELU_KERNEL + launcher(HONEST_LAUNCH)  # relu_session puts the includes first
JUDGE_SOURCE = Path(__file__).resolve().parents[2] / "cuda_agent_mcp" / "judge" / "judge.py"


class Secret:
    """A file outside the workspace whose contents must never come back."""

    def __init__(self, directory: Path) -> None:
        self.tokens = (f"CANARY{uuid.uuid4().hex}", f"CANARY{uuid.uuid4().hex}")
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "secret.h"
        self.path.write_text(f"int {self.tokens[0]} = {self.tokens[1]};\n")

    def assert_not_in(self, result: BuildResult) -> None:
        dumped = result.model_dump_json()
        for token in self.tokens:
            assert token not in dumped, f"the secret leaked: {dumped[:3000]}"


@pytest.fixture
def secret(tmp_path: Path) -> Secret:
    return Secret(tmp_path / "outside")


def build(session: Session) -> BuildResult:
    return anyio.run(compile_kernels, session)


def climb(path: Path) -> str:
    """`path` spelled relative to a file in kernels/, climbing out with enough `../`."""
    return "../" * 32 + str(path).lstrip("/")


# (case, the kernel's extra text, the failure): directives the scan refuses before any compiler runs.
REFUSED = {
    "absolute_include": ('#include "{secret}"', "absolute path"),
    "angle_include_climbing_out": ("#include <{climb}>", "climbs out"),
    "quoted_include_climbing_out": ('#include "{climb}"', "climbs out"),
    "include_next": ('#include_next "secret.h"', "#include_next"),
    "has_include_oracle": ('#if __has_include("{secret}")\n#error it exists\n#endif', "absolute path"),
    "incbin_in_asm": ('asm(".incbin \\"{secret}\\"");', ".incbin"),
    "assembler_include": ('asm(".include \\"{secret}\\"");', ".include"),
    "pragma_dependency": ('#pragma GCC dependency "{secret}"', "dependency"),
    "pragma_operator_dependency": ('_Pragma("GCC dependency \\"{secret}\\"")', "dependency"),
    "line_directive_naming_the_file": ('#line 1 "{secret}"\nint y = undefined_name;', "#line"),
    "linemarker_naming_the_file": ('# 1 "{secret}"\nint y = undefined_name;', "#line"),
    "continued_directive": ('#inc\\\nlude "{secret}"', "absolute path"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_directives_that_name_a_file_outside_are_refused_before_compiling(
    case: str, tmp_path: Path, shared_build_cache: Path, secret: Secret
) -> None:
    text, reason = REFUSED[case]
    exploit = text.format(secret=secret.path, climb=climb(secret.path))
    session = relu_session(tmp_path, shared_build_cache, kernel=HONEST + exploit + "\n")
    result = build(session)
    assert not result.ok and result.failure == "refused_input", result.summary
    (refusal,) = result.diagnostics
    assert refusal.file == "kernels/relu.cu" and refusal.line and refusal.tool == "build"
    assert reason in refusal.message, refusal.message
    assert result.files == [], "no compiler ran"
    secret.assert_not_in(result)


# Spelled so that no scan can see the path: only the view stops them, and the redaction keeps the
# compilers' messages from quoting anything they might have read.
EVADING = {
    "macro_built_absolute_include": '#define LEAK "{secret}"\n#include LEAK',
    "macro_built_climbing_include": '#define LEAK "{climb}"\n#include LEAK',
    "stringised_path": "#define STR(x) #x\n#define XSTR(x) STR(x)\n#include XSTR({secret})",
    "incbin_split_across_strings": 'asm(".inc" "bin \\"{secret}\\"");',
    "proc_self_environ": '#define LEAK "/proc/self/environ"\n#include LEAK',
    "the_evaluators_own_source": '#define LEAK "{judge}"\n#include LEAK',
}


@pytest.mark.parametrize("case", sorted(EVADING))
def test_a_file_outside_cannot_be_read_however_the_path_is_spelled(
    case: str, tmp_path: Path, shared_build_cache: Path, secret: Secret, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_AGENT_TEST_CANARY", secret.tokens[0])  # would show in /proc/self/environ
    exploit = EVADING[case].format(secret=secret.path, climb=climb(secret.path), judge=JUDGE_SOURCE)
    session = relu_session(tmp_path, shared_build_cache, kernel=HONEST + exploit)
    result = build(session)
    assert not result.ok and result.failure == "compile_error", result.summary
    assert result.confinement == list(plan_view(session.executor).layers)
    assert result.confinement[0] == "landlock" and "none" not in result.confinement
    secret.assert_not_in(result)
    assert "The trusted side of an evaluation" not in result.model_dump_json()  # judge.py's first line
    assert "Permission denied" not in result.log and "No such file" not in result.log  # no existence oracle
    assert any(d.severity == "error" for d in result.diagnostics)


def test_the_compilers_environment_is_an_allowlist(
    tmp_path: Path, shared_build_cache: Path, secret: Secret, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CPATH, NVCC_PREPEND_FLAGS, ... in the server's environment would put the secret's directory on the
    include path (or run another compiler); none of them reaches nvcc or g++."""
    directory = str(secret.path.parent)
    fake_compiler = secret.path.parent / "cc"
    fake_compiler.write_text(f"#!/bin/sh\ncat {secret.path}\nexit 1\n")
    fake_compiler.chmod(0o755)
    for name in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"):
        monkeypatch.setenv(name, directory)
    monkeypatch.setenv("NVCC_PREPEND_FLAGS", f"-I{directory}")
    monkeypatch.setenv("NVCC_APPEND_FLAGS", f"-I{directory}")
    monkeypatch.setenv("NVCC_CCBIN", str(fake_compiler))
    monkeypatch.setenv("COMPILER_PATH", directory)
    monkeypatch.setenv("GCC_EXEC_PREFIX", f"{directory}/")
    monkeypatch.setenv("PATH", f"{directory}:{os.environ['PATH']}")
    session = relu_session(tmp_path, shared_build_cache, kernel=HONEST + '#include "secret.h"\n')
    result = build(session)
    assert not result.ok and result.failure == "compile_error", result.summary
    assert "secret.h" in result.summary
    secret.assert_not_in(result)


def test_a_symbolic_link_planted_in_the_workspace_is_refused(
    tmp_path: Path, shared_build_cache: Path, secret: Secret
) -> None:
    session = relu_session(tmp_path, shared_build_cache, kernel=HONEST + '#include "leak.cuh"\n')
    (session.workspace.root / "kernels" / "leak.cuh").symlink_to(secret.path)
    result = build(session)
    assert not result.ok and result.failure == "refused_input", result.summary
    assert [(d.file, "symbolic link" in d.message) for d in result.diagnostics] == [
        ("kernels/leak.cuh", True)
    ]
    secret.assert_not_in(result)


def test_a_kernels_directory_that_is_a_link_elsewhere_is_refused(
    tmp_path: Path, shared_build_cache: Path, secret: Secret
) -> None:
    """kernels/ pointing at another directory (another workspace's kernels, say) is not the workspace."""
    session = relu_session(tmp_path, shared_build_cache, kernel=HONEST)
    kernels = session.workspace.root / "kernels"
    elsewhere = tmp_path / "other-workspace-kernels"
    kernels.rename(elsewhere)
    (elsewhere / "stolen.cuh").write_text(secret.path.read_text())
    kernels.symlink_to(elsewhere)
    result = build(session)
    assert not result.ok and result.failure == "refused_input", result.summary
    assert all("kernels/ is a symbolic link" in d.message for d in result.diagnostics), result.diagnostics
    secret.assert_not_in(result)


def test_a_hard_link_to_a_file_outside_is_refused(
    tmp_path: Path, shared_build_cache: Path, secret: Secret
) -> None:
    session = relu_session(tmp_path, shared_build_cache, kernel=HONEST + '#include "leak.cuh"\n')
    os.link(secret.path, session.workspace.root / "kernels" / "leak.cuh")
    result = build(session)
    assert not result.ok and result.failure == "refused_input", result.summary
    assert any(d.file == "kernels/leak.cuh" and "hard link" in d.message for d in result.diagnostics)
    secret.assert_not_in(result)


@pytest.mark.parametrize(
    "name", ["x$(touch PWNED).cu", "-Isecret.cu", "a;touch PWNED;.cu", "new\nline.cu", "`id`.cu"]
)
def test_a_file_name_that_a_shell_or_an_option_parser_would_read_is_refused(
    name: str, tmp_path: Path, shared_build_cache: Path
) -> None:
    """nvcc runs its sub-commands through a shell with file names in double quotes: a source named
    `x$(cmd).cu` would run `cmd` (measured with nvcc 13.0). Such names never reach a command line."""
    session = relu_session(tmp_path, shared_build_cache, kernel=HONEST)
    (session.workspace.root / "kernels" / name).write_text("__global__ void k() {}\n")
    result = build(session)
    assert not result.ok and result.failure == "refused_input", result.summary
    assert [d.file for d in result.diagnostics] == [f"kernels/{name}"]
    assert "letters, digits" in result.diagnostics[0].message
    assert not list(tmp_path.rglob("PWNED")) and result.files == []


def test_the_cache_key_is_the_hash_of_the_bytes_the_compiler_saw(
    tmp_path: Path, shared_build_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file swapped between the workspace listing and the copy (a concurrent `run`) must not store an
    object of one content under the key of another, which every workspace with that content would
    then load (cache poisoning)."""
    session = relu_session(tmp_path, shared_build_cache, kernel=HONEST)
    kernel = session.workspace.root / "kernels" / "relu.cu"
    listing = type(session.workspace).build_sources

    def list_then_swap(workspace):  # type: ignore[no-untyped-def]
        listed = listing(workspace)
        kernel.write_text(HONEST + "\n// swapped after the listing\n")
        return listed

    monkeypatch.setattr(type(session.workspace), "build_sources", list_then_swap)
    swapped = build(session)
    monkeypatch.undo()
    assert swapped.ok, swapped.summary
    again = build(session)  # the same bytes, listed honestly
    assert again.source_hash == swapped.source_hash
    assert {f.file: f.object_key for f in again.files} == {f.file: f.object_key for f in swapped.files}
    assert {f.action for f in again.files} == {"cached"}


def _build_with(view_executor: str, tmp_path: Path, cache: Path, kernel: str) -> BuildResult:
    session = relu_session(tmp_path, cache, kernel=kernel)
    if view_executor == "view_only":
        sandboxed_executor()  # skips where no view can be built
        view = plan_view(LocalExecutor(), landlock=0)
        executor = view.executor
    else:
        executor = docker_executor() if view_executor == "docker" else sandboxed_executor()
        view = plan_view(executor)
    builder = Builder(discover_toolchain(), BuildCache(cache), executor, view=view)
    return anyio.run(builder.build, session.workspace, BuildFlags())


def _view_layer() -> str:
    """The sandbox executor's own layer: the namespace view where the kernel allows one, else bubblewrap."""
    return {"namespaces": "namespaces", "bwrap": "bubblewrap"}.get(view_backend() or "", "none")


@pytest.mark.parametrize(
    ("view_executor", "layers"),
    [
        ("sandbox", ["landlock", "{view}"]),
        ("docker", ["landlock", "container"]),
        ("view_only", ["{view}"]),  # no Landlock: the executor's view alone
    ],
)
def test_every_executor_builds_honest_kernels_inside_a_view_and_stops_the_same_read(
    view_executor: str, layers: list[str], tmp_path: Path, shared_build_cache: Path, secret: Secret
) -> None:
    layers = [_view_layer() if layer == "{view}" else layer for layer in layers]
    honest = _build_with(view_executor, tmp_path / "honest", shared_build_cache, HONEST + "\n// honest\n")
    assert honest.ok, honest.summary + honest.log
    assert honest.confinement == layers
    leak = HONEST + f'#define LEAK "{secret.path}"\n#include LEAK\n'
    result = _build_with(view_executor, tmp_path / "leak", shared_build_cache, leak)
    assert not result.ok and result.failure == "compile_error", result.summary
    assert result.confinement == layers
    secret.assert_not_in(result)
