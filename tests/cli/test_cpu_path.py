"""Issue 26, without a GPU: one honest path. `--device cpu` checks pure-PyTorch candidates only and says so
in one line for anything else; verify, profile, eval and bench run share their options and their audit."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import typer

from cuda_agent_mcp.cli.app import app
from tests.cli.first_hour import (
    NO_GPU,
    cuda_agent,
    new_workspace,
    no_traceback,
    one_json,
    one_line_error,
    torch_workspace,
)
from tests.conftest import EXAMPLES

EVALUATING = ("verify", "profile", "eval")
# A ModelNew that computes with PyTorch (torch.sum): what the audit refuses, in every command alike.
TORCH_SUM = (
    "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        return x.clamp_min(0) + 0 * torch.sum(x)\n"
)


def kernel_workspace(tmp_path: Path) -> Path:
    """A workspace with the relu example's CUDA kernels and its ModelNew that calls them."""
    workspace = new_workspace(tmp_path)
    shutil.copytree(EXAMPLES / "relu" / "kernels", workspace / "kernels", dirs_exist_ok=True)
    shutil.copy(EXAMPLES / "relu" / "model_new.py", workspace / "model_new.py")
    return workspace


@pytest.mark.parametrize("command", EVALUATING)
def test_cpu_on_a_workspace_with_kernel_sources_is_refused_in_one_line_before_anything_runs(
    command: str, tmp_path: Path
) -> None:
    workspace = kernel_workspace(tmp_path)
    cache = {"CUDA_AGENT_CACHE": str(tmp_path / "cache")}  # a build would leave its objects here
    text = cuda_agent(command, str(workspace), "--device", "cpu", "--no-audit", env=cache)
    line = one_line_error(text, 2)
    assert "CUDA kernel sources (kernels/relu.cu, kernels/relu_binding.cpp)" in line
    assert "--device cpu checks pure-PyTorch candidates only" in line and "NVIDIA GPU" in line
    assert text.stdout == ""
    as_json = cuda_agent(command, str(workspace), "--device", "cpu", "--json", env=cache)
    error = one_json(as_json)["error"]
    assert as_json.returncode == 2 and error["kind"] == "usage"
    assert error["message"] == line.removeprefix("error: ")
    built = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert not [p for p in built if p.suffix in (".o", ".so")]  # refused up front: nothing was built


def test_cpu_on_the_skeleton_that_imports_cuda_extension_is_refused_in_one_line(tmp_path: Path) -> None:
    workspace = new_workspace(tmp_path)  # as `workspace new` lays it out: no kernels yet
    assert "import cuda_extension" in (workspace / "model_new.py").read_text()
    line = one_line_error(cuda_agent("verify", str(workspace), "--device", "cpu"), 2)
    assert "model_new.py imports cuda_extension" in line and "pure-PyTorch candidates only" in line


def test_without_a_gpu_the_message_says_kernels_need_one_and_cpu_checks_pytorch_only(tmp_path: Path) -> None:
    line = one_line_error(cuda_agent("verify", str(torch_workspace(tmp_path)), env=NO_GPU), 3)
    assert "CUDA kernels need an NVIDIA GPU" in line
    assert "--device cpu" in line and "pure-PyTorch candidates only" in line


def test_profile_refuses_what_verify_refuses_and_accepts_the_same_opt_out(tmp_path: Path) -> None:
    workspace = torch_workspace(tmp_path)
    (workspace / "model_new.py").write_text(TORCH_SUM)
    refused = {}
    for command in ("verify", "profile"):
        done = cuda_agent(command, str(workspace), "--device", "cpu", "--json")
        no_traceback(done)
        assert done.returncode == 1, done.stderr
        refused[command] = one_json(done)["verdict"]
    assert refused["verify"]["reason"] == refused["profile"]["reason"] == "forbidden_op"
    assert refused["verify"]["message"] == refused["profile"]["message"]
    assert any("torch.sum" in finding["message"] for finding in refused["profile"]["findings"])
    profiled = cuda_agent(
        "profile", str(workspace), "--device", "cpu", "--no-audit", "--baselines", "skip", "--budget", "0.2",
        "--json",
    )  # fmt: skip
    assert profiled.returncode == 0, profiled.stdout + profiled.stderr
    assert one_json(profiled)["verdict"]["status"] == "passed"


def _options(*path: str) -> dict[str, Any]:
    """The click options of a command (typer may vendor click: read by duck typing)."""
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return {p.opts[0]: p for p in command.params if p.param_type_name == "option"}


COMMANDS = {"verify": ("verify",), "profile": ("profile",), "eval": ("eval",), "bench run": ("bench", "run")}
# Accepted by every command that judges; the others by each command they make sense for.
EVERYWHERE = {"--device", "--audit"}
WHERE = {
    "--torch-glue": EVALUATING,
    "--precision-check": EVALUATING,
    "--call-timeout": EVALUATING,
    "--trials": ("verify", "eval", "bench run"),
    "--budget": ("profile", "eval", "bench run"),
}


def test_the_judging_commands_share_their_options_with_one_name_and_one_help_text() -> None:
    options = {name: _options(*path) for name, path in COMMANDS.items()}
    for name in EVERYWHERE:
        assert all(name in found for found in options.values()), name
    assert all("--no-audit" in found["--audit"].secondary_opts for found in options.values())
    for name, commands in WHERE.items():
        assert all(name in options[c] for c in commands), name
    for name in EVERYWHERE | set(WHERE):
        helps = {c: found[name].help for c, found in options.items() if name in found}
        assert len(set(helps.values())) == 1, (name, helps)
    assert "pure-PyTorch candidates only" in (options["verify"]["--device"].help or "")


@pytest.mark.parametrize("command", EVALUATING)
def test_cpu_on_a_triton_workspace_is_refused_in_one_line(command: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    made = cuda_agent("workspace", "new", "examples/relu", str(workspace), "--language", "triton")
    assert made.returncode == 0, made.stderr
    line = one_line_error(cuda_agent(command, str(workspace), "--device", "cpu", "--no-audit"), 2)
    assert "Triton workspace" in line and "NVIDIA GPU only" in line and "pure-PyTorch candidates only" in line
