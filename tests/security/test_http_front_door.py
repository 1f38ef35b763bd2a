"""The HTTP front door as a hostile client meets it: oversized and malformed bodies get a JSON-RPC error
with a message, repeated failed authentication gets 429 (for the failing tokens only: a client with a
valid token on the same address is never locked out), and no OAuth metadata is advertised for an
authorization server that does not exist."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.security.conftest import ALICE, BOB, Server, serve_http, stop

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture
def served(tmp_path: Path, shared_build_cache: Path):  # type: ignore[no-untyped-def]
    running = serve_http(tmp_path, shared_build_cache)
    yield running
    stop(running)


def _post(url: str, body: bytes, token: str | None = ALICE) -> httpx2.Response:
    headers = {**HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}
    return httpx2.post(url, content=body, headers=headers, timeout=30)


def _message(answer: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response, sent as JSON or as one server-sent event."""
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return answer.json()


def _initialize(url: str, token: str) -> str:
    """A new MCP session for `token` over raw HTTP; its session id."""
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    answer = _post(
        url, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode(), token
    )
    assert answer.status_code == 200, answer.text
    return answer.headers["mcp-session-id"]


def _in_session(url: str, session: str, message: dict[str, Any], token: str = ALICE) -> httpx2.Response:
    headers = {**HEADERS, "Authorization": f"Bearer {token}", "Mcp-Session-Id": session}
    headers["Mcp-Protocol-Version"] = "2025-11-25"
    return httpx2.post(url, content=json.dumps(message).encode(), headers=headers, timeout=30)


def test_an_oversized_body_is_a_json_rpc_error_saying_the_limit(served: Server) -> None:
    answer = _post(
        served.url,
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' + b"a" * (5 << 20) + b'"}}',
    )
    assert answer.status_code == 413
    error = answer.json()["error"]
    assert error["code"] == -32600 and "larger than 4194304 bytes" in error["message"]


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        (b"{not json", -32700, "not JSON"),
        (b"[1, 2]", -32600, "is an object"),
        (b'{"jsonrpc": "2.0", "id": 1}', -32600, '"method"'),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', -32600, '"jsonrpc" must be "2.0"'),
        (b'{"jsonrpc": "2.0", "id": 1, "method": 7}', -32600, '"method" must be a string'),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', -32600, "batches are not supported"),
        (b'{"jsonrpc": "2.0", "id": {}, "method": "ping"}', -32600, '"id" must be a string or an integer'),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}', -32600, '"params" must be an'),
        (b'{"jsonrpc": "2.0", "id": 1, "result": 5}', -32600, '"result" must be an object'),
    ],
)
def test_a_malformed_body_is_a_short_json_rpc_error(
    served: Server, body: bytes, code: int, says: str
) -> None:
    answer = _post(served.url, body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == code and says in error["message"] and len(error["message"]) < 200
    # A request's usable id is echoed; a parse error or an unusable id answers null (JSON-RPC 2.0 §5).
    sent = json.loads(body) if code != -32700 else None
    echoed = sent.get("id") if isinstance(sent, dict) and "method" in sent else None
    assert answer.json()["id"] == (echoed if isinstance(echoed, int) else None)


def test_an_unknown_method_is_method_not_found_and_the_session_goes_on(served: Server) -> None:
    session = _initialize(served.url, ALICE)
    assert _in_session(
        served.url, session, {"jsonrpc": "2.0", "method": "notifications/initialized"}
    ).is_success
    unknown = _in_session(served.url, session, {"jsonrpc": "2.0", "id": 2, "method": "no/such/method"})
    assert _message(unknown)["error"]["code"] == -32601
    assert _post(served.url, b"{not json").json()["error"]["code"] == -32700
    ping = _in_session(served.url, session, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert _message(ping) == {"jsonrpc": "2.0", "id": 3, "result": {}}


def test_repeated_failed_authentication_is_throttled_with_429(served: Server) -> None:
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    statuses = [_post(served.url, ping, token="guess-" + "x" * 20 + str(i)).status_code for i in range(12)]
    assert statuses[:10] == [401] * 10 and statuses[10:] == [429, 429]
    for token in ("guess-" + "y" * 20, None):  # any request without a valid token waits
        throttled = _post(served.url, ping, token=token)
        assert throttled.status_code == 429 and int(throttled.headers["retry-after"]) >= 1
        assert "too many failed authentications" in throttled.json()["error"]["message"]


def test_a_client_guessing_tokens_locks_no_other_client_out(served: Server) -> None:
    """Two clients on one address (as behind a reverse proxy): one hammers wrong tokens, the other's open
    session and new sessions keep working; only the guesser is throttled."""

    async def work() -> tuple[list[int], Any, str]:
        async with served.client(BOB) as bob:
            assert (await bob.list_tools()).tools
            ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
            async with httpx2.AsyncClient(timeout=30) as guesser:
                statuses = []
                for i in range(15):
                    headers = {**HEADERS, "Authorization": f"Bearer guess-{'x' * 20}{i}"}
                    statuses.append(
                        (await guesser.post(served.url, content=ping, headers=headers)).status_code
                    )
            listing = await bob.call_tool("list_tasks", {"query": {"contains": "relu"}})
            return statuses, listing, _initialize(served.url, ALICE)

    statuses, listing, alice_session = anyio.run(work)
    assert statuses == [401] * 10 + [429] * 5
    assert not listing.is_error and listing.structured_content["tasks"]  # Bob's open session works
    ping = _in_session(served.url, alice_session, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert _message(ping)["result"] == {}  # and Alice starts a new one and uses it
    assert (
        _post(
            served.url, b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', token="guess-" + "z" * 20
        ).status_code
        == 429
    )


def test_no_oauth_metadata_is_advertised_without_an_authorization_server(served: Server) -> None:
    base = served.url.removesuffix("/mcp")
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server"):
        assert httpx2.get(base + path, timeout=10).status_code == 404, path
    refused = _post(served.url, b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', token=None)
    assert refused.status_code == 401 and "resource_metadata" not in refused.headers.get(
        "www-authenticate", ""
    )


def test_protected_resource_metadata_names_a_configured_authorization_server(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    issuer = "https://login.example.org"
    running = serve_http(tmp_path, shared_build_cache, "--authorization-server", issuer)
    try:
        base = running.url.removesuffix("/mcp")
        metadata = httpx2.get(base + "/.well-known/oauth-protected-resource/mcp", timeout=10)
    finally:
        stop(running)
    assert metadata.status_code == 200
    assert [s.rstrip("/") for s in metadata.json()["authorization_servers"]] == [issuer]
