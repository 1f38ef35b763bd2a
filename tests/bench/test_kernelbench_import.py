"""Importing KernelBench single-file solutions: sources extracted in a sandboxed child, laid out as
workspace files, refused with a clear line where they cannot be; one built with the project's builder."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.agent.snapshot import restore
from cuda_agent_mcp.bench.kernelbench_import import (
    KernelBenchImport,
    import_kernelbench_solution,
    loader_calls,
    rewrite_model_new,
    solution_language,
)
from cuda_agent_mcp.bench.rules import task_under
from cuda_agent_mcp.bench.runner import KERNELBENCH_BUILD_LIMITS
from cuda_agent_mcp.evaluation.audit import audit_workspace
from cuda_agent_mcp.executors import LocalExecutor, SandboxedExecutor
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session, compile_kernels
from tests.conftest import EXAMPLES, REPO

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "kernelbench_style"
SUITE = REPO / "benchmarks" / "suites" / "kernelbench_singlefile"
TRITON_FILES = REPO / "benchmarks" / "suites" / "triton_kernelbench"


def imported(name: str, tmp_path: Path, source: Path = FIXTURES) -> KernelBenchImport:
    return anyio.run(
        lambda: import_kernelbench_solution(
            source / name, executor=LocalExecutor(), scratch_root=tmp_path / "scratch"
        )
    )


def test_a_kernelbench_solution_becomes_a_cuda_unit_a_binding_and_a_model_new_without_the_loader(
    tmp_path: Path,
) -> None:
    result = imported("relu_dispatch.py", tmp_path)
    assert result.ok, result.message
    assert sorted(result.files) == [
        "kernels/relu_dispatch.cu",
        "kernels/relu_dispatch_binding.cpp",
        "model_new.py",
    ]
    cuda = result.files["kernels/relu_dispatch.cu"]
    assert cuda.index("#include <torch/types.h>") < cuda.index(
        "__global__ void relu_kernel"
    )  # load_inline's headers
    binding = result.files["kernels/relu_dispatch_binding.cpp"]
    assert "torch::Tensor relu_forward(torch::Tensor x);" in binding
    assert 'm.def("relu_forward", torch::wrap_pybind_function(relu_forward), "relu_forward");' in binding
    assert "REGISTER_BINDING(relu_dispatch, cuda_agent_register_relu_dispatch)" in binding
    model_new = result.files["model_new.py"]
    assert "relu_ext = cuda_extension\n" in model_new and "load_inline(" not in model_new
    assert model_new.splitlines()[0].startswith("import cuda_extension")
    assert result.calls[0].functions == ["relu_forward"] and result.calls[0].ignored_flags == ["-O3"]
    assert any("ignored" in note for note in result.notes)


def test_two_extensions_of_one_name_and_a_renamed_module_import_stay_apart(tmp_path: Path) -> None:
    result = imported("two_extensions.py", tmp_path)
    assert result.ok, result.message
    assert {
        "kernels/scale.cu",
        "kernels/scale_2.cu",
        "kernels/scale_binding.cpp",
        "kernels/scale_2_binding.cpp",
    } < set(result.files)
    assert '"multiply by a scalar"' in result.files["kernels/scale_binding.cpp"]
    assert result.files["model_new.py"].count("= cuda_extension") == 2


def test_a_cpp_source_with_its_own_pybind11_module_is_registered_with_the_harness(tmp_path: Path) -> None:
    result = imported("pybind_module.py", tmp_path)
    assert result.ok, result.message
    binding = result.files["kernels/negate_binding.cpp"]
    assert "PYBIND11_MODULE" not in binding
    assert "static void cuda_agent_module_negate(pybind11::module& m)" in binding
    assert "REGISTER_BINDING(negate, cuda_agent_module_negate)" in binding


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("no_model_new.py", "defines no class ModelNew"),
        ("raises_on_import.py", "RuntimeError: this solution needs a file that is not there"),
        ("loader_in_init.py", "at module level"),
        ("forges_its_report.py", "malformed"),
    ],
)
def test_solutions_that_cannot_be_imported_are_refused_with_one_line(
    tmp_path: Path, name: str, message: str
) -> None:
    result = imported(name, tmp_path)
    assert not result.ok and message in result.message and "\n" not in result.message
    assert result.files == {}


def test_a_file_that_is_not_python_is_refused_before_any_child_runs(tmp_path: Path) -> None:
    bad = tmp_path / "broken.py"
    bad.write_text("class ModelNew(:\n")
    result = imported("broken.py", tmp_path, source=tmp_path)
    assert not result.ok and "not a Python file" in result.message
    assert not (tmp_path / "scratch").exists() or not any((tmp_path / "scratch").iterdir())


def test_loader_calls_are_found_however_the_loader_was_imported() -> None:
    code = (
        "import torch.utils.cpp_extension as ce\nfrom torch.utils.cpp_extension import load_inline as li\n"
        "from torch.utils import cpp_extension\nimport torch\n"
        "a = ce.load_inline(name='a', cpp_sources='')\nb = li(name='b', cpp_sources='')\n"
        "c = cpp_extension.load(name='c', sources=[])\nd = torch.utils.cpp_extension.load_inline(name='d', cpp_sources='')\n"
        "e = something.load(1)\n"
    )
    sites = loader_calls(ast.parse(code))
    assert [ast.unparse(s.args[0] if s.args else s.keywords[0].value) for s in sites] == [
        "'a'",
        "'b'",
        "'c'",
        "'d'",
    ]
    rewritten = rewrite_model_new(code, sites)
    assert rewritten.count("= cuda_extension\n") == 4 and "something.load(1)" in rewritten
    ast.parse(rewritten)


def test_the_suites_kernelbench_style_solutions_all_import(tmp_path: Path) -> None:
    files = sorted(SUITE.glob("level*/*.py"))
    assert len(files) >= 20
    results: dict[Path, KernelBenchImport] = {}
    limiter = anyio.CapacityLimiter(2)  # each import's child pays a torch import: two at a time

    async def one(path: Path) -> None:
        async with limiter:
            results[path] = await import_kernelbench_solution(
                path, executor=LocalExecutor(), scratch_root=tmp_path
            )

    async def all_of_them() -> None:
        async with anyio.create_task_group() as group:
            for path in files:
                group.start_soon(one, path)

    anyio.run(all_of_them)
    for path in files:
        result = results[path]
        assert result.ok, f"{path.name}: {result.message}"
        assert any(name.endswith(".cu") for name in result.files), path.name
        assert result.language == "cuda", path.name


@pytest.mark.nvcc
def test_an_imported_solution_builds_under_the_kernelbench_rules_with_torch_headers_in_its_cuda_unit(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    result = imported("relu_dispatch.py", tmp_path)
    reference = tmp_path / "relu.py"
    shutil.copy(EXAMPLES / "relu" / "model.py", reference)
    task = load_task_file(reference, task_id="cpu/relu")
    session = Session.create(
        task_under("kernelbench", task, "kernelbench"),
        tmp_path / "ws",
        cache_dir=shared_build_cache,
        build_limits=KERNELBENCH_BUILD_LIMITS,
    )
    restore(session, result.files)
    build = anyio.run(lambda: compile_kernels(session))
    assert build.ok, build.log[-3000:]
    assert [k.name for k in build.kernels] == ["relu_kernel(float const*, float*, long)"]
    # The evaluator's static audit still runs over the imported files: nothing but the glue it allows.
    findings = audit_workspace(session.workspace.root)
    assert {f.rule for f in findings} <= {"torch_compute"}
    # Under the cuda-agent rules the same unit has no torch headers and does not build.
    plain = Session.create(task, tmp_path / "plain", cache_dir=shared_build_cache)
    restore(plain, result.files)
    refused = anyio.run(lambda: compile_kernels(plain))
    assert not refused.ok and "torch/types.h: No such file" in refused.summary


class NoChild(SandboxedExecutor):
    """An isolating executor (so the importer uses it as it is) that fails the test if anything runs with
    it: a Triton file needs no extraction."""

    async def run(self, argv: list[str], *args: object, **kwargs: object):  # type: ignore[override]
        raise AssertionError(f"a child ran: {argv}")


def imported_triton(path: Path, tmp_path: Path) -> KernelBenchImport:
    return anyio.run(
        lambda: import_kernelbench_solution(path, executor=NoChild(), scratch_root=tmp_path / "scratch")
    )


def test_a_kernelbench_triton_solution_becomes_a_triton_workspaces_model_new_unchanged(
    tmp_path: Path,
) -> None:
    relu = TRITON_FILES / "level1" / "19.py"
    result = imported_triton(relu, tmp_path)
    assert result.ok, result.message
    assert result.language == "triton"
    assert result.files == {"model_new.py": relu.read_text()}  # no loader to replace, no kernels/ files
    assert result.calls == [] and any("Triton" in note for note in result.notes)
    # Laid out in a Triton workspace, the imported file is the session's candidate and audits clean.
    session = Session.create(
        load_task_file(EXAMPLES / "relu" / "model.py", task_id="cpu/relu"),
        tmp_path / "ws",
        cache_dir=tmp_path / "cache",
        language="triton",
    )
    restore(session, result.files)
    assert (session.workspace.root / "model_new.py").read_text() == relu.read_text()
    assert not (session.workspace.root / "kernels").exists()
    assert audit_workspace(session.workspace.root, language="triton") == []


def test_every_file_of_the_triton_suite_imports_as_triton(tmp_path: Path) -> None:
    files = sorted(TRITON_FILES.glob("level*/*.py"))
    assert len(files) >= 15
    for path in files:
        result = imported_triton(path, tmp_path)
        assert (result.ok, result.language) == (True, "triton"), f"{path}: {result.message}"


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("import triton\n\nclass Model:\n    pass\n", "defines no class ModelNew"),
        (
            "import triton\nfrom torch.utils.cpp_extension import load_inline\n"
            "ext = load_inline(name='x', cpp_sources='')\n\nclass ModelNew:\n    pass\n",
            "one kernel language",
        ),
    ],
)
def test_triton_solutions_that_cannot_be_laid_out_are_refused_with_one_line(
    tmp_path: Path, code: str, message: str
) -> None:
    path = tmp_path / "solution.py"
    path.write_text(code)
    result = imported_triton(path, tmp_path)
    assert (result.ok, result.language) == (False, "triton")
    assert message in result.message and "\n" not in result.message and result.files == {}


@pytest.mark.parametrize(
    ("code", "language"),
    [
        ("import triton\n", "triton"),
        ("import triton.language as tl\n", "triton"),
        ("from triton import jit\n", "triton"),
        ("def f():\n    import triton\n", "triton"),
        ("from torch.utils.cpp_extension import load_inline\n", "cuda"),
        ("import tritonclient\nfrom .triton import x\n", "cuda"),  # another package; a relative module
        ("class ModelNew(:\n", "cuda"),  # not Python: the import says so, as a CUDA file's would
    ],
)
def test_a_single_file_is_triton_where_it_imports_triton(code: str, language: str) -> None:
    assert solution_language(code) == language
