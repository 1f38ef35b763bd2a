"""The build's view (principle 7): the Landlock wrapper, the choice of view per executor, the opt-in for
reduced isolation, the input checks and the redaction of compiler output.

The red-team cases that try to read through a real build are in tests/redteam/test_build_escape.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.build import BuildCache, Builder, BuildFlags, confine, discover_toolchain
from cuda_agent_mcp.build.confinement import (
    REDUCED_ISOLATION_ENV,
    SYSTEM_READABLE,
    BuildView,
    plan_view,
)
from cuda_agent_mcp.build.inputs import directive_problem, name_problem, scan_directives
from cuda_agent_mcp.build.redact import OUTSIDE, PathScope, redact_output
from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.executors import DockerExecutor, LocalExecutor, SandboxedExecutor
from cuda_agent_mcp.isolation.landlock import abi_version as landlock_abi
from tests.conftest import EXAMPLES, REPO

needs_landlock = pytest.mark.skipif(landlock_abi() < 1, reason="this kernel offers no Landlock")


def through_wrapper(
    command: list[str], staging: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    view = BuildView(layers=("landlock",), executor=LocalExecutor(), landlock=True)
    argv = view.command(command, staging=staging, readable=[])
    return subprocess.run(
        argv, cwd=staging, env=env or {"PATH": "/usr/bin:/bin"}, capture_output=True, text=True
    )


@needs_landlock
def test_the_wrapper_lets_a_command_read_the_system_and_write_only_the_staging_directory(
    tmp_path: Path,
) -> None:
    staging, outside = tmp_path / "staging", tmp_path / "outside"
    staging.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("the secret\n")
    script = (
        f"cat {outside}/secret; echo rc_read=$?; echo x > {outside}/planted; echo rc_write=$?; "
        f"echo kept > {staging}/out; cat /usr/include/stdio.h > /dev/null && echo system_ok; "
        "cat /etc/hostname; echo rc_etc=$?; cat /proc/self/environ; echo rc_proc=$?"
    )
    done = through_wrapper(["/bin/sh", "-c", script], staging)
    assert "the secret" not in done.stdout and "rc_read=1" in done.stdout
    assert "rc_write=" in done.stdout and "rc_write=0" not in done.stdout
    assert not (outside / "planted").exists()
    assert (staging / "out").read_text() == "kept\n" and "system_ok" in done.stdout
    assert "rc_etc=1" in done.stdout and "rc_proc=1" in done.stdout


@needs_landlock
def test_the_wrapper_passes_the_command_only_the_allowlisted_environment(tmp_path: Path) -> None:
    hostile = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "CPATH": "/x",
        "C_INCLUDE_PATH": "/x",
        "CPLUS_INCLUDE_PATH": "/x",
        "LIBRARY_PATH": "/x",
        "NVCC_PREPEND_FLAGS": "-I/x",
        "NVCC_APPEND_FLAGS": "-I/x",
        "NVCC_CCBIN": "/x/cc",
        "GCC_EXEC_PREFIX": "/x/",
        "COMPILER_PATH": "/x",
        "LD_LIBRARY_PATH": "/x",
        "LD_PRELOAD": "",
        "PYTHONPATH": "/x",
    }
    done = through_wrapper(["/usr/bin/env"], tmp_path, env=hostile)
    names = {line.split("=", 1)[0] for line in done.stdout.splitlines() if "=" in line}
    assert names <= set(confine.ENVIRONMENT), names
    assert names >= {"PATH", "HOME"}


def test_the_wrapper_never_runs_the_command_when_landlock_cannot_be_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class NoLandlock:
        @staticmethod
        def confine(**_: object) -> bool:
            return False

    monkeypatch.setattr(confine, "_primitive", lambda: NoLandlock)
    marker = tmp_path / "ran"
    assert (
        confine.main(["--write", str(tmp_path), "--", "/usr/bin/touch", str(marker)])
        == confine.EXIT_UNCONFINED
    )
    assert not marker.exists()
    assert "confine:" in capsys.readouterr().err
    assert confine.main(["--read"]) == 2  # a malformed command line runs nothing either


def test_the_wrapper_starts_without_importing_the_package(tmp_path: Path) -> None:
    """It runs before every compile: the interpreter with -I -S and the standard library only."""
    code = (
        "import runpy, sys; sys.argv = ['confine.py', '--help'];\n"
        f"runpy.run_path({str(confine.__file__)!r}, run_name='not_main');\n"
        "print(sorted(m for m in sys.modules if m.startswith('cuda_agent_mcp')))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("executor", "layers"),
    [
        (LocalExecutor(), ("landlock",)),
        (DockerExecutor(), ("landlock", "container")),
    ],
)
def test_each_executor_gets_landlock_plus_its_own_view(executor: object, layers: tuple[str, ...]) -> None:
    view = plan_view(executor, landlock=7)  # type: ignore[arg-type]
    assert view.layers == layers and view.landlock and view.executor is executor


def test_without_landlock_the_build_takes_a_bubblewrap_view_or_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(REDUCED_ISOLATION_ENV, raising=False)
    fallback = plan_view(LocalExecutor(), landlock=0, bubblewrap=True)
    assert fallback.layers in (("namespaces",), ("bubblewrap",)) and isinstance(
        fallback.executor, SandboxedExecutor
    )
    assert not fallback.landlock
    with pytest.raises(ExecutorUnavailable) as refused:
        plan_view(LocalExecutor(), landlock=0, bubblewrap=False)
    message = str(refused.value)
    assert "Landlock" in message and "bubblewrap" in message and REDUCED_ISOLATION_ENV in message
    assert "\n" not in message
    monkeypatch.setenv(REDUCED_ISOLATION_ENV, "1")
    reduced = plan_view(LocalExecutor(), landlock=0, bubblewrap=False)
    assert reduced.layers == ("none",) and not reduced.confined
    monkeypatch.setenv(REDUCED_ISOLATION_ENV, "yes")  # only the documented value opts in
    with pytest.raises(ExecutorUnavailable):
        plan_view(LocalExecutor(), landlock=0, bubblewrap=False)


@pytest.mark.nvcc
def test_objects_built_without_a_view_never_serve_a_confined_build(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    from tests.compile.test_build import new_session

    session = new_session("relu", tmp_path / "ws", shared_build_cache)
    confined = anyio.run(session.builder.build, session.workspace, BuildFlags())
    assert confined.ok and confined.confinement[0] == "landlock"  # and the executor's own view, if any
    reduced_view = BuildView(layers=("none",), executor=LocalExecutor(), landlock=False)
    builder = Builder(
        discover_toolchain(), BuildCache(shared_build_cache), LocalExecutor(), view=reduced_view
    )
    reduced = anyio.run(builder.build, session.workspace, BuildFlags())
    assert reduced.ok and reduced.confinement == ["none"]
    assert {f.action for f in reduced.files} == {"compiled"}
    assert reduced.build_key != confined.build_key
    assert not {f.object_key for f in reduced.files} & {f.object_key for f in confined.files}


# -- inputs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "relpath"),
    [
        ('#include "../binding_registry.h"', "kernels/k_binding.cpp"),
        ('#include "common.cuh"', "kernels/k.cu"),
        ('#include "kernels/common.cuh"', "k.cu"),
        ("#include <cuda_runtime.h>", "kernels/k.cu"),
        ("#include <torch/extension.h>", "kernels/k_binding.cpp"),
        ("#include <cuda/std/cstdint>", "kernels/k.cu"),
        ("#if __has_include(<cuda_fp8.h>)", "kernels/k.cu"),
        ("#line 40", "kernels/k.cu"),
        ('asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));', "kernels/k.cu"),
        ("#pragma unroll 4", "kernels/k.cu"),
        ("#pragma once", "kernels/common.cuh"),
        ('#define INCLUDE_ME "common.cuh"', "kernels/k.cu"),
    ],
)
def test_honest_directives_pass_the_input_scan(line: str, relpath: str) -> None:
    assert directive_problem(line, relpath) is None


@pytest.mark.parametrize(
    "line",
    [
        '#include "/etc/passwd"',
        "#include </etc/passwd>",
        '#include "~/.ssh/id_rsa"',
        '#  include "../../model.py"',
        "#include <../../../etc/passwd>",
        '#include_next "x.h"',
        '#import "x.h"',
        '#embed "/etc/passwd"',
        '#if __has_include("/etc/shadow")',
        "#if __has_include_next(<x.h>)",
        'asm(".incbin \\"x\\"");',
        'asm(".include \\"/etc/passwd\\"");',
        '#pragma GCC dependency "/etc/passwd"',
        '_Pragma("GCC dependency \\"/etc/passwd\\"")',
        '#line 1 "/etc/passwd"',
        '# 1 "/etc/passwd"',
    ],
)
def test_directives_reaching_outside_the_workspace_are_refused(line: str) -> None:
    assert directive_problem(line, "kernels/k.cu") is not None


def test_directives_in_comments_are_not_refused_and_continued_lines_are(tmp_path: Path) -> None:
    source = (
        '// #include "/etc/passwd"\n/* .incbin "/etc/passwd"\n#include "/etc/passwd" */\nint x;\n'
        '#inc\\\nlude "/etc/passwd"\n'
    )
    (tmp_path / "k.cu").write_text(source)
    found = scan_directives(tmp_path, ["k.cu"])
    assert [(d.file, d.line, d.tool) for d in found] == [("k.cu", 5, "build")]


@pytest.mark.parametrize(
    ("relpath", "ok"),
    [
        ("kernels/my_kernel-v2.cu", True),
        ("kernels/gemm+bias.cu", True),
        ("fused.cpp", True),
        ("kernels/-Ix.cu", False),
        ("kernels/x$(id).cu", False),
        ("kernels/a b.cu", False),
        ("kernels/a\nb.cu", False),
        ("kernels/.hidden.cu", False),
        ('kernels/q"uote.cu', False),
    ],
)
def test_only_plain_file_names_reach_a_command_line(relpath: str, ok: bool) -> None:
    assert (name_problem(relpath) is None) is ok


def _honest_sources() -> list[Path]:
    roots = [
        EXAMPLES,
        REPO / "tests" / "fixtures" / "honest",
        REPO / "cuda_agent_mcp" / "workspace" / "pristine",
    ]
    suffixes = {".cu", ".cpp", ".cc", ".h", ".cuh", ".hpp"}
    return sorted(p for root in roots for p in root.rglob("*") if p.suffix in suffixes)


def test_no_honest_fixture_or_example_trips_the_input_checks() -> None:
    sources = _honest_sources()
    assert len(sources) >= 30
    for path in sources:
        assert name_problem(f"kernels/{path.name}") is None, path
        relpath = "kernels/" + path.name if path.parent.name == "kernels" else path.name
        staging = path.parent.parent if path.parent.name == "kernels" else path.parent
        found = scan_directives(staging, [relpath])
        assert found == [], (path, found)


# -- redaction ------------------------------------------------------------------------------------


@pytest.fixture
def scope(tmp_path: Path) -> PathScope:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.cu").write_text("int x;\n")
    return PathScope.of(tmp_path, [Path("/usr/local/cuda")])


def test_messages_excerpts_and_contexts_of_outside_files_are_withheld(scope: PathScope) -> None:
    output = (
        "In file included from kernels/k.cu:3:\n"
        "/home/user/secret.h:1:5: error: 'TOKEN' does not name a type\n"
        "    1 | TOKEN secret_value;\n"
        "      |     ^~~~~~~~~~~~\n"
        '/home/user/secret.h(2): error: identifier "TOKEN2" is undefined\n'
        "  TOKEN2 more;\n"
        "  ^\n"
        "\n"
        "kernels/k.cu:4:1: error: expected ';'\n"
        "    4 | int y\n"
        "      | ^\n"
        "/home/user/secret.h: In function 'void f()':\n"
        f"{scope.staging}/kernels/k.cu:9:2: warning: unused variable\n"
    )
    redacted = redact_output(output, scope)
    assert "TOKEN" not in redacted and "secret_value" not in redacted and "/home/user" not in redacted
    assert redacted.count(f"{OUTSIDE}: error: withheld") == 2
    assert "kernels/k.cu:4:1: error: expected ';'\n    4 | int y" in redacted  # the agent's own excerpt stays
    assert "In file included from kernels/k.cu:3:" in redacted
    assert f"{OUTSIDE}: In function" in redacted
    assert "\nkernels/k.cu:9:2: warning" in redacted  # the staging directory's name is not shown


def test_a_failure_to_open_reads_the_same_whether_the_file_exists_or_not(scope: PathScope) -> None:
    exists = redact_output("kernels/k.cu:1:10: fatal error: /etc/shadow: Permission denied\n", scope)
    missing = redact_output(
        "kernels/k.cu:1:10: fatal error: /etc/shadowz: No such file or directory\n", scope
    )
    assert exists.replace("shadow", "X") == missing.replace("shadowz", "X")
    assert "Permission denied" not in exists and "No such file" not in missing
    gas = redact_output(".tmp/cc1.s:4: Error: file not found: /etc/shadow\n", scope)
    assert "file not found" not in gas and "/etc/shadow: not in the workspace" in gas


def test_toolchain_and_workspace_messages_are_left_as_they_are(scope: PathScope) -> None:
    output = (
        "kernels/k.cu:1:10: fatal error: missing.cuh: No such file or directory\n"
        "/usr/local/cuda/include/cuda_fp16.hpp(120): error: something in a header\n"
        "  const half x;\n"
        "  ^\n"
    )
    assert redact_output(output, scope) == output


def test_system_paths_the_view_shows_are_toolchain() -> None:
    scope = PathScope.of(Path("/nonexistent-staging"), [])
    assert scope.classify("/usr/include/stdio.h")[0] == "toolchain"
    assert scope.classify("/etc/passwd")[0] == "outside"
    assert scope.classify("/usr/include/../../etc/passwd")[0] == "outside"
    assert "/usr/include" in SYSTEM_READABLE and not any(
        p.startswith(("/etc/p", "/proc", "/home")) for p in SYSTEM_READABLE
    )
    assert os.path.isabs(SYSTEM_READABLE[0])
