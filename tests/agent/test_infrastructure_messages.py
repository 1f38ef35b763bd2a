"""Issue 19, item 2: when the environment fails (here: no GPU visible for device cuda), the policy gets
one short line that says so and whether retrying can help, never a judge's traceback."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.agent import EnvironmentSettings, load_trajectory, run_episode
from cuda_agent_mcp.agent.loop import infrastructure_observation
from cuda_agent_mcp.errors import GpuUnavailable
from cuda_agent_mcp.tools import JudgeFailed
from tests.agent.scripted_llm import tool_call, turn


def test_a_policy_asking_for_verify_without_a_gpu_gets_one_short_infrastructure_line(
    session, scripted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU visible, also on a GPU machine
    script = [turn(tool_call("verify", {"trials": 2})), turn(content="done")]
    with scripted(script) as (llm, preset, client):
        result = anyio.run(
            lambda: run_episode(
                session, preset, client, tmp_path / "t.jsonl",
                settings=EnvironmentSettings(device="cuda", audit=False, baselines="skip"),
            )
        )  # fmt: skip
    assert result.stop_reason == "policy_finished"
    answer = next(m for m in llm.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert answer.startswith(
        "error (infrastructure, not your code; retrying will not help): no GPU is visible"
    )
    assert "\n" not in answer and "Traceback" not in answer
    record = next(r for r in load_trajectory(tmp_path / "t.jsonl").tools if r.name == "verify")
    assert record.infra_error  # never counted against the policy, dropped from fine-tuning data


def test_a_judge_traceback_reaches_the_policy_as_its_first_and_last_lines() -> None:
    failed = JudgeFailed(
        'the judge failed: Traceback (most recent call last):\n  File "run.py", line 26, in run_job\n'
        "RuntimeError: Found no NVIDIA driver on your system."
    )
    assert infrastructure_observation(failed) == (
        "error (infrastructure, not your code; try again later): the judge failed: "
        "RuntimeError: Found no NVIDIA driver on your system."
    )
    assert "retrying will not help" in infrastructure_observation(GpuUnavailable("test"))


def test_an_error_that_retrying_cannot_fix_is_not_retried() -> None:
    from cuda_agent_mcp.env.failures import InfraFailure, with_infra_retries

    calls = []

    async def no_gpu() -> None:
        calls.append(1)
        raise GpuUnavailable("test")

    with pytest.raises(InfraFailure) as failure:
        anyio.run(lambda: with_infra_retries(no_gpu, retries=3, backoff_s=0))
    assert failure.value.attempts == 1 and len(calls) == 1
