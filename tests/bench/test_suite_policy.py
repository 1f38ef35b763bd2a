"""A suite whose solutions a policy writes: the agent loop per task against a scripted OpenAI-wire server
(the only stand-in: no language model runs here), then the suite scores its best verified kernel."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.bench import SolutionSpec, run_suite
from cuda_agent_mcp.errors import UsageError
from tests.agent.scripted_llm import ScriptedLLM, serve, tool_call, turn
from tests.bench.conftest import CANDIDATE, TinySuite
from tests.bench.test_suite_cpu import request
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.nvcc


def test_a_policy_writes_each_tasks_solution_and_the_suite_scores_it(
    tiny_suite: TinySuite, tmp_path: Path
) -> None:
    kernels = {f"kernels/{p.name}": p.read_text() for p in (EXAMPLES / "relu" / "kernels").iterdir()}
    writes = [tool_call("write_file", {"path": path, "content": text}) for path, text in kernels.items()]
    script = [
        turn(
            *writes,
            tool_call(
                "write_file",
                {"path": "model_new.py", "content": CANDIDATE.format(expression="x.clamp_min(0)")},
            ),
        ),
        turn(tool_call("verify", {"trials": 2})),
        turn(content="done"),
    ]
    llm = ScriptedLLM(replies=script)
    with serve(llm):
        spec = SolutionSpec(kind="policy", policy="cuda-agent", base_url=llm.url, max_turns=5)
        selected = request(tiny_suite, tmp_path / "report", solutions=spec, ids=["kernelbench/level1/1"])
        result = anyio.run(lambda: run_suite(selected, cache_dir=tiny_suite.cache))
    (row,) = result.rows
    assert row.outcome == "correct", (row.failure, row.message)
    assert row.solution_kind == "policy" and row.speedup_vs_eager is not None
    assert (tmp_path / "report" / "trajectories" / "kernelbench-level1-1.jsonl").is_file()
    assert len(llm.requests) == 3


def test_a_policy_run_without_an_endpoint_is_refused_before_anything_runs(
    tiny_suite: TinySuite, tmp_path: Path
) -> None:
    spec = SolutionSpec(kind="policy", policy="openai-compatible")  # a preset that names no endpoint
    with pytest.raises(UsageError, match="--base-url"):
        anyio.run(
            lambda: run_suite(request(tiny_suite, tmp_path / "r", solutions=spec), cache_dir=tiny_suite.cache)
        )
    assert not (tmp_path / "r").exists()
