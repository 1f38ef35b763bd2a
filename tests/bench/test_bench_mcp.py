"""A suite's summary over MCP (the official SDK client, in memory): a resource read by run id."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError

from cuda_agent_mcp.bench.models import SolutionSpec, SuiteRequest, TaskRow
from cuda_agent_mcp.bench.rundir import RunDirectory
from cuda_agent_mcp.bench.summary import register_run
from cuda_agent_mcp.server.app import build_server
from cuda_agent_mcp.server.sessions import SessionRegistry
from cuda_agent_mcp.tasks import TaskCatalog


def finished_run(tmp_path: Path, cache: Path) -> str:
    request = SuiteRequest(
        solutions=SolutionSpec(kind="workspaces", path="/s"), out_dir=str(tmp_path / "out")
    )
    ids = ["kernelbench/level1/1", "kernelbench/level1/2"]
    run_dir = RunDirectory.open(tmp_path / "out", request, ids)
    for task, outcome in zip(ids, ("correct", "incorrect"), strict=True):
        run_dir.append(
            TaskRow(
                task_id=task,
                name=task,
                level=1,
                solution=None,
                solution_kind=None,
                outcome=outcome,
                speedup_vs_eager=2.0 if outcome == "correct" else None,
                speedup_vs_compile=1.5 if outcome == "correct" else None,
                failure=None if outcome == "correct" else "wrong_output",
            )
        )
    register_run(cache, run_dir.run_id, run_dir.path)
    return run_dir.run_id


def test_an_assistant_reads_how_a_suite_did_by_run_id(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run_id = finished_run(tmp_path, cache)
    server = build_server(SessionRegistry(tmp_path / "sessions", TaskCatalog(), cache_dir=cache))

    async def work():
        async with Client(server) as client:
            runs = await client.read_resource("bench://runs")
            resource = await client.read_resource(f"bench://{run_id}/summary")
            tools = {tool.name for tool in (await client.list_tools()).tools}
            try:
                await client.read_resource("bench://no-such-run/summary")
                by_path = None
            except MCPError as exc:
                by_path = str(exc)
            return runs, resource, tools, by_path

    runs, resource, tools, by_path = anyio.run(work)
    summary = json.loads(resource.contents[0].text)
    overall = summary["groups"][0]
    assert summary["run_id"] == run_id
    assert overall["group"] == "overall" and overall["correct"] == 1 and overall["pass_rate"] == 0.5
    assert overall["compile"]["geomean_speedup"] == 1.5
    assert json.loads(runs.contents[0].text) == {run_id: str((tmp_path / "out").resolve())}
    assert "suite_summary" not in tools  # a resource, not a tool every conversation pays for
    assert by_path is not None and "bench://runs" in by_path  # an unknown id says where ids are listed
