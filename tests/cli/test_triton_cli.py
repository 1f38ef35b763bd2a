"""The CLI in the Triton language: `workspace new --language triton` lays a Triton workspace out,
`compile --json` builds its @triton.jit kernels (one JSON object; errors at file:line) and `audit` judges it
by the Triton rules (the workspace's recorded language, not the CLI's default)."""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path

import pytest

from cuda_agent_mcp.workspace import Workspace
from tests.cli.test_cli import cli
from tests.languages.triton_workspaces import RELU_KERNEL, triton_model_new

pytestmark = pytest.mark.skipif(
    find_spec("triton") is None, reason="needs triton (CUDA builds of torch bring it)"
)


def _new(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    created = cli("workspace", "new", "examples/relu", str(workspace), "--language", "triton")
    assert created.returncode == 0, created.stderr
    return workspace


def test_workspace_new_lays_out_a_triton_workspace(tmp_path: Path) -> None:
    workspace = _new(tmp_path)
    assert Workspace.open(workspace).language == "triton"
    assert json.loads((workspace / ".cuda-agent" / "workspace.json").read_text())["language"] == "triton"
    assert "**triton**" in (workspace / "SKILL.md").read_text()
    assert "import triton" in (workspace / "model_new.py").read_text()
    assert not (workspace / "kernels").exists() and not (workspace / "binding.cpp").exists()


def test_compile_json_builds_the_triton_relu_and_places_an_error_at_its_line(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    workspace = _new(tmp_path)
    (workspace / "model_new.py").write_text(triton_model_new())
    built = cli("compile", str(workspace), "--json", cache=shared_build_cache)
    assert built.returncode == 0, built.stdout + built.stderr
    result = json.loads(built.stdout)  # the whole of stdout is one JSON object
    assert result["ok"] and result["language"] == "triton" and result["extension_path"] is None
    (kernel,) = result["kernels"]
    assert kernel["name"] == "relu_kernel" and kernel["file"] == "model_new.py" and kernel["registers"] > 0

    broken = RELU_KERNEL.replace("tl.maximum(x, 0.0)", "tl.maximum(x, no_such_name)")
    line = 8 + next(i for i, text in enumerate(broken.splitlines()) if "no_such_name" in text)
    (workspace / "model_new.py").write_text(triton_model_new(kernel=broken))
    failed = cli("compile", str(workspace), "--json", cache=shared_build_cache)
    assert failed.returncode == 1, failed.stderr
    result = json.loads(failed.stdout)
    assert result["failure"] == "compile_error" and "Traceback" not in failed.stdout + failed.stderr
    (error,) = [d for d in result["diagnostics"] if d["severity"] == "error"]
    assert (error["file"], error["line"], error["tool"]) == ("model_new.py", line, "triton")
    assert "no_such_name" in error["message"]


def test_compile_for_an_older_arch_reads_its_kernels_registers(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    # Cubins for sm_80 keep the register count in the kernel's section header, not in an attribute record.
    workspace = _new(tmp_path)
    (workspace / "model_new.py").write_text(triton_model_new())
    built = cli("compile", str(workspace), "--arch", "sm_80", "--json", cache=shared_build_cache)
    assert built.returncode == 0, built.stdout + built.stderr
    result = json.loads(built.stdout)
    assert result["ok"] and result["arch"] == "sm_80"
    (kernel,) = result["kernels"]
    assert kernel["name"] == "relu_kernel" and kernel["arch"] == "sm_80" and kernel["registers"] > 0


def test_audit_judges_a_triton_workspace_by_the_triton_rules(tmp_path: Path) -> None:
    workspace = _new(tmp_path)
    # `import triton` is a forbidden library to a CUDA workspace: clean here only under the Triton rules.
    (workspace / "model_new.py").write_text(triton_model_new())
    clean = cli("audit", str(workspace), cache=tmp_path / "cache")
    assert clean.returncode == 0 and "clean" in clean.stdout, clean.stdout + clean.stderr

    (workspace / "model_new.py").write_text(triton_model_new(imports="from triton.runtime import driver"))
    found = cli("audit", str(workspace), cache=tmp_path / "cache")
    assert found.returncode == 1 and "Traceback" not in found.stderr
    assert "model_new.py:5" in found.stdout and "triton.runtime" in found.stdout, found.stdout
    as_json = json.loads(cli("audit", str(workspace), "--json", cache=tmp_path / "cache").stdout)
    assert not as_json["clean"]
    assert {(f["file"], f["line"], f["rule"]) for f in as_json["findings"]} == {
        ("model_new.py", 5, "forbidden_library")
    }
