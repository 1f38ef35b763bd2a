"""The MCP surface in raw JSON-RPC frames over stdio: Tasks in both wire shapes (2025-11-25 and the
2026-07-28 extension), log notifications of a build, completions, resource errors with their reason,
titles and annotations, bad frames answered with the spec's error codes, the server's version. Clients
that ask for no tasks keep `wait_job` (tests/server)."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES
from tests.security.conftest import require_view, server_environment

V2026 = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}
# A candidate that takes minutes per call (verified on the CPU): a task still working when cancelled.
SLOW_MODEL_NEW = (
    "import time\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        time.sleep(600)\n        return x\n"
)
SMALL_RELU = (
    (EXAMPLES / "relu" / "model.py")
    .read_text()
    .replace("batch_size = 4096\ndim = 8192", "batch_size = 8\ndim = 16")
)


class Raw:
    """One `cuda-agent serve` over stdio, spoken to frame by frame."""

    def __init__(self, tmp_path: Path, cache: Path) -> None:
        _, _, env = server_environment(tmp_path, cache)
        argv = [sys.executable, "-m", "cuda_agent_mcp", "serve", "--root", str(tmp_path / "s")]
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, stderr=subprocess.DEVNULL
        )
        self.next_id = 0
        self.notifications: list[dict[str, Any]] = []

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._write(
            {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}
        )

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The response (result or error) to one request; notifications met on the way are kept."""
        self.next_id += 1
        self._write({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}})
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            assert line, "the server closed stdout"
            message = json.loads(line)
            if message.get("id") == self.next_id:
                return message
            self.notifications.append(message)

    def frame(self, line: bytes) -> dict[str, Any] | None:
        """What the server answers to one raw line within 10 s (None: nothing)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()
        if not select.select([self.process.stdout], [], [], 10)[0]:
            return None
        return json.loads(self.process.stdout.readline())

    def _write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


@pytest.fixture
def raw(tmp_path: Path, shared_build_cache: Path):  # type: ignore[no-untyped-def]
    require_view()
    server = Raw(tmp_path, shared_build_cache)
    yield server
    server.close()


def _handshake(raw: Raw) -> dict[str, Any]:
    answer = raw.call(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tasks": {"requests": {"tools": {"call": {}}}}},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    )
    raw.notify("notifications/initialized")
    return answer["result"]


def _session(raw: Raw, meta: dict[str, Any] | None = None, kernels: dict[str, str] | None = None) -> str:
    extra = {"_meta": meta} if meta else {}
    started = raw.call(
        "tools/call", {"name": "start_session", "arguments": {"task_id": "examples/relu"}, **extra}
    )
    session = started["result"]["structuredContent"]["session_id"]
    for path, content in (kernels or {}).items():
        arguments = {"session_id": session, "path": path, "content": content}
        assert not raw.call("tools/call", {"name": "write_file", "arguments": arguments, **extra})["result"][
            "isError"
        ]
    return session


def _relu() -> dict[str, str]:
    return {f"kernels/{p.name}": p.read_text() for p in (EXAMPLES / "relu" / "kernels").iterdir()}


@pytest.mark.nvcc
def test_tasks_in_the_2025_11_25_shape(raw: Raw) -> None:
    init = _handshake(raw)
    assert init["capabilities"]["tasks"]["requests"] == {"tools": {"call": {}}}
    tools = {t["name"]: t for t in raw.call("tools/list")["result"]["tools"]}
    assert {n for n, t in tools.items() if t.get("execution", {}).get("taskSupport") == "optional"} == {
        "compile", "verify", "profile", "evaluate"
    }  # fmt: skip
    session = _session(raw, kernels=_relu())
    created = raw.call(
        "tools/call", {"name": "compile", "arguments": {"session_id": session}, "task": {"ttl": 60000}}
    )
    task = created["result"]["task"]
    assert task["status"] in ("working", "completed") and task["ttl"] == 60000 and task["pollInterval"] > 0
    result = raw.call("tasks/result", {"taskId": task["taskId"]})["result"]  # blocks until it ends
    assert result["structuredContent"]["result"]["ok"] and not result["isError"]
    assert result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == task["taskId"]
    assert raw.call("tasks/get", {"taskId": task["taskId"]})["result"]["status"] == "completed"
    listed = raw.call("tasks/list")["result"]["tasks"]
    assert [t["taskId"] for t in listed] == [task["taskId"]]
    # A verification that takes minutes, cancelled while working.
    started = raw.call("tools/call", {"name": "start_session", "arguments": {"reference_source": SMALL_RELU}})
    slow = started["result"]["structuredContent"]["session_id"]
    for path, content in {**_relu(), "model_new.py": SLOW_MODEL_NEW}.items():
        raw.call(
            "tools/call",
            {"name": "write_file", "arguments": {"session_id": slow, "path": path, "content": content}},
        )
    request = {"device": "cpu", "audit": False, "trials": 1}
    verify = {"name": "verify", "arguments": {"session_id": slow, "request": request}, "task": {}}
    spinning = raw.call("tools/call", verify)["result"]["task"]
    time.sleep(1)
    assert raw.call("tasks/get", {"taskId": spinning["taskId"]})["result"]["status"] == "working"
    cancelled = raw.call("tasks/cancel", {"taskId": spinning["taskId"]})["result"]
    assert cancelled["status"] == "cancelled"
    assert raw.call("tasks/cancel", {"taskId": spinning["taskId"]})["error"]["code"] == -32602
    assert raw.call("tasks/get", {"taskId": "no-such-task"})["error"]["code"] == -32602
    refused = raw.call("tools/call", {"name": "list_files", "arguments": {"session_id": session}, "task": {}})
    assert refused["error"]["code"] == -32601  # not a task tool


@pytest.mark.nvcc
def test_tasks_in_the_2026_07_28_extension_shape(raw: Raw) -> None:
    discovered = raw.call("server/discover", {"_meta": V2026})["result"]
    assert "io.modelcontextprotocol/tasks" in discovered["capabilities"]["extensions"]
    session = _session(raw, V2026, kernels=_relu())
    created = raw.call(
        "tools/call", {"name": "compile", "arguments": {"session_id": session}, "_meta": V2026}
    )["result"]
    assert created["resultType"] == "task" and created["status"] == "working" and created["ttlMs"] > 0
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        polled = raw.call("tasks/get", {"taskId": created["taskId"], "_meta": V2026})["result"]
        if polled["status"] != "working":
            break
        time.sleep(polled["pollIntervalMs"] / 1000)
    assert polled["status"] == "completed" and polled["resultType"] == "complete"
    assert polled["result"]["structuredContent"]["result"]["ok"]
    assert (
        raw.call("tasks/update", {"taskId": created["taskId"], "inputResponses": {}, "_meta": V2026})[
            "result"
        ]["resultType"]
        == "complete"
    )
    # Without the extension in the request's capabilities, the same call answers as it always did.
    plain = {**V2026, "io.modelcontextprotocol/clientCapabilities": {}}
    direct = raw.call(
        "tools/call", {"name": "compile", "arguments": {"session_id": session}, "_meta": plain}
    )["result"]
    assert direct.get("resultType") != "task" and direct["structuredContent"]["status"] in ("done", "running")


@pytest.mark.nvcc
def test_a_build_streams_log_notifications_and_progress(raw: Raw) -> None:
    _handshake(raw)
    assert raw.call("logging/setLevel", {"level": "info"})["result"] == {}
    session = _session(raw, kernels=_relu())
    raw.call(
        "tools/call", {"name": "compile", "arguments": {"session_id": session}, "_meta": {"progressToken": 7}}
    )
    logs = [n["params"] for n in raw.notifications if n["method"] == "notifications/message"]
    assert logs and all(p["logger"] == "cuda-agent.compile" for p in logs)
    assert any(p["data"].startswith("plan:") for p in logs) and any(
        p["data"].startswith("done:") for p in logs
    )
    assert any(n["method"] == "notifications/progress" for n in raw.notifications)


def test_completions_resource_errors_titles_and_annotations(raw: Raw) -> None:
    init = _handshake(raw)
    assert "completions" in init["capabilities"] and "logging" in init["capabilities"]
    session = _session(raw)
    sessions = raw.call(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "session://{session_id}/reference"},
            "argument": {"name": "session_id", "value": session[:3]},
        },
    )["result"]["completion"]
    assert sessions["values"] == [session]
    tasks = raw.call(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "start_task"},
            "argument": {"name": "task_id", "value": "examples/r"},
        },
    )["result"]["completion"]
    assert "examples/relu" in tasks["values"] and all(v.startswith("examples/r") for v in tasks["values"])
    missing = raw.call("resources/read", {"uri": "session://nope/reference"})["error"]
    assert missing["code"] == -32602 and "no session 'nope'" in missing["message"]
    tools = {t["name"]: t for t in raw.call("tools/list")["result"]["tools"]}
    assert all(t.get("title") for t in tools.values())
    destructive = {n for n, t in tools.items() if t["annotations"].get("destructiveHint")}
    assert destructive == {"end_session", "write_file", "edit_file", "run"}
    assert (
        tools["write_file"]["annotations"]["idempotentHint"]
        and tools["compile"]["annotations"]["idempotentHint"]
    )
    assert all(
        t["annotations"]["readOnlyHint"]
        for n, t in tools.items()
        if n in ("read_file", "list_sessions", "wait_job")
    )


@pytest.mark.parametrize("handshake", [True, False], ids=["after-initialize", "before-initialize"])
def test_bad_frames_get_the_specs_errors_and_the_session_goes_on(raw: Raw, handshake: bool) -> None:
    if handshake:
        _handshake(raw)
    for line, code, answer_id, says in [
        (b"{not json", -32700, None, "not JSON"),
        (b"\xff\xfe", -32700, None, "not JSON"),
        (b"[1, 2]", -32600, None, "is an object"),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', -32600, None, "batches are not supported"),
        (b"7", -32600, None, "is an object"),
        (b'{"id": 3, "method": "ping"}', -32600, 3, '"jsonrpc" must be "2.0"'),
        (b'{"jsonrpc": "1.0", "id": "a", "method": "ping"}', -32600, "a", '"jsonrpc" must be "2.0"'),
        (b'{"jsonrpc": "2.0", "id": 4, "method": 7}', -32600, 4, '"method" must be a string'),
        (b'{"jsonrpc": "2.0", "id": {}, "method": "ping"}', -32600, None, '"id" must be a string or'),
        (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', -32600, None, '"id" must be a string or'),
        (b'{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": [1]}', -32600, 5, '"params" must be'),
        (b'{"jsonrpc": "2.0", "id": 6}', -32600, None, '"method"'),
        (b'{"jsonrpc": "2.0", "id": 6, "result": 5}', -32600, None, '"result" must be an object'),
    ]:
        answer = raw.frame(line)
        assert answer is not None, f"no answer to {line!r}"
        assert answer["jsonrpc"] == "2.0" and answer["id"] == answer_id, (line, answer)
        assert answer["error"]["code"] == code and says in answer["error"]["message"], (line, answer)
    if not handshake:
        assert _handshake(raw)["serverInfo"]["name"] == "cuda-agent"  # bad frames first spoil nothing
    unknown = raw.call("no/such/method")
    assert unknown["error"]["code"] == -32601
    assert raw.call("ping") == {"jsonrpc": "2.0", "id": raw.next_id, "result": {}}  # the session goes on
    assert raw.frame(b"   ") is None  # a blank line is no frame: nothing to answer
    listing = raw.call("tools/call", {"name": "list_tasks", "arguments": {"query": {"contains": "relu"}}})
    assert not listing["result"]["isError"]


def test_the_server_reports_its_version(raw: Raw) -> None:
    init = _handshake(raw)
    assert init["serverInfo"] == {"name": "cuda-agent", "version": metadata.version("cuda-agent-mcp")}
    assert init["serverInfo"]["version"]


def test_ill_shaped_tool_arguments_are_one_readable_line(raw: Raw) -> None:
    _handshake(raw)

    def text(name: str, arguments: dict[str, Any]) -> str:
        result = raw.call("tools/call", {"name": name, "arguments": arguments})["result"]
        assert result["isError"]
        return " ".join(part["text"] for part in result["content"])

    assert text("read_file", {"session_id": "x", "path": 123}) == (
        "invalid arguments for read_file: path: expected a string (got 123)"
    )
    assert text("compile", {}) == "invalid arguments for compile: session_id: required"
    verify = text("verify", {"session_id": "x", "request": {"trials": "many", "device": 7, "bogus": 1}})
    assert verify.startswith("invalid arguments for verify: ") and "\n" not in verify
    for says in ('request.trials: expected an integer (got "many")', "request.device: expected 'cuda' or "):
        assert says in verify
    assert "request.bogus: unknown field (got 1)" in verify
    assert not any(word in verify for word in ("http", "pydantic", "For further information", "type="))
    # Arguments that fit reach the tool, whose own errors are as they were.
    assert "no session 'x'" in text("read_file", {"session_id": "x", "path": "model.py"})
