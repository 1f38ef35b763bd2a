"""The Triton language on the CPU: layout, the build in the confined view (every launch ModelNew makes
recorded on the meta device and compiled for sm_90), its diagnostics at file:line, what it refuses, and
what the evaluation stages. Triton compiles for the H200 without a GPU; the build needs no nvcc, but it
detects the toolchain (its fingerprint keys the cache), hence the nvcc mark."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.build.cubin import parameter_sizes, register_counts
from cuda_agent_mcp.results import BuildResult
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session, compile_kernels
from cuda_agent_mcp.tools.evaluate import workspace_candidate
from cuda_agent_mcp.workspace import Workspace
from tests.conftest import EXAMPLES
from tests.languages.triton_workspaces import RELU_KERNEL, triton_model_new, triton_session

pytestmark = pytest.mark.nvcc

LAUNCH = "relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)"
AUTOTUNED = (
    """@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256}, num_warps=2),
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 2048}, num_warps=8),
    ],
    key=["n"],
)
"""
    + RELU_KERNEL
)
SIBLING = "import triton\nimport triton.language as tl\n\n" + RELU_KERNEL


def build(session: Session) -> BuildResult:
    return anyio.run(compile_kernels, session)


def line_of(text: str, fragment: str) -> int:
    """The 1-based line of the only line holding `fragment`."""
    lines = [i for i, line in enumerate(text.splitlines(), 1) if fragment in line]
    assert len(lines) == 1, (fragment, lines)
    return lines[0]


def test_a_triton_workspace_is_laid_out_for_triton(tmp_path: Path) -> None:
    task = load_task_file(EXAMPLES / "relu" / "model.py", task_id="examples/relu")
    session = Session.create(task, tmp_path / "ws", cache_dir=tmp_path / "cache", language="triton")
    root = session.workspace.root
    assert json.loads((root / ".cuda-agent" / "workspace.json").read_text())["language"] == "triton"
    assert "Triton" in (root / "SKILL.md").read_text()
    skeleton = (root / "model_new.py").read_text()
    assert "import triton" in skeleton and "class ModelNew(nn.Module)" in skeleton
    assert not (root / "binding.cpp").exists() and not (root / "kernels").exists()
    assert Workspace.open(root).language == "triton"


def test_the_relu_builds_in_the_confined_view_and_is_cached_until_edited(tmp_path: Path) -> None:
    session = triton_session(tmp_path, tmp_path / "cache")
    first = build(session)
    assert first.ok, first.summary
    assert first.language == "triton" and "landlock" in first.confinement
    assert {k.name for k in first.kernels} == {"relu_kernel"}
    assert all(k.registers > 0 for k in first.kernels)
    assert [(f.file, f.kind, f.action) for f in first.files] == [("model_new.py", "py", "compiled")]
    assert first.extension_path is None  # nothing generated: the worker compiles the candidate's own modules
    again = build(session)
    assert [f.action for f in again.files] == ["cached"] and again.build_key == first.build_key
    (session.workspace.root / "model_new.py").write_text(
        triton_model_new(launch=LAUNCH.replace("1024", "512"))
    )
    edited = build(session)
    assert edited.ok and [f.action for f in edited.files] == ["compiled"]
    assert edited.build_key != first.build_key


@pytest.mark.parametrize(
    ("kernel", "launch", "offending", "said"),
    [
        pytest.param(
            RELU_KERNEL, LAUNCH.replace("1024", "1000"), "tl.arange(0, BLOCK)", "power of 2", id="arange"
        ),
        pytest.param(
            RELU_KERNEL.replace("tl.maximum(x, 0.0)", "tl.maximum(x, undefined_value)"),
            LAUNCH,
            "undefined_value",
            "undefined_value",
            id="undefined_name",
        ),
    ],
)
def test_a_kernel_that_does_not_compile_is_an_error_at_its_line(
    kernel: str, launch: str, offending: str, said: str, tmp_path: Path
) -> None:
    text = triton_model_new(kernel=kernel, launch=launch)
    result = build(triton_session(tmp_path, tmp_path / "cache", model_new=text))
    assert not result.ok and result.failure == "compile_error"
    error = result.errors[0]
    assert (error.file, error.line, error.tool) == ("model_new.py", line_of(text, offending), "triton")
    assert said in error.message and f"model_new.py:{error.line}" in result.summary


@pytest.mark.parametrize(
    ("launch", "said"),
    [
        pytest.param(
            LAUNCH.replace("n, BLOCK", "BLOCK"), "without a value for its parameter n", id="missing"
        ),
        pytest.param(
            LAUNCH.replace("BLOCK=1024", "BLOCK=1024, alpha=2.0"), "no parameter alpha", id="keyword"
        ),
        pytest.param(LAUNCH.replace("n, BLOCK=1024", "n, 1024, 7"), "launched with 5 positional", id="extra"),
    ],
)
def test_a_launch_that_does_not_fit_the_kernel_is_an_error_at_the_launch(
    launch: str, said: str, tmp_path: Path
) -> None:
    """The JIT would raise at the evaluation's first call: said here, where the launch is written."""
    text = triton_model_new(launch=launch)
    result = build(triton_session(tmp_path, tmp_path / "cache", model_new=text))
    assert not result.ok and result.failure == "compile_error"
    error = result.errors[0]
    assert (error.file, error.line) == ("model_new.py", line_of(text, "relu_kernel["))
    assert said in error.message and "relu_kernel(x_ptr, y_ptr, n, BLOCK)" in error.message


