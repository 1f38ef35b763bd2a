"""One episode core: the agent loop and KernelEnv, given the same calls, end the same way, retry the same
infrastructure failures, and tell the policy's end (terminated) from a limit's (truncated)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

import cuda_agent_mcp.tools.catalogue as catalogue_module
from cuda_agent_mcp.agent import load_policy, load_trajectory, run_episode
from cuda_agent_mcp.agent.client import PolicyClient
from cuda_agent_mcp.env import KernelEnv
from cuda_agent_mcp.errors import ExecutorUnavailable, UsageError
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.tools import JudgeFailed
from tests.agent.conftest import CORRECT, CPU, KERNELS, make_session
from tests.agent.scripted_llm import ScriptedLLM, serve, tool_call, turn

pytestmark = pytest.mark.nvcc

Call = tuple[str, dict[str, Any]]
WRITES: list[Call] = [
    ("write_file", {"path": "model_new.py", "content": CORRECT}),
    *(("write_file", {"path": f"kernels/{p.name}", "content": p.read_text()}) for p in KERNELS.iterdir()),
]


@dataclass(frozen=True)
class Ending:
    reason: str | None  # None: the calls ran out and the episode goes on (the loop's policy then stops)
    truncated: bool = False
    masked: bool = False
    attempts: int = 1  # of the last call


@dataclass(frozen=True)
class Scenario:
    name: str
    calls: list[Call]
    ending: Ending
    budgets: dict[str, int] = field(default_factory=dict)
    patch: Callable[[pytest.MonkeyPatch], None] | None = None


def _judge_down(monkeypatch: pytest.MonkeyPatch) -> None:
    async def down(*args: object, **kwargs: object) -> None:
        raise JudgeFailed("the judge process exited with signal 9")

    monkeypatch.setattr(catalogue_module, "verify_kernels", down)


def _fork_fails_once(monkeypatch: pytest.MonkeyPatch) -> None:
    real, failures = catalogue_module.list_files, [1]

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        if failures:
            failures.pop()
            raise ExecutorUnavailable("python", "fork failed: resource temporarily unavailable")
        return await real(*args, **kwargs)

    monkeypatch.setattr(catalogue_module, "list_files", flaky)


SCENARIOS = [
    Scenario("evaluate ends it", [*WRITES, ("evaluate", {"trials": 2})], Ending("evaluated")),
    Scenario(
        "a judge that stays down ends it, masked",
        [("verify", {"trials": 2}), ("list_files", {})],
        Ending("infrastructure_error", truncated=True, masked=True, attempts=3),
        patch=_judge_down,
    ),
    Scenario(
        "a failure that passes is retried and the episode goes on",
        [("list_files", {})],
        Ending(None, attempts=2),
        patch=_fork_fails_once,
    ),
    Scenario(
        "invalid calls in a row end it",
        [("format_disk", {}), ("evaluate", {"trials": 0})],
        Ending("invalid_tool_calls", truncated=True),
        budgets={"max_invalid_calls": 2},
    ),
    Scenario(
        "the turn budget ends it",
        [("list_files", {}), ("list_files", {}), ("list_files", {})],
        Ending("turn_budget", truncated=True),
        budgets={"max_turns": 2},
    ),
]


def _in_the_loop(scenario: Scenario, tmp_path: Path, cache: Path) -> Ending:
    preset = load_policy("cuda-agent")
    session = make_session(tmp_path, cache)
    llm = ScriptedLLM(replies=[turn(tool_call(name, args)) for name, args in scenario.calls])
    with serve(llm):
        client = PolicyClient(preset, base_url=llm.url, api_key="test")
        budgets = preset.budgets.model_copy(update=scenario.budgets)
        result = anyio.run(
            lambda: run_episode(session, preset, client, tmp_path / "t.jsonl", settings=CPU, budgets=budgets)
        )
    records = load_trajectory(tmp_path / "t.jsonl").tools
    calls_made = len(records)
    assert calls_made <= len(scenario.calls)
    reason = None if result.stop_reason == "policy_finished" else result.stop_reason
    return Ending(reason, result.truncated, any(r.infra_error for r in records), records[-1].attempts)


def _in_kernel_env(scenario: Scenario, tmp_path: Path, cache: Path) -> Ending:
    preset = load_policy("cuda-agent")
    preset = preset.model_copy(update={"budgets": preset.budgets.model_copy(update=scenario.budgets)})
    make_session(tmp_path, cache)  # writes the task file
    catalog = TaskCatalog([tmp_path / "reference.py"], include_bundled=False)
    env = KernelEnv(catalog=catalog, settings=CPU, policy=preset, root=tmp_path / "env")

    async def episode() -> Any:
        await env.reset(catalog.list()[0].id)
        for name, arguments in scenario.calls:
            step = await env.step({"name": name, "arguments": arguments})
            if step.done:
                return step
        return step

    step = anyio.run(episode)
    assert step.done == (step.terminated or step.truncated)
    assert step.terminated == (step.info.end_reason == "evaluated")
    return Ending(step.info.end_reason, step.truncated, step.info.mask, step.info.attempts)


@pytest.mark.parametrize("front_end", [_in_the_loop, _in_kernel_env], ids=["agent loop", "KernelEnv"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_loop_and_the_environment_end_an_episode_by_the_same_rule(
    scenario: Scenario,
    front_end: Any,
    tmp_path: Path,
    shared_build_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("cuda_agent_mcp.agent.failures.anyio.sleep", lambda s: anyio.lowlevel.checkpoint())
    if scenario.patch is not None:
        scenario.patch(monkeypatch)
    assert front_end(scenario, tmp_path, shared_build_cache) == scenario.ending


def test_a_truncated_environment_episode_is_still_scored_and_a_masked_one_is_not(
    tmp_path: Path, shared_build_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A limit ends the episode with the workspace evaluated as it stands (a reward to learn from); an
    infrastructure failure ends it with reward 0 and `mask`, and no evaluation is attempted after it."""
    make_session(tmp_path, shared_build_cache)
    catalog = TaskCatalog([tmp_path / "reference.py"], include_bundled=False)
    env = KernelEnv(catalog=catalog, settings=CPU, max_turns=len(WRITES), root=tmp_path / "env")

    async def writes_only() -> Any:
        await env.reset(catalog.list()[0].id)
        return [await env.step({"name": n, "arguments": a}) for n, a in WRITES][-1]

    limited = anyio.run(writes_only)
    assert limited.truncated and limited.info.tool == "submit" and limited.info.verify_ok is True
    assert limited.reward == -1.0 and not limited.info.mask  # verified, untimed on the CPU: FAIL, learnable
    assert "bytes_written" in limited.observation.split("\n\n")[0]  # the step's own answer, then the score

    monkeypatch.setattr("cuda_agent_mcp.agent.failures.anyio.sleep", lambda s: anyio.lowlevel.checkpoint())
    _judge_down(monkeypatch)
    evaluations = []
    real = catalogue_module.evaluate_kernels

    async def counted(*args: Any, **kwargs: Any) -> Any:
        evaluations.append(1)
        return await real(*args, **kwargs)

    monkeypatch.setattr(catalogue_module, "evaluate_kernels", counted)

    async def judge_down() -> Any:
        await env.reset(catalog.list()[0].id)
        return await env.step({"name": "verify", "arguments": {"trials": 2}})

    masked = anyio.run(judge_down)
    assert masked.truncated and masked.info.mask and masked.reward == 0.0 and not evaluations
    with pytest.raises(UsageError, match="episode is over"):
        anyio.run(lambda: env.step({"name": "list_files"}))
