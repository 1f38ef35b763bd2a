"""Every front-end exposes the registry's tools with the schemas and limits of the tools' request models.

Each front-end is read the way its consumer reads it: the tool specs the agent loop sends to the policy's
endpoint, `KernelEnv`'s reset observation, the schemas TRL builds from the tool methods (transformers'
`get_json_schema`), verl's `get_openai_tool_schema`, and (`_mcp_tools`) what an MCP client lists. The
expectation is computed from the request models themselves, not from the projection the front-ends
share. Front-ends whose schema formats cannot carry limits (TRL, verl) must state them in the
description. Adding a front-end is one `FrontEnd(...)` line in `FRONT_ENDS`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from cuda_agent_mcp.agent import PolicyPreset, load_policy, run_episode
from cuda_agent_mcp.agent.actions import ACTIONS, SUBMIT, EnvironmentSettings
from cuda_agent_mcp.env import KernelEnv
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.tools import TOOLS, Session, Surface, ToolRegistry
from cuda_agent_mcp.tools.registry import LIMIT_KEYS
from tests.agent.conftest import make_session
from tests.agent.scripted_llm import ScriptedLLM, serve
from tests.conftest import EXAMPLES

Shown = dict[str, dict[str, Any]]  # tool -> {"description": str, "params": {name: normalised property}}
NO_DEFAULT = "<no default>"
# Every policy tool, so each is checked (the default preset leaves out `run`, `search_files`, `submit`).
ALL_POLICY_TOOLS = [*(t.name for t in TOOLS.exposed_on("policy")), SUBMIT]


@dataclass(frozen=True)
class FrontEnd:
    name: str
    surface: Surface
    tools: Callable[[Path, Path], Shown]  # (tmp_path, build cache) -> what it exposes
    carries_limits: bool = True
    registry: Callable[[], ToolRegistry] = lambda: TOOLS  # called when the test runs


def _preset() -> PolicyPreset:
    return load_policy("cuda-agent").model_copy(update={"tools": ALL_POLICY_TOOLS})


def _param(prop: dict[str, Any], required: bool) -> dict[str, Any]:
    options = prop.get("anyOf", [prop])
    return {
        "type": prop.get("type") or sorted(str(o.get("type")) for o in options),
        "required": required,
        "description": prop.get("description") or "",
        "limits": {k: v for o in options for k, v in o.items() if k in LIMIT_KEYS},
        "default": prop.get("default", NO_DEFAULT),
    }


def _from_function(function: dict[str, Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    parameters = function.get("parameters") or {}
    required = set(parameters.get("required") or [])
    properties = parameters.get("properties") or {}
    return {
        "description": function.get("description") or "",
        "params": {n: _param(p, n in required) for n, p in properties.items() if n not in skip},
    }


def _resolve(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    for option in [prop, *prop.get("anyOf", []), *prop.get("allOf", [])]:
        if "$ref" in option:
            return defs[option["$ref"].rsplit("/", 1)[1]]
    return prop


# -- what each front-end shows -----------------------------------------------------------------


def _agent_loop(tmp_path: Path, cache: Path) -> Shown:
    """The tool specs in the loop's first request to the policy's endpoint."""
    llm = ScriptedLLM(replies=[{"role": "assistant", "content": "done"}])
    session = make_session(tmp_path, cache)
    with serve(llm):
        from cuda_agent_mcp.agent.client import PolicyClient

        preset = _preset()
        client = PolicyClient(preset, base_url=llm.url, api_key="test")
        anyio.run(lambda: run_episode(session, preset, client, tmp_path / "t.jsonl"))
    return {t["function"]["name"]: _from_function(t["function"]) for t in llm.requests[0]["tools"]}


def _kernel_env(tmp_path: Path, cache: Path) -> Shown:
    env = KernelEnv(catalog=TaskCatalog([EXAMPLES / "relu" / "model.py"], include_bundled=False),
                    policy=_preset(), root=tmp_path / "env")  # fmt: skip
    observation = anyio.run(lambda: env.reset(env.catalog.list()[0].id))
    return {t["function"]["name"]: _from_function(t["function"]) for t in observation.tools}


def _trl(tmp_path: Path, cache: Path) -> Shown:
    pytest.importorskip("trl")
    from transformers.utils import get_json_schema

    from cuda_agent_mcp.adapters.trl import trl_environment

    instance = trl_environment(policy=_preset(), root=tmp_path / "trl")()
    methods = [
        getattr(instance, name)
        for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]
    return {m.__name__: _from_function(get_json_schema(m)["function"]) for m in methods}


def _verl(tmp_path: Path, cache: Path) -> Shown:
    pytest.importorskip("verl")
    from cuda_agent_mcp.adapters.verl import VerlKernelTool

    shown = {}
    for name in _preset().tools:
        schema = VerlKernelTool({"tool": name}).get_openai_tool_schema().model_dump(exclude_none=True)
        shown[name] = _from_function(schema["function"])
    return shown


def _mcp_tools(server: Any) -> Shown:
    """What an MCP client lists, with a nested request object flattened into its fields and the
    session id (the MCP server's own context parameter) left out."""
    from mcp import Client

    async def listing() -> list[Any]:
        async with Client(server) as client:
            return list((await client.list_tools()).tools)

    from cuda_agent_mcp.server.registry_tools import MCP_TOOLS

    shown = {}
    said: dict[str, str] = {}  # argument name -> its description, as first said in the list
    for tool in anyio.run(listing):
        schema = tool.input_schema
        function = {"description": tool.description, "parameters": schema}
        registered = MCP_TOOLS.get(tool.name)
        if registered is not None and registered.nested is not None:
            request = _resolve(schema["properties"][registered.nested], schema.get("$defs", {}))
            function["parameters"] = _inline(request, schema.get("$defs", {}))
        on_a_session = registered is not None and registered.context is Session
        # The list says an argument's description once (server/compact.py): one left out here must have
        # been said by an earlier tool, and is read as said there.
        for name, prop in function["parameters"].get("properties", {}).items():
            if "description" in prop:
                said.setdefault(name, prop["description"])
            elif name in said:
                function["parameters"]["properties"][name] = {**prop, "description": said[name]}
        shown[tool.name] = _from_function(function, skip=("session_id",) if on_a_session else ())
    return shown


def _inline(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    properties = {n: _resolve(p, defs) if "$ref" in p else p for n, p in schema.get("properties", {}).items()}
    return {**schema, "properties": properties}


def _mcp_server(tmp_path: Path, cache: Path) -> Any:
    pytest.importorskip("mcp")
    from cuda_agent_mcp.server.app import build_server
    from cuda_agent_mcp.server.sessions import SessionRegistry

    return build_server(SessionRegistry(tmp_path / "sessions", TaskCatalog(), cache_dir=cache))


def _mcp(tmp_path: Path, cache: Path) -> Shown:
    """Every tool as an MCP client lists it: the tool layer's and the server's own."""
    return _mcp_tools(_mcp_server(tmp_path, cache))


def _mcp_registry() -> ToolRegistry:
    pytest.importorskip("mcp")
    from cuda_agent_mcp.server.registry_tools import MCP_TOOLS

    return MCP_TOOLS


FRONT_ENDS = [
    FrontEnd("MCP server", "mcp", _mcp, registry=_mcp_registry),
    FrontEnd("agent loop", "policy", _agent_loop),
    FrontEnd("KernelEnv", "policy", _kernel_env),
    FrontEnd("TRL", "policy", _trl, carries_limits=False),
    FrontEnd("verl", "policy", _verl, carries_limits=False),
]


# -- what the request models say ---------------------------------------------------------------


def _expected(registry: ToolRegistry, surface: Surface) -> Shown:
    expected: Shown = {}
    for tool in registry.exposed_on(surface):
        schema = tool.request.model_json_schema()
        defs = schema.get("$defs", {})
        paths = tool.policy_paths if surface == "policy" else [(n,) for n in tool.request.model_fields]
        params = {}
        for path in paths:
            node = schema
            for part in path[:-1]:
                node = _resolve(node["properties"][part], defs)
            prop = node["properties"][path[-1]]
            params[path[-1]] = _param(_resolve(prop, defs) if "$ref" in prop else prop,
                                      path[-1] in node.get("required", []))  # fmt: skip
        expected[tool.name] = {"description": tool.description, "params": params}
    if surface == "policy":
        expected[SUBMIT] = {**expected["evaluate"], "description": ACTIONS[SUBMIT].description}
    return expected


def _check(front_end: FrontEnd, shown: Shown) -> None:
    expected = _expected(front_end.registry(), front_end.surface)
    if front_end.surface == "policy":
        expected = {name: expected[name] for name in ALL_POLICY_TOOLS}
    assert set(shown) == set(expected), front_end.name
    for name, want in expected.items():
        got = shown[name]
        assert got["description"].startswith(want["description"]), (front_end.name, name)
        assert set(got["params"]) == set(want["params"]), (front_end.name, name)
        for param, spec in want["params"].items():
            seen, where = got["params"][param], (front_end.name, name, param)
            assert (seen["type"], seen["required"]) == (spec["type"], spec["required"]), where
            assert seen["description"].startswith(spec["description"].rstrip(".")), where
            if front_end.carries_limits:
                assert (seen["limits"], seen["default"]) == (spec["limits"], spec["default"]), where
            else:  # the schema format drops them: the description must state each one
                assert all(str(v) in seen["description"] for v in spec["limits"].values()), where


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=[f.name for f in FRONT_ENDS])
def test_every_front_end_exposes_the_registrys_tools_with_the_request_models_limits(
    front_end: FrontEnd, tmp_path: Path, shared_build_cache: Path
) -> None:
    _check(front_end, front_end.tools(tmp_path, shared_build_cache))


def test_the_mcp_server_runs_the_registrys_tools_as_declared(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    """The server as `cuda-agent serve` builds it, through the official client: flat and nested
    arguments, a long tool as a job, a limit and a protected file refused readably."""
    server = _mcp_server(tmp_path, shared_build_cache)
    from mcp import Client

    async def session() -> list[Any]:
        async with Client(server) as client:
            started = await client.call_tool("start_session", {"task_id": "examples/relu"})
            sid = started.structured_content["session_id"]
            return [
                await client.call_tool("list_tasks", {"query": {"contains": "relu"}}),
                await client.call_tool(
                    "write_file", {"session_id": sid, "path": "notes.txt", "content": "hi"}
                ),
                await client.call_tool("read_file", {"session_id": sid, "path": "notes.txt"}),
                await client.call_tool("search_files", {"session_id": sid, "regex": "hi", "max_hits": 1001}),
                await client.call_tool("write_file", {"session_id": sid, "path": "model.py", "content": ""}),
                await client.call_tool("compile", {"session_id": sid, "request": {"arch": "sm_90a"}}),
            ]

    listed, written, read, too_many, protected, built = anyio.run(session)
    assert not listed.is_error and listed.structured_content["total"] >= 1
    assert not written.is_error and read.structured_content["content"] == "hi"
    assert too_many.is_error and "less than or equal to 1000" in too_many.content[0].text
    assert protected.is_error and "protected" in protected.content[0].text
    assert not built.is_error and built.structured_content["status"] in ("done", "running")


def test_the_environment_settings_are_not_the_policys_to_choose() -> None:
    """What the environment decides (docs/DECISIONS.md, "The agent loop") is in no policy front-end."""
    chosen = set(EnvironmentSettings().judging()) | {"reward_schedule", "sanitize", "strict"}
    for name in ALL_POLICY_TOOLS:
        assert not chosen & set(ACTIONS[name].args.model_fields), name