@pytest.mark.parametrize(
    ("text", "offending", "said"),
    [
        pytest.param(triton_model_new(launch=LAUNCH[:-1]), "relu_kernel[", "SyntaxError", id="syntax"),
        pytest.param(
            triton_model_new(imports="SCALE = 1 / 0"), "SCALE = 1 / 0", "ZeroDivisionError", id="import"
        ),
    ],
)
def test_a_module_that_cannot_be_imported_is_an_error_at_its_line(
    text: str, offending: str, said: str, tmp_path: Path
) -> None:
    result = build(triton_session(tmp_path, tmp_path / "cache", model_new=text))
    assert not result.ok and result.failure == "compile_error"
    error = result.errors[0]
    assert (error.file, error.line) == ("model_new.py", line_of(text, offending))
    assert said in error.message and f"model_new.py:{error.line}" in result.summary


@pytest.mark.parametrize(
    "needs", ["s = x.sum().item()", "z = torch.zeros(1, device='cuda')"], ids=["item", "cuda_tensor"]
)
def test_a_forward_that_cannot_run_on_the_meta_device_is_a_warning(needs: str, tmp_path: Path) -> None:
    text = triton_model_new(launch=f"{needs}\n        {LAUNCH}")
    result = build(triton_session(tmp_path, tmp_path / "cache", model_new=text))
    assert result.ok, result.summary
    assert {k.name for k in result.kernels} == {"relu_kernel"}
    warnings = [d for d in result.diagnostics if d.severity == "warning"]
    assert [(w.file, w.line) for w in warnings] == [("model_new.py", line_of(text, needs))]
    assert "meta device" in warnings[0].message


def test_every_config_of_an_autotuned_kernel_is_compiled(tmp_path: Path) -> None:
    launch = "relu_kernel[lambda meta: (triton.cdiv(n, meta['BLOCK']),)](x, y, n)"
    text = triton_model_new(kernel=AUTOTUNED, launch=launch)
    result = build(triton_session(tmp_path, tmp_path / "cache", model_new=text))
    assert result.ok, result.summary
    configs = AUTOTUNED.count("triton.Config(")
    notes = [d.message for d in result.diagnostics if d.severity == "note"]
    assert any(f"{configs} launch specialisation(s) compiled" in note for note in notes), notes
    assert [k.registers > 0 for k in result.kernels] == [True]


def test_a_cuda_source_in_a_triton_workspace_is_refused_by_name(tmp_path: Path) -> None:
    session = triton_session(tmp_path, tmp_path / "cache", files={"relu.cu": "__global__ void k() {}\n"})
    result = build(session)
    assert not result.ok and result.failure == "refused_input"
    assert "relu.cu" in result.summary and "@triton.jit" in result.summary


