"""The HTTP front door as a hostile client meets it: oversized and malformed bodies get a JSON-RPC error
with a message, repeated failed authentication gets 429, and no OAuth metadata is advertised for an
authorization server that does not exist."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from tests.security.conftest import ALICE, Server, serve_http, stop

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture
def served(tmp_path: Path, shared_build_cache: Path):  # type: ignore[no-untyped-def]
    running = serve_http(tmp_path, shared_build_cache)
    yield running
    stop(running)


def _post(url: str, body: bytes, token: str | None = ALICE) -> httpx2.Response:
    headers = {**HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}
    return httpx2.post(url, content=body, headers=headers, timeout=30)


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
    ],
)
def test_a_malformed_body_is_a_short_json_rpc_error(
    served: Server, body: bytes, code: int, says: str
) -> None:
    answer = _post(served.url, body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == code and says in error["message"] and len(error["message"]) < 200


def test_repeated_failed_authentication_is_throttled_with_429(served: Server) -> None:
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    statuses = [_post(served.url, ping, token="guess-" + "x" * 20 + str(i)).status_code for i in range(12)]
    assert statuses[:10] == [401] * 10 and statuses[10:] == [429, 429]
    throttled = _post(served.url, ping)  # even the right token waits: the address is throttled
    assert throttled.status_code == 429 and int(throttled.headers["retry-after"]) >= 1
    assert "too many failed authentications" in throttled.json()["error"]["message"]


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
