"""The tool registry: each tool declared once, a policy's arguments a projection of the tool's request
with the request's limits, the environment's settings filled in, declaration mistakes refused at once."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.agent.actions import ACTIONS, EnvironmentSettings, InvalidCall, parse_call
from cuda_agent_mcp.tools import TOOLS, EvaluateRequest, Tool, VerifyRequest
from cuda_agent_mcp.tools.registry import describe, keyword_parameters


class _Request(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    count: int = Field(default=3, ge=1, le=9, description="how many")
    note: str = Field(default="", description="a note")


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    count: int


async def _count(context: object, request: _Request, progress: object) -> _Result:
    return _Result(count=request.count)


def _tool(**changes: object) -> Tool:
    options: dict[str, object] = {
        "name": "count",
        "title": "Count",
        "description": "Count.",
        "request": _Request,
        "result": _Result,
        "run": _count,
    }
    return Tool(**(options | changes))  # type: ignore[arg-type]


def test_a_policys_limits_are_the_tool_layers_for_every_tool_that_shares_the_parameter() -> None:
    """verify and evaluate both take `trials` up to VerifyRequest's 100 (the agent's own model said 20)."""
    bound = VerifyRequest.model_json_schema()["properties"]["trials"]
    for name in ("verify", "evaluate", "submit"):
        trials = ACTIONS[name].openai_spec()["function"]["parameters"]["properties"]["trials"]
        assert (trials["minimum"], trials["maximum"], trials["default"]) == (
            bound["minimum"],
            bound["maximum"],
            bound["default"],
        )
        assert "at most 100" in trials["description"]  # stated for front-ends whose schemas drop limits
        _, args = parse_call(name, '{"trials": 100}', [name])
        assert args.model_dump() == {"trials": 100}
        with pytest.raises(InvalidCall, match="trials: Input should be less than or equal to 100"):
            parse_call(name, '{"trials": 101}', [name])


def test_the_environment_fills_in_what_the_policy_does_not_choose() -> None:
    settings = EnvironmentSettings(device="cpu", audit=False, baselines="skip")
    evaluate = ACTIONS["evaluate"]
    request = evaluate.request(evaluate.args(trials=3), settings, "fast_p")
    assert isinstance(request, EvaluateRequest)
    assert (request.verify.trials, request.verify.device, request.verify.audit) == (3, "cpu", False)
    assert (request.profile.device, request.profile.baselines) == ("cpu", "skip")
    assert request.verify.sanitize == "auto"  # evaluate's own default for its verify is kept
    assert request.reward_schedule == "fast_p"
    unset = evaluate.request(evaluate.args(), settings)
    assert isinstance(unset, EvaluateRequest) and unset.verify.trials == VerifyRequest().trials
    assert unset.reward_schedule == EvaluateRequest().reward_schedule
    with pytest.raises(InvalidCall, match="audit: Extra inputs are not permitted"):
        parse_call("verify", '{"audit": false}', ["verify"])


def test_each_tool_is_declared_once_and_a_policy_sees_only_policy_tools() -> None:
    policy = {tool.name for tool in TOOLS.exposed_on("policy")}
    assert set(ACTIONS) == policy | {"submit"}
    assert "list_tasks" in TOOLS and "list_tasks" not in policy  # MCP only
    assert {tool.name for tool in TOOLS.exposed_on("mcp")} == set(TOOLS)
    assert all(TOOLS[name].uses_gpu for name in ("verify", "profile", "evaluate"))
    assert not any(TOOLS[name].uses_gpu for name in ("read_file", "compile", "run"))


def test_declaration_mistakes_are_refused_when_the_tool_is_declared() -> None:
    class Undescribed(_Request):
        extra: int = 1

    with pytest.raises(TypeError, match="extra has no description"):
        _tool(request=Undescribed)
    with pytest.raises(TypeError, match="count of _Request is not a model"):
        _tool(policy_fields=("count.deep",))
    with pytest.raises(TypeError, match="has no field missing"):
        _tool(policy_fields=("missing",))
    with pytest.raises(TypeError, match="both read-only and destructive"):
        _tool(read_only=True, destructive=True)
    with pytest.raises(TypeError, match="lower_snake_case"):
        _tool(name="Count")
    with pytest.raises(TypeError, match="declared twice"):
        TOOLS.with_tools(_tool(name="read_file"))
    assert _tool(request=Undescribed, surfaces=frozenset({"mcp"})).name == "count"  # MCP shows the model


def test_a_front_end_adds_its_own_tools_through_the_registry_without_changing_it() -> None:
    sessions = TOOLS.with_tools(_tool(name="start_session", surfaces=frozenset({"mcp"})))
    assert "start_session" in sessions and "start_session" not in TOOLS
    assert "start_session" in {t.name for t in sessions.exposed_on("mcp")}
    assert "start_session" not in {t.name for t in sessions.exposed_on("policy")}


def test_a_tool_checks_what_it_is_given_and_what_its_function_returns() -> None:
    tool = _tool()
    assert anyio.run(lambda: tool(object(), _Request(count=4))) == _Result(count=4)
    with pytest.raises(TypeError, match="takes a _Request"):
        anyio.run(lambda: tool(object(), _Result(count=1)))

    async def wrong(context: object, request: _Request, progress: object) -> BaseModel:
        return request

    with pytest.raises(TypeError, match="returned _Request, not _Result"):
        anyio.run(lambda: _tool(run=wrong)(object(), _Request()))
    with pytest.raises(TypeError, match="runs on a int"):
        anyio.run(lambda: _tool(context=int)(object(), _Request()))


def test_limits_are_stated_in_words_and_carried_by_signatures() -> None:
    assert describe(_Request.model_fields["count"]) == "how many (at least 1, at most 9)"
    assert describe(_Request.model_fields["note"]) == "a note"
    count, note = keyword_parameters(_Request)
    assert (count.name, count.default, note.default) == ("count", 3, "")


def test_the_mcp_sdk_reads_the_request_models_limits_from_a_registry_signature() -> None:
    """What the MCP server registers from: a function with `Tool.signature` gets the request's schema."""
    pytest.importorskip("mcp")
    from mcp.server.mcpserver.tools.base import Tool as McpTool

    from cuda_agent_mcp.tools.registry import as_function

    async def search(**arguments: object) -> object:
        return arguments

    tool = TOOLS["search_files"]
    function = as_function(search, tool.name, tool.description, tool.signature(returns=tool.result))
    schema = McpTool.from_function(function).parameters
    max_hits = schema["properties"]["max_hits"]
    assert (max_hits["minimum"], max_hits["maximum"], max_hits["default"]) == (1, 1000, 200)
    assert schema["required"] == ["regex"]
    nested = TOOLS["verify"]
    function = as_function(search, nested.name, nested.description, nested.signature(returns=nested.result))
    assert "request" in McpTool.from_function(function).parameters["properties"]
