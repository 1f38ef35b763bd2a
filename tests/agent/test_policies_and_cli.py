"""Presets load and validate; `cuda-agent policy` and `cuda-agent optimize` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent_mcp.agent import (
    ACTIONS,
    PolicyError,
    list_policies,
    load_policy,
    load_trajectory,
    vllm_command,
)
from cuda_agent_mcp.agent.policy import SKILL_GUIDE_MARK
from tests.agent.conftest import CORRECT, SMALL_INPUTS
from tests.agent.scripted_llm import ScriptedLLM, serve, tool_call, turn
from tests.conftest import EXAMPLES, REPO


def test_every_bundled_preset_loads_with_its_prompt_and_known_tools() -> None:
    presets = {p.name: p for p in list_policies()}
    assert {"cuda-agent", "openai-compatible", "kevin-32b", "cudallm-8b"} <= set(presets)
    for preset in presets.values():
        prompt = preset.system_prompt()
        assert SKILL_GUIDE_MARK not in prompt and "REGISTER_BINDING" in prompt  # the skill guide is in
        assert set(preset.tools) <= set(ACTIONS)
        assert preset.verified, f"{preset.name} must say what was verified"


def test_the_vllm_command_carries_the_tool_parser_and_a_lora_adapter(tmp_path: Path) -> None:
    default = vllm_command(load_policy("cuda-agent"), port=9000)
    assert default[:3] == ["vllm", "serve", "Qwen/Qwen3-32B"]
    assert default[
        default.index("--enable-auto-tool-choice") : default.index("--enable-auto-tool-choice") + 3
    ] == ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    checkpoint = tmp_path / "my-rl-step-400"
    checkpoint.mkdir()
    (checkpoint / "policy.yaml").write_text(
        "description: our RL checkpoint\nmodel: Qwen/Qwen3-8B\nlora_adapter: /ckpt/step400\n"
        "system_prompt_file: prompt.md\nvllm:\n  tool_call_parser: hermes\n"
    )
    (checkpoint / "prompt.md").write_text("Write kernels.\n")
    preset = load_policy(str(checkpoint))
    assert preset.name == "my-rl-step-400" and preset.endpoint_model == "my-rl-step-400"
    command = vllm_command(preset)
    assert command[command.index("--lora-modules") + 1] == "my-rl-step-400=/ckpt/step400"
    with pytest.raises(PolicyError, match="served by its own endpoint"):
        vllm_command(load_policy("openai-compatible"))


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("description: x\nmodel: m\ntemprature: 0.3\n", "temprature: Extra inputs are not permitted"),
        ("description: x\nmodel: m\ntools: [verify, hack]\n", "unknown tools \\['hack'\\]"),
        ("description: x\nmodel: m\nsystem_prompt_file: missing.md\n", "cannot read"),
        ("description: [unclosed\n", "not valid YAML"),
    ],
)
def test_a_broken_preset_is_refused_with_a_readable_reason(
    tmp_path: Path, yaml_text: str, message: str
) -> None:
    (tmp_path / "policy.yaml").write_text(yaml_text)
    (tmp_path / "system_prompt.md").write_text("prompt\n")
    with pytest.raises(PolicyError, match=message):
        load_policy(str(tmp_path))


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent_mcp", *args], capture_output=True, text=True, timeout=600, cwd=cwd
    )


def test_policy_commands_list_show_and_print_a_pasteable_serve_line() -> None:
    listed = _cli("policy", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "kevin-32b" in {p["name"] for p in json.loads(listed.stdout)}
    served = _cli("policy", "serve", "kevin-32b", "--port", "8123")
    assert served.returncode == 0 and served.stdout.count("\n") == 1
    assert served.stdout.startswith("vllm serve cognition-ai/Kevin-32B --host 127.0.0.1 --port 8123")
    refused = _cli("policy", "serve", "no-such-policy")
    assert refused.returncode == 2 and "no policy 'no-such-policy'" in refused.stderr
    assert "Traceback" not in refused.stderr


@pytest.mark.nvcc
def test_optimize_runs_end_to_end_against_an_openai_compatible_endpoint(tmp_path: Path) -> None:
    task = tmp_path / "bias_add_relu.py"
    task.write_text((EXAMPLES / "bias_add_relu" / "model.py").read_text().replace(*SMALL_INPUTS))
    kernels = EXAMPLES / "bias_add_relu" / "kernels"
    writes = [
        tool_call("write_file", {"path": f"kernels/{p.name}", "content": p.read_text()})
        for p in kernels.iterdir()
    ]
    script = [
        turn(*writes, tool_call("write_file", {"path": "model_new.py", "content": CORRECT})),
        turn(tool_call("evaluate", {"trials": 2})),
    ]
    common = ["--device", "cpu", "--no-audit", "--baselines", "skip", "--json"]
    with serve(ScriptedLLM(replies=script)) as llm:
        done = _cli(
            "optimize", str(task), "--base-url", llm.url, "--workspace", str(tmp_path / "ws"),
            "--trajectory-dir", str(tmp_path / "runs"), *common, cwd=REPO,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["best"]["stop_reason"] == "evaluated" and report["best"]["best"]["turn"] == 2
    assert (tmp_path / "ws" / "model_new.py").read_text() == CORRECT
    assert (tmp_path / "runs" / "trajectory.jsonl").is_file()

    unreachable = _cli("optimize", str(task), "--base-url", "http://127.0.0.1:9/v1", *common, cwd=tmp_path)
    assert unreachable.returncode == 3, unreachable.stderr
    assert "the policy endpoint http://127.0.0.1:9/v1 failed" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr
    trajectory = next((tmp_path / "cuda-agent-runs").glob("*/trajectory.jsonl"))
    assert load_trajectory(trajectory).end.stop_reason == "endpoint_error"  # the run was closed properly
