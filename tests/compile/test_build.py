"""Real nvcc/g++ builds of workspaces: what is compiled, what is reused, and how failures are reported."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.build import BuildLimits
from cuda_agent_mcp.results import BuildResult
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session, compile_kernels
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.nvcc

SOLUTION_FILES = ("model_new.py", "kernels")


def new_session(example: str, directory: Path, cache: Path, **options: object) -> Session:
    """A fresh workspace laid out from an example task, with the example's solution copied in."""
    task = load_task_file(EXAMPLES / example / "model.py", task_id=f"examples/{example}")
    session = Session.create(task, directory, cache_dir=cache, **options)
    for name in SOLUTION_FILES:
        source, target = EXAMPLES / example / name, session.workspace.root / name
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy(source, target)
    return session


def build(session: Session) -> BuildResult:
    return anyio.run(compile_kernels, session)


def actions(result: BuildResult) -> dict[str, str]:
    return {f.file: f.action for f in result.files}


@pytest.fixture
def relu(tmp_path: Path, shared_build_cache: Path) -> Session:
    return new_session("relu", tmp_path / "relu", shared_build_cache)


def test_a_second_build_of_an_unchanged_workspace_compiles_nothing(relu: Session) -> None:
    first = build(relu)
    assert first.ok, first.summary
    second = build(relu)
    assert second.ok
    assert set(actions(second).values()) == {"cached"}
    assert second.build_key == first.build_key
    assert second.source_hash == first.source_hash


def test_editing_one_cu_file_recompiles_only_that_file(relu: Session) -> None:
    assert build(relu).ok
    kernel = relu.workspace.root / "kernels" / "relu.cu"
    kernel.write_text(kernel.read_text().replace("const int threads = 256;", "const int threads = 512;"))
    result = build(relu)
    assert result.ok, result.summary
    assert actions(result) == {
        "binding.cpp": "cached",
        "kernels/relu.cu": "compiled",
        "kernels/relu_binding.cpp": "cached",
    }


def test_every_build_is_tied_to_the_hash_of_the_sources_it_used(relu: Session) -> None:
    before = build(relu)
    (relu.workspace.root / "kernels" / "relu.cu").write_text(
        (relu.workspace.root / "kernels" / "relu.cu").read_text() + "\n// changed\n"
    )
    after = build(relu)
    assert after.ok
    assert after.source_hash != before.source_hash
    assert after.build_key != before.build_key
    assert (
        Path(after.extension_path or "").read_bytes()
        == Path(after.workspace_extension_path or "").read_bytes()
    )


def test_editing_a_local_header_recompiles_the_units_that_may_include_it(relu: Session) -> None:
    root = relu.workspace.root
    (root / "kernels" / "tuning.cuh").write_text("#pragma once\nconstexpr int kUnroll = 1;\n")
    kernel = root / "kernels" / "relu.cu"
    kernel.write_text('#include "tuning.cuh"\n' + kernel.read_text())
    assert build(relu).ok
    (root / "kernels" / "tuning.cuh").write_text("#pragma once\nconstexpr int kUnroll = 2;\n")
    result = build(relu)
    assert result.ok, result.summary
    assert actions(result)["binding.cpp"] == "cached"
    assert actions(result)["kernels/relu.cu"] == "compiled"


