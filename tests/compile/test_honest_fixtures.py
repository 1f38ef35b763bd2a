"""The honest suite's workspaces compile here (CPU, real nvcc), so CI catches a fixture that stops
building; the GPU suite (tests/gpu/test_honest_suite_gpu.py) builds and evaluates every one in full.

A torch binding costs about 20 s of g++ on two cores, so CI compiles every fixture's CUDA sources through
the builder (without the binding: the build then stops at the registration check) and only a few
fixtures in full: those whose bindings do more than the usual tensors-to-pointers (side streams,
fp16 and tensor maps, a cuBLASLt link).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.evaluation.audit import audit_workspace
from cuda_agent_mcp.results import BuildResult
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session, compile_kernels
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.nvcc

HONEST = EXAMPLES.parent / "tests" / "fixtures" / "honest"
FIXTURES = sorted(p.name for p in HONEST.iterdir() if (p / "model.py").is_file())
FULL_BUILDS = ("softplus_streams", "linear_fp16_wgmma", "gemm_add_relu_cublaslt")


def build(session: Session) -> BuildResult:
    return anyio.run(compile_kernels, session)


def copy_fixture(name: str, target: Path, *, bindings: bool = True) -> Path:
    ignored = ["*.so", "__pycache__", ".cuda-agent*"] + ([] if bindings else ["*_binding.cpp"])
    shutil.copytree(HONEST / name, target, ignore=shutil.ignore_patterns(*ignored))
    return target


def test_the_honest_suite_has_at_least_twenty_five_kernels_with_the_examples() -> None:
    examples = [p for p in EXAMPLES.iterdir() if (p / "model.py").is_file()]
    assert len(FIXTURES) + len(examples) >= 25


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_honest_kernel_compiles_and_passes_the_static_audit(
    fixture: str, tmp_path: Path, shared_build_cache: Path
) -> None:
    root = HONEST / fixture
    assert audit_workspace(root, load_task_file(root / "model.py").vendor_libraries) == []
    # Its CUDA sources alone, through nvcc with the build's own flags: without its binding the build
    # then stops at the registration check (build/registration.py), after every source compiled.
    session = Session.open(
        copy_fixture(fixture, tmp_path / "kernels", bindings=False), cache_dir=shared_build_cache
    )
    result = build(session)
    assert result.failure == "no_binding", result.summary + "\n" + result.log
    sources = [f.file for f in result.files if f.kind == "cu"]
    assert sources, "the fixture has no CUDA source"
    assert all(f.action in ("compiled", "cached") for f in result.files), result.files
    assert not [d for d in result.diagnostics if d.severity == "error" and d.tool != "c++"], (
        result.diagnostics
    )
    if any("__global__" in (root / source).read_text() for source in sources):  # matmul_cublas has none
        assert result.kernels, "ptxas reported no kernel"


@pytest.mark.parametrize("fixture", FULL_BUILDS)
def test_honest_kernels_with_unusual_bindings_build_in_full(
    fixture: str, tmp_path: Path, shared_build_cache: Path
) -> None:
    session = Session.open(copy_fixture(fixture, tmp_path / fixture), cache_dir=shared_build_cache)
    result = build(session)
    assert result.ok, result.summary + "\n" + result.log
    assert any(f.file.endswith("_binding.cpp") and f.action in ("compiled", "cached") for f in result.files)


def test_a_gemm_task_may_fuse_its_epilogue_with_cublaslt_and_the_build_links_it(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    gemm = Session.open(
        copy_fixture("gemm_add_relu_cublaslt", tmp_path / "gemm"), cache_dir=shared_build_cache
    )
    assert gemm.task.vendor_libraries == ("cublas",)  # nn.Linear: the paper's policy allows cuBLAS
    assert audit_workspace(gemm.workspace.root, gemm.task.vendor_libraries) == []  # cublasLt.h included
    result = build(gemm)
    assert result.ok, result.summary + "\n" + result.log
    needed = subprocess.run(["readelf", "-d", result.extension_path], capture_output=True, text=True).stdout
    assert "libcublasLt" in needed
    # The same source in a task without matrix products: its header is refused.
    relu = Session.open(
        copy_fixture("softplus_streams", tmp_path / "elementwise"), cache_dir=shared_build_cache
    )
    shutil.copy(
        gemm.workspace.root / "kernels" / "gemm_add_relu_cublaslt.cu", relu.workspace.root / "kernels"
    )
    findings = audit_workspace(relu.workspace.root, relu.task.vendor_libraries)
    # The header and each call into the library, all in that file (the audit reads names, not just includes).
    assert findings and {(f.file, f.rule) for f in findings} == {
        ("kernels/gemm_add_relu_cublaslt.cu", "forbidden_library")
    }
    assert "#include <cublasLt.h>" in findings[0].message
    assert any("cublasLtMatmul:" in f.message for f in findings)
