"""The tool list as an MCP host receives it: small enough to sit in every conversation, every tool
still typed, and the compact schemas accept and refuse exactly what the full ones do."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import jsonschema
import pytest
from mcp import Client

from cuda_agent_mcp.results import BuildResult, Diagnostic, EvalResult, Passed, ProfileResult, VerifyResult
from cuda_agent_mcp.server.app import build_server
from cuda_agent_mcp.server.compact import compact_schema
from cuda_agent_mcp.server.jobs import JobHandle, JobProgress, JobState, Outcome
from cuda_agent_mcp.server.sessions import SessionRegistry
from cuda_agent_mcp.server.views import VerifyView, view_of
from cuda_agent_mcp.tasks import TaskCatalog

# The limit: what a host loads before its first call (the compact JSON of tools/list's result).
TOOL_LIST_LIMIT_BYTES = 30_000


def _tool_list(tmp_path: Path) -> dict:
    server = build_server(SessionRegistry(tmp_path / "sessions", TaskCatalog(), cache_dir=tmp_path / "cache"))

    async def work():
        async with Client(server) as client:
            return await client.list_tools()

    return anyio.run(work).model_dump(mode="json", by_alias=True, exclude_none=True)


def _compact_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def test_the_tool_list_as_sent_fits_the_limit_with_every_tool_typed(tmp_path: Path) -> None:
    listing = _tool_list(tmp_path)
    size = len(_compact_json(listing).encode())
    assert size <= TOOL_LIST_LIMIT_BYTES, f"tools/list is {size} bytes"
    for tool in listing["tools"]:
        assert tool["inputSchema"]["type"] == "object", tool["name"]
        assert tool["outputSchema"]["properties"], tool["name"]  # typed results, not free text
        assert 20 <= len(tool["description"]) <= 300, tool["name"]


def test_an_argument_description_is_said_once_in_the_list(tmp_path: Path) -> None:
    text = _compact_json(_tool_list(tmp_path))
    assert text.count('"from start_session') == 1
    assert text.count("input sets, each from a fresh secret seed") == 1  # verify's, not again in evaluate
    assert (
        '"title":"Session Id"' not in text and '"additionalProperties":false,"properties":{"ok"' not in text
    )


def _verify_result(verdict) -> VerifyResult:
    return VerifyResult(
        verdict=verdict,
        source_hash="a" * 64,
        build_key="b" * 64,
        trials=5,
        distributions=["normal"],
        wall_s=1.5,
    )


def test_compact_output_schemas_accept_and_refuse_what_the_full_ones_do() -> None:
    full = JobState.model_json_schema()
    compact = compact_schema(full, outputs=True)
    done = JobState(
        job_id="j",
        kind="verify",
        session_id="s",
        status="done",
        elapsed_s=2.0,
        progress=JobProgress(phase="done", percent=100),
        result=view_of(_verify_result(Passed(trials=5, max_abs_error=0.0, max_rel_error=0.0))),
    ).model_dump(mode="json")
    wrong = {**done, "status": "exploded"}
    missing = {k: v for k, v in done.items() if k != "progress"}
    for schema in (full, compact):
        jsonschema.validate(done, schema)
        for bad in (wrong, missing):
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(bad, schema)
    outcome = Outcome[VerifyView](status="running", job=JobHandle(job_id="j", kind="verify", message="m"))
    jsonschema.validate(
        outcome.model_dump(mode="json"), compact_schema(outcome.model_json_schema(), outputs=True)
    )


def test_compact_input_schemas_keep_descriptions_and_refuse_the_same_arguments() -> None:
    from cuda_agent_mcp.tools.evaluate import VerifyRequest

    full = VerifyRequest.model_json_schema()
    compact = compact_schema(full, outputs=False, said=set())
    assert compact["properties"]["trials"]["description"] == "input sets, each from a fresh secret seed"
    assert "title" not in compact["properties"]["trials"]
    for schema in (full, compact):
        jsonschema.validate({"trials": 3}, schema)
        for bad in ({"trials": 0}, {"trials": "many"}, {"sneaky": 1}):
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(bad, schema)


def test_a_property_named_like_a_keyword_survives_compaction() -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string", "title": "Title"}}}
    assert compact_schema(schema, outputs=True) == {
        "type": "object",
        "properties": {"title": {"type": "string"}},
    }


def test_views_leave_out_hashes_and_paths_and_say_the_compiler_log_once() -> None:
    diagnostic = Diagnostic(
        file="kernels/relu.cu", line=7, column=3, severity="error", message="expected ';'", tool="nvcc"
    )
    failed = BuildResult(
        ok=False,
        failure="compile_error",
        summary="1 error in kernels/relu.cu",
        source_hash="c" * 64,
        extension_path="/home/u/.cache/cuda-agent/ext/" + "d" * 64 + ".so",
        diagnostics=[diagnostic],
        log="kernels/relu.cu(7): error: expected ';'\n",
        arch="sm_90a",
        wall_s=0.8,
    )
    view = view_of(failed).model_dump(mode="json")
    text = _compact_json(view)
    assert "c" * 64 not in text and ".cache" not in text
    assert view["diagnostics"] == ["kernels/relu.cu:7:3: error: expected ';'"]
    assert view["log"] == ""  # the same message is not sent twice
    assert list(view)[:2] == ["ok", "summary"]

    profiled = ProfileResult(
        verdict=Passed(trials=1, max_abs_error=0.0, max_rel_error=0.0), source_hash="e" * 64, wall_s=3.0
    )
    evaluated = EvalResult(
        verify=_verify_result(Passed(trials=5, max_abs_error=1e-7, max_rel_error=1e-6)),
        profile=profiled,
        reward=1.0,
        reward_schedule="milestones",
    )
    evaluated_view = view_of(evaluated).model_dump(mode="json")
    assert "e" * 64 not in _compact_json(evaluated_view) and "a" * 64 not in _compact_json(evaluated_view)
    assert evaluated_view["summary"].startswith("reward 1 (milestones)")
    assert next(iter(evaluated_view)) == "summary"


def test_an_answer_is_read_as_compact_json_and_carries_the_same_structure(tmp_path: Path) -> None:
    server = build_server(SessionRegistry(tmp_path / "sessions", TaskCatalog(), cache_dir=tmp_path / "cache"))

    async def work():
        async with Client(server) as client:
            return await client.call_tool("list_tasks", {})

    answer = anyio.run(work)
    assert not answer.is_error, answer.content
    text = answer.content[0].text
    assert "\n" not in text  # not the SDK's indented dump
    read = json.loads(text)
    assert read["total"] == answer.structured_content["total"] >= 1
    assert read["tasks"][0]["id"] == answer.structured_content["tasks"][0]["id"]


def test_a_crash_is_said_by_its_exception_line_with_its_last_frames_as_details() -> None:
    from cuda_agent_mcp.results import Crashed
    from cuda_agent_mcp.server.views import verdict_view

    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/cache/judge-home/inbox/025/model_new.py", line 9, in forward\n'
        "    return relu(x)\n"
        "RuntimeError: relu: x must be a CUDA tensor\n"
    )
    view = verdict_view(Crashed(phase="call", kind="exception", message=traceback, log_tail="worker said hi"))
    assert view.message == "RuntimeError: relu: x must be a CUDA tensor (during call)"
    assert view.details[-1] == "worker said hi" and "return relu(x)" in view.details[-2]
