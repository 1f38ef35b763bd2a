"""The `cuda-agent` command line, run as a real process: readable output, JSON output, exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, REPO


def cli(
    *args: str, cache: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "COLUMNS": "200", **(env or {})}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    if cache is not None:
        environment["CUDA_AGENT_CACHE"] = str(cache)
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent_mcp", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
    )


def test_the_console_script_is_installed() -> None:
    script = shutil.which("cuda-agent")
    if script is None:
        pytest.skip("package not installed with its console script in this environment")
    done = subprocess.run([script, "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "compile" in done.stdout


def test_tasks_list_shows_the_bundled_examples_as_a_table_and_as_json(kernelbench: Path) -> None:
    table = cli("tasks", "list")
    assert table.returncode == 0, table.stderr
    assert "examples/relu" in table.stdout
    listing = json.loads(cli("tasks", "list", "--tasks", str(kernelbench), "--level", "3", "--json").stdout)
    assert listing["total"] == 50
    assert all(t["level"] == 3 for t in listing["tasks"])


def test_tasks_show_prints_metadata_inputs_and_source() -> None:
    done = cli("tasks", "show", "examples/bias_add_relu")
    assert done.returncode == 0, done.stderr
    assert "float32[8192, 4096]" in done.stdout
    assert "class Model" in done.stdout
    details = json.loads(cli("tasks", "show", "examples/bias_add_relu", "--json").stdout)
    assert details["probe"]["parameter_count"] == 4096


def test_usage_errors_are_one_readable_line_and_exit_code_2(tmp_path: Path) -> None:
    unknown = cli("tasks", "show", "kernelbench/level9/999")
    assert unknown.returncode == 2
    assert "unknown task 'kernelbench/level9/999'" in unknown.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("class Model(:\n")
    broken = cli("tasks", "list", "--tasks", str(bad))
    assert broken.returncode == 2
    assert f"{bad}:1: syntax error" in broken.stderr.replace("\n", "")
    not_a_workspace = cli("compile", str(tmp_path))
    assert not_a_workspace.returncode == 2 and "no model.py" in not_a_workspace.stderr
    for done in (unknown, broken, not_a_workspace):
        assert "Traceback" not in done.stderr + done.stdout


def test_a_reference_whose_inputs_are_not_tensors_is_refused_by_workspace_new(tmp_path: Path) -> None:
    source = (
        (EXAMPLES / "relu" / "model.py")
        .read_text()
        .replace("return [torch.randn(batch_size, dim)]", "return [1, 2]")
    )
    reference = tmp_path / "ints.py"
    reference.write_text(source)
    done = cli("workspace", "new", str(reference), str(tmp_path / "ws"))
    assert done.returncode == 2
    assert "get_inputs() must return a list of tensors, got [int, int]" in done.stderr
    assert not (tmp_path / "ws").exists()


@pytest.mark.nvcc
def test_workspace_new_then_compile_builds_an_example_and_reports_errors(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    workspace = tmp_path / "ws"
    created = cli("workspace", "new", "examples/relu", str(workspace))
    assert created.returncode == 0, created.stderr
    again = cli("workspace", "new", "examples/relu", str(workspace))
    assert again.returncode == 2 and "not empty" in again.stderr

    shutil.copytree(EXAMPLES / "relu" / "kernels", workspace / "kernels", dirs_exist_ok=True)
    shutil.copy(EXAMPLES / "relu" / "model_new.py", workspace / "model_new.py")
    built = cli("compile", str(workspace), cache=shared_build_cache)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "relu_vec4_kernel" in built.stdout and (workspace / "cuda_extension.so").exists()

    kernel = workspace / "kernels" / "relu.cu"
    kernel.write_text(kernel.read_text().replace("fmaxf(v.x, 0.f)", "fmaxf(v.x, zero)"))
    failed = cli("compile", str(workspace), "--json", cache=shared_build_cache)
    assert failed.returncode == 1
    result = json.loads(failed.stdout)
    assert result["failure"] == "compile_error"
    assert result["diagnostics"][0]["file"] == "kernels/relu.cu"
    assert "zero" in result["diagnostics"][0]["message"]


def test_a_malformed_arch_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = cli("compile", str(EXAMPLES / "relu"), "--arch", "hopper")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


@pytest.mark.nvcc
def test_verify_and_eval_report_verdicts_and_exit_codes(tmp_path: Path, shared_build_cache: Path) -> None:
    """On the CPU with a pure-PyTorch ModelNew: the whole verify path, the JSON shape and the exit codes."""
    small = (
        (EXAMPLES / "relu" / "model.py")
        .read_text()
        .replace("batch_size = 4096\ndim = 8192", "batch_size = 8\ndim = 16")
    )
    reference = tmp_path / "small_relu.py"
    reference.write_text(small)
    workspace = tmp_path / "ws"
    assert cli("workspace", "new", str(reference), str(workspace)).returncode == 0
    # No kernel sources: --device cpu checks pure-PyTorch candidates only (a workspace with kernels is refused).
    (workspace / "model_new.py").write_text(
        "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        return x.clamp_min(0)\n"
    )
    audited = cli("verify", str(workspace), "--device", "cpu", cache=shared_build_cache)
    assert audited.returncode == 1 and "forbidden_op" in audited.stdout
    passed = cli(
        "verify", str(workspace), "--device", "cpu", "--no-audit", "--json", cache=shared_build_cache
    )
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert json.loads(passed.stdout)["verdict"]["status"] == "passed"
    (workspace / "model_new.py").write_text(
        (workspace / "model_new.py").read_text().replace("clamp_min(0)", "abs()")
    )
    wrong = cli("eval", str(workspace), "--device", "cpu", "--no-audit", cache=shared_build_cache)
    assert wrong.returncode == 1
    assert "wrong_output" in wrong.stdout and "reward (milestones): -1" in wrong.stdout
    assert "Traceback" not in wrong.stdout + wrong.stderr

    # Every one of those results is in the journal, newest first (eval's own verify inside it).
    journal = cli("journal", "--json", "--limit", "4", cache=shared_build_cache)
    assert journal.returncode == 0, journal.stderr
    records = json.loads(journal.stdout)["records"]
    assert [(r["kind"], r["verdict"]) for r in records] == [
        ("verify", "wrong_output"),
        ("evaluate", "wrong_output"),
        ("verify", "passed"),
        ("verify", "rejected"),
    ]
    assert all(r["status"] == "done" and r["environment"].get("gpu") in ("cpu", None) for r in records)
    table = cli("journal", cache=shared_build_cache)
    assert table.returncode == 0 and "wrong_output" in table.stdout