def test_the_harness_binding_is_compiled_once_and_shared_by_other_workspaces(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    first = build(new_session("relu", tmp_path / "a", shared_build_cache))
    second = build(new_session("row_sum", tmp_path / "b", shared_build_cache))
    assert first.ok and second.ok, (first.summary, second.summary)
    assert actions(second)["binding.cpp"] == "cached"
    assert actions(second)["kernels/row_sum.cu"] in ("compiled", "cached")


def test_ptxas_resource_usage_is_reported_per_kernel(tmp_path: Path, shared_build_cache: Path) -> None:
    result = build(new_session("row_sum", tmp_path / "ws", shared_build_cache))
    assert result.ok, result.summary
    (kernel,) = result.kernels
    assert kernel.name.startswith("row_sum_kernel(")
    assert kernel.file == "kernels/row_sum.cu"
    assert kernel.registers > 0
    assert kernel.shared_memory_bytes == 8 * 4  # one float per warp of a 256-thread block
    assert kernel.arch.startswith("sm_")


def test_a_compile_error_is_reported_with_file_line_and_column(relu: Session) -> None:
    kernel = relu.workspace.root / "kernels" / "relu.cu"
    lines = kernel.read_text().splitlines()
    lines.insert(5, "  int broken = undefined_name;")
    kernel.write_text("\n".join(lines) + "\n")
    result = build(relu)
    assert not result.ok
    assert result.failure == "compile_error"
    assert result.extension_path is None
    error = result.errors[0]
    assert (error.file, error.line, error.column) == ("kernels/relu.cu", 6, 16)
    assert "undefined_name" in error.message
    assert "kernels/relu.cu:6:16" in result.summary
    assert actions(result)["kernels/relu.cu"] == "failed"


def test_a_binding_compile_error_is_reported_by_the_host_compiler(relu: Session) -> None:
    binding = relu.workspace.root / "kernels" / "relu_binding.cpp"
    binding.write_text(binding.read_text().replace("torch::empty_like(input);", "torch::empty_like(input)"))
    result = build(relu)
    assert not result.ok and result.failure == "compile_error"
    assert result.errors[0].file == "kernels/relu_binding.cpp"
    assert result.errors[0].tool == "c++"
    assert result.errors[0].line is not None


def test_a_launcher_the_binding_calls_but_no_kernel_defines_is_a_link_error(relu: Session) -> None:
    kernel = relu.workspace.root / "kernels" / "relu.cu"
    kernel.write_text(kernel.read_text().replace("void relu_launcher(", "void relu_launcher_v2("))
    result = build(relu)
    assert not result.ok
    assert result.failure == "link_error"
    (error,) = result.errors
    assert "relu_launcher" in error.message
    assert error.file == "kernels/relu_binding.cpp"


def test_edited_harness_files_are_ignored_and_reported(relu: Session) -> None:
    root = relu.workspace.root
    for name in ("binding.cpp", "binding_registry.h"):
        (root / name).chmod(0o644)
        (root / name).write_text("#error this file was tampered with\n")
    result = build(relu)
    assert result.ok, result.summary
    assert result.ignored_protected_files == ["binding.cpp", "binding_registry.h"]


def test_a_workspace_without_kernel_sources_fails_with_a_hint(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    task = load_task_file(EXAMPLES / "relu" / "model.py")
    result = build(Session.create(task, tmp_path / "empty", cache_dir=shared_build_cache))
    assert not result.ok
    assert result.failure == "no_sources"
    assert "kernels/" in result.summary


def test_a_compiler_running_past_its_time_limit_is_killed_and_reported(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    session = new_session(
        "relu", tmp_path / "slow", shared_build_cache, build_limits=BuildLimits(compile_timeout_s=0.05)
    )
    kernel = session.workspace.root / "kernels" / "relu.cu"
    kernel.write_text(kernel.read_text() + f"\n// unique content: {tmp_path}\n")
    result = build(session)
    assert not result.ok
    assert result.failure == "timeout"
    assert actions(result)["kernels/relu.cu"] == "timed_out"
    assert any("longer than" in d.message for d in result.errors)


def test_a_compiler_flooding_its_output_is_stopped(tmp_path: Path, shared_build_cache: Path) -> None:
    session = new_session(
        "relu", tmp_path / "loud", shared_build_cache, build_limits=BuildLimits(max_output_bytes=4096)
    )
    noisy = "\n".join(f'#warning "noise {i} {"x" * 80}"' for i in range(400))
    (session.workspace.root / "kernels" / "noise.cu").write_text(noisy + "\n")
    result = build(session)
    assert not result.ok
    assert result.failure == "output_limit"
    assert actions(result)["kernels/noise.cu"] == "failed"


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.iterdir() if (p / "model.py").exists()))
def test_every_bundled_example_builds_as_it_is_in_the_repository(
    example: str, tmp_path: Path, shared_build_cache: Path
) -> None:
    # A copy: a build writes cuda_extension.so into its workspace, and the repository is not ours to change.
    copy = tmp_path / example
    shutil.copytree(EXAMPLES / example, copy, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    session = Session.open(copy, cache_dir=shared_build_cache)
    result = build(session)
    assert result.ok, result.summary + "\n" + result.log
    assert result.errors == []
    assert result.kernels, "ptxas reported no kernel"


def test_a_build_runs_inside_the_sandboxed_executor(tmp_path: Path, shared_build_cache: Path) -> None:
    from cuda_agent_mcp.executors import SandboxedExecutor

    session = new_session("relu", tmp_path / "sandboxed", shared_build_cache, executor=SandboxedExecutor())
    kernel = session.workspace.root / "kernels" / "relu.cu"
    kernel.write_text(kernel.read_text() + "\n// built in the sandbox\n")
    result = build(session)
    assert result.ok, result.summary + result.log
    assert actions(result)["kernels/relu.cu"] == "compiled"


def test_a_gemm_task_links_cublas_and_a_task_without_matrix_products_may_not(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    from cuda_agent_mcp.evaluation.audit import audit_workspace

    fixture = EXAMPLES.parent / "tests" / "fixtures" / "honest" / "matmul_cublas"
    root = tmp_path / "gemm"
    shutil.copytree(fixture, root, ignore=shutil.ignore_patterns("*.so", ".cuda-agent*", "__pycache__"))
    gemm = Session.open(root, cache_dir=shared_build_cache)
    assert gemm.task.vendor_libraries == ("cublas",)  # the paper's policy, read from torch.matmul
    result = build(gemm)
    assert result.ok, result.summary + "\n" + result.log
    needed = subprocess.run(["readelf", "-d", result.extension_path], capture_output=True, text=True).stdout
    assert "libcublas" in needed
    # The same kernel for a task the policy gives no library: refused by the audit, and not linked.
    elementwise = new_session("relu", tmp_path / "relu", shared_build_cache)
    shutil.copytree(fixture / "kernels", elementwise.workspace.root / "kernels", dirs_exist_ok=True)
    findings = audit_workspace(elementwise.workspace.root, elementwise.task.vendor_libraries)
    assert {f.rule for f in findings} == {"forbidden_library"}  # the header and every cuBLAS call
    assert any("#include <cublas" in f.message for f in findings), findings
    unlinked = build(elementwise)
    assert not unlinked.ok and unlinked.failure == "link_error"
    assert any("cublas" in d.message.lower() for d in unlinked.diagnostics), unlinked.diagnostics
