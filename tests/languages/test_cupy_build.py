"""The CuPy language on the CPU: layout, the NVRTC build in the confined view, the generated module,
the audit's view of it, and what the evaluation stages."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.errors import WorkspaceError
from cuda_agent_mcp.evaluation.audit import audit_workspace
from cuda_agent_mcp.tools import compile_kernels
from cuda_agent_mcp.tools.evaluate import workspace_candidate
from cuda_agent_mcp.workspace import Workspace
from tests.languages.cupy_workspaces import SIMPLE_KERNEL, cupy_session, simple_model_new

pytestmark = pytest.mark.nvcc


def test_a_cupy_workspace_records_its_language_and_has_no_host_harness(tmp_path: Path) -> None:
    session = cupy_session(tmp_path, tmp_path / "cache")
    root = session.workspace.root
    assert json.loads((root / ".cuda-agent" / "workspace.json").read_text())["language"] == "cupy"
    assert not (root / "binding.cpp").exists() and not (root / "binding_registry.h").exists()
    assert "NVRTC" in (root / "SKILL.md").read_text()
    assert Workspace.open(root).language == "cupy"


def test_an_unknown_language_in_the_record_is_refused_in_one_line(tmp_path: Path) -> None:
    root = cupy_session(tmp_path, tmp_path / "cache").workspace.root
    meta = root / ".cuda-agent" / "workspace.json"
    meta.write_text(json.dumps(json.loads(meta.read_text()) | {"language": "fortran"}))
    with pytest.raises(WorkspaceError, match="'fortran'"):
        Workspace.open(root)


def test_nvrtc_builds_each_kernel_file_in_the_confined_view_and_caches_it(tmp_path: Path) -> None:
    session = cupy_session(tmp_path, tmp_path / "cache")
    first = anyio.run(compile_kernels, session)
    assert first.ok, first.summary
    assert first.language == "cupy" and "landlock" in first.confinement
    assert {k.name for k in first.kernels} == {"relu_vec4_kernel", "relu_tail_kernel"}
    assert all(k.registers > 0 for k in first.kernels)
    assert [f.action for f in first.files] == ["compiled"]
    again = anyio.run(compile_kernels, session)
    assert [f.action for f in again.files] == ["cached"] and again.build_key == first.build_key
    module = Path(first.extension_path or "")
    assert module.name == "cuda_extension.py" and not module.stat().st_mode & stat.S_IWUSR
    assert (session.workspace.root / "cuda_extension.py").read_text() == module.read_text()


def test_a_compile_error_is_a_diagnostic_at_its_line(tmp_path: Path) -> None:
    broken = SIMPLE_KERNEL.replace("fmaxf(x[i], 0.f)", "fmaxf(x[i], undefined_value)")
    session = cupy_session(tmp_path, tmp_path / "cache", kernels={"relu.cu": broken})
    result = anyio.run(compile_kernels, session)
    assert not result.ok and result.failure == "compile_error"
    error = result.errors[0]
    assert (error.file, error.line) == ("kernels/relu.cu", 3)
    assert "undefined_value" in error.message and "kernels/relu.cu:3" in result.summary


def test_host_code_is_refused_by_name(tmp_path: Path) -> None:
    session = cupy_session(
        tmp_path, tmp_path / "cache", kernels={"relu.cu": SIMPLE_KERNEL, "relu_binding.cpp": "int x;\n"}
    )
    result = anyio.run(compile_kernels, session)
    assert not result.ok and result.failure == "refused_input"
    assert "kernels/relu_binding.cpp" in result.summary and "no host code" in result.summary


def test_a_kernel_without_extern_c_cannot_be_launched_and_the_build_says_why(tmp_path: Path) -> None:
    mangled = SIMPLE_KERNEL.replace('extern "C" ', "")
    result = anyio.run(
        compile_kernels, cupy_session(tmp_path, tmp_path / "cache", kernels={"relu.cu": mangled})
    )
    assert not result.ok and result.failure == "no_binding"
    assert any('extern "C"' in d.message for d in result.diagnostics)


def test_one_kernel_name_in_two_files_is_a_link_error(tmp_path: Path) -> None:
    kernels = {"a.cu": SIMPLE_KERNEL, "b.cu": SIMPLE_KERNEL}
    result = anyio.run(compile_kernels, cupy_session(tmp_path, tmp_path / "cache", kernels=kernels))
    assert not result.ok and result.failure == "link_error"
    assert "relu_kernel" in result.summary and "kernels/a.cu" in result.summary


def test_an_include_outside_the_workspace_is_refused_before_nvrtc_reads_it(tmp_path: Path) -> None:
    leaking = '#include "/etc/passwd"\n' + SIMPLE_KERNEL
    result = anyio.run(
        compile_kernels, cupy_session(tmp_path, tmp_path / "cache", kernels={"relu.cu": leaking})
    )
    assert not result.ok and result.failure == "refused_input"
    assert "root:" not in result.log + " ".join(d.message for d in result.diagnostics)


def test_the_generated_module_exposes_the_kernels_and_nothing_else(tmp_path: Path) -> None:
    session = cupy_session(tmp_path, tmp_path / "cache")
    assert anyio.run(compile_kernels, session).ok
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import cuda_extension as e\n"
        "print(sorted(n for n in dir(e) if not n.startswith('__')))\n"
        "try:\n    e.cupy\nexcept AttributeError as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(session.workspace.root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    listed, missing = done.stdout.splitlines()[:2]
    assert listed == "['relu_tail_kernel', 'relu_vec4_kernel']"
    assert "no kernel 'cupy'" in missing and "relu_vec4_kernel" in missing


def test_the_evaluation_stages_the_builds_module_never_the_workspaces(tmp_path: Path) -> None:
    session = cupy_session(tmp_path, tmp_path / "cache")
    build = anyio.run(compile_kernels, session)
    forged = "FORGED = True\n"
    (session.workspace.root / "cuda_extension.py").write_text(forged)
    assert session.workspace.root / "cuda_extension.py" not in session.workspace.python_files()
    staged = tmp_path / "staged"
    staged.mkdir()
    workspace_candidate(session, build)(staged)
    assert (staged / "cuda_extension.py").read_text() == Path(build.extension_path or "").read_text()
    assert audit_workspace(session.workspace.root) == []  # the generated module is not the candidate's


def test_the_audit_refuses_reaching_inside_cuda_extension(tmp_path: Path) -> None:
    launch = "cuda_extension.relu_kernel._functions[0](((n + 255) // 256, 1, 1), (256, 1, 1), (x, y, n))"
    session = cupy_session(
        tmp_path, tmp_path / "cache", kernels={"relu.cu": SIMPLE_KERNEL}, model_new=simple_model_new(launch)
    )
    rules = {f.rule for f in audit_workspace(session.workspace.root)}
    assert "private_attribute" in rules


def test_an_honest_launch_passes_the_audit(tmp_path: Path) -> None:
    session = cupy_session(
        tmp_path, tmp_path / "cache", kernels={"relu.cu": SIMPLE_KERNEL}, model_new=simple_model_new()
    )
    assert audit_workspace(session.workspace.root) == []
