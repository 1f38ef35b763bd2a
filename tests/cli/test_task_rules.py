"""Issue 19, item 12: what a candidate must satisfy is stated, not hidden. `tasks show` and a new
workspace's SKILL.md give the tolerance, the precision rule and the judge's own hidden-size plan; a
task's policy sets the precision rule's default; `cuda-agent audit` runs the static audit with no GPU."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import anyio

from cuda_agent_mcp.results import Passed, Rejected
from cuda_agent_mcp.tasks import Task, load_task_file
from cuda_agent_mcp.tools import Session, VerifyRequest, task_rules, verify_kernels
from tests.cli.first_hour import NO_GPU, cuda_agent, one_json, small_relu, torch_workspace
from tests.conftest import EXAMPLES


def test_tasks_show_states_the_precision_rule_and_the_hidden_size_plan() -> None:
    shown = cuda_agent("tasks", "show", "examples/relu", "--no-code")
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "batch_size=4097 (not 4096), dim=8193 (not 8192)" in text
    assert "relative error norm of at most 0.0001" in text and "precision_downgrade" in text
    assert "atol=0.01 and rtol=0.01" in text
    details = one_json(cuda_agent("tasks", "show", "examples/relu", "--json"))
    assert details["probe"]["hidden_sizes"] == [
        {"name": "batch_size", "visible": 4096, "hidden": 4097},
        {"name": "dim", "visible": 8192, "hidden": 8193},
    ]
    assert details["rules"]["precision_check"] is True and details["rules"]["max_error_norm"] == 1e-4


def test_the_plan_shown_is_the_one_the_judge_computes(kernelbench: Path) -> None:
    from cuda_agent_mcp.judge.sizes import size_globals

    for task_id, path in [
        ("kernelbench/level1/19", next((kernelbench / "level1").glob("19_*.py"))),
        ("kernelbench/level2/1", next((kernelbench / "level2").glob("1_*.py"))),
    ]:
        details = one_json(cuda_agent("tasks", "show", task_id, "--tasks", str(kernelbench), "--json"))
        spec = importlib.util.spec_from_file_location("reference", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        judged = {name: list(v) if isinstance(v, tuple) else v for name, v in size_globals(module).items()}
        shown = {h["name"]: h["hidden"] for h in details["probe"]["hidden_sizes"]}
        assert shown == judged and shown, task_id


def test_a_new_workspace_skill_md_ends_with_the_tasks_rules(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    assert cuda_agent("workspace", "new", "examples/relu", str(workspace)).returncode == 0
    skill = (workspace / "SKILL.md").read_text()
    rules = one_json(cuda_agent("tasks", "show", "examples/relu", "--json"))["rules"]
    assert "## This task: examples/relu" in skill
    for statement in rules["statements"]:
        assert f"- {statement}" in skill
    assert "relative error norm of at most 1e-4" in skill  # the general rule, also for other workspaces


def test_cuda_agent_audit_runs_the_static_audit_without_a_gpu(tmp_path: Path) -> None:
    example = tmp_path / "relu"
    example.mkdir()
    for name in ("model.py", "model_new.py"):
        (example / name).write_text((EXAMPLES / "relu" / name).read_text())
    (example / "kernels").mkdir()
    for source in (EXAMPLES / "relu" / "kernels").iterdir():
        (example / "kernels" / source.name).write_text(source.read_text())
    clean = cuda_agent("audit", str(example), env=NO_GPU)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "clean" in clean.stdout
    workspace = torch_workspace(tmp_path)
    found = cuda_agent("audit", str(workspace), env=NO_GPU)
    assert found.returncode == 1
    assert "model_new.py:7" in found.stdout and "torch_compute" in found.stdout
    result = one_json(cuda_agent("audit", str(workspace), "--json", env=NO_GPU))
    assert result["clean"] is False and result["findings"][0]["rule"] == "torch_compute"


# A candidate that computes in bf16: within atol=rtol=1e-2, about 1e-3 of relative error norm.
BF16_RELU = (
    "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        return x.bfloat16().clamp_min(0).float()\n"
)


def _with_precision_policy(task: Task, precision_check: bool) -> Task:
    return task.model_copy(
        update={"policy": task.policy.model_copy(update={"precision_check": precision_check})}
    )


def _verify(tmp_path: Path, task: Task, name: str, precision_check: bool | None) -> object:
    session = Session.create(task, tmp_path / name)
    (session.workspace.root / "model_new.py").write_text(BF16_RELU)
    request = VerifyRequest(device="cpu", audit=False, trials=2, precision_check=precision_check)
    return anyio.run(lambda: verify_kernels(session, request)).verdict


def test_a_tasks_policy_sets_the_precision_rules_default_and_a_request_overrides_it(tmp_path: Path) -> None:
    strict = load_task_file(small_relu(tmp_path))
    relaxed = _with_precision_policy(strict, False)

    by_default = _verify(tmp_path, strict, "a", None)
    assert isinstance(by_default, Rejected) and by_default.reason == "precision_downgrade"
    assert isinstance(_verify(tmp_path, relaxed, "b", None), Passed)
    assert isinstance(_verify(tmp_path, relaxed, "c", True), Rejected)  # the per-request switch stays
    assert isinstance(_verify(tmp_path, strict, "d", False), Passed)

    statements = " ".join(task_rules(relaxed, None).statements)
    assert "allows reduced precision" in statements
    assert "`cuda-agent tasks show" in statements  # not inspected: where the plan can be seen