def test_a_workspace_without_a_triton_kernel_has_no_sources(tmp_path: Path) -> None:
    text = triton_model_new(kernel="", launch="pass")
    result = build(triton_session(tmp_path, tmp_path / "cache", model_new=text))
    assert not result.ok and result.failure == "no_sources" and "@triton.jit" in result.summary


def test_a_kernel_named_like_inductors_is_refused_with_a_rename(tmp_path: Path) -> None:
    text = triton_model_new(
        kernel=RELU_KERNEL.replace("relu_kernel", "triton_relu"),
        launch=LAUNCH.replace("relu_kernel", "triton_relu"),
    )
    result = build(triton_session(tmp_path, tmp_path / "cache", model_new=text))
    assert not result.ok and result.failure == "compile_error"
    error = result.errors[0]
    assert (error.file, error.line) == ("model_new.py", line_of(text, "def triton_relu"))
    assert "triton_relu" in error.message and "rename" in error.message


def test_kernels_in_a_module_beside_model_new_are_found_and_compiled(tmp_path: Path) -> None:
    text = triton_model_new(kernel="", imports="from my_kernels import relu_kernel")
    session = triton_session(tmp_path, tmp_path / "cache", model_new=text, files={"my_kernels.py": SIBLING})
    result = build(session)
    assert result.ok, result.summary
    assert [(k.file, k.name) for k in result.kernels] == [("my_kernels.py", "relu_kernel")]
    assert result.kernels[0].registers > 0
    assert sorted(f.file for f in result.files) == ["model_new.py", "my_kernels.py"]


def test_the_build_writes_nothing_into_the_workspace_and_the_evaluation_stages_its_modules(
    tmp_path: Path,
) -> None:
    text = triton_model_new(kernel="", imports="from my_kernels import relu_kernel")
    session = triton_session(tmp_path, tmp_path / "cache", model_new=text, files={"my_kernels.py": SIBLING})
    root = session.workspace.root

    def snapshot() -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    before = snapshot()
    result = build(session)
    assert result.ok, result.summary
    assert snapshot() == before and not list(root.glob("cuda_extension*"))
    assert [p.name for p in session.workspace.python_files()] == ["model_new.py", "my_kernels.py"]
    staged = tmp_path / "staged"
    staged.mkdir()
    workspace_candidate(session, result)(staged)
    assert sorted(p.name for p in staged.iterdir()) == ["model_new.py", "my_kernels.py"]
    assert (staged / "my_kernels.py").read_text() == SIBLING


def _compiled_relu_cubin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """The ReLU compiled for sm_90 in this process, with Triton's cache in tmp_path (never the user's)."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    module_file = tmp_path / "cubin_relu.py"
    module_file.write_text(SIBLING)  # Triton reads a kernel's source from its file
    spec = importlib.util.spec_from_file_location("cubin_relu", module_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "cubin_relu", module)
    spec.loader.exec_module(module)
    source = ASTSource(
        fn=module.relu_kernel,
        signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
        constexprs={"BLOCK": 1024},
    )
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32))
    assert (tmp_path / "triton-cache").is_dir()
    return bytes(compiled.asm["cubin"])


def test_registers_are_read_from_a_triton_cubin_and_garbage_reads_as_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cubin = _compiled_relu_cubin(tmp_path, monkeypatch)
    counts = register_counts(cubin)
    assert set(counts) == {"relu_kernel"} and counts["relu_kernel"] > 0
    for garbage in (b"", b"garbage bytes", b"\x7fELF" + bytes(60), b"not a cubin" * 40, cubin[:100]):
        assert register_counts(garbage) == {} and parameter_sizes(garbage) == {}
    # Cut anywhere, a cubin reads as part of its records or none: never an exception.
    for cut in range(0, len(cubin), max(1, len(cubin) // 64)):
        assert set(register_counts(cubin[:cut])) <= {"relu_kernel"}
