"""The `run` tool as a hostile client uses it (issue 17's list), over stdio and HTTP: every secret and every
other session stays out of reach, the harness files stay as they are, and the isolation is stated."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.security.conftest import ALICE, BOB, SSH_KEY, Server, run, start


def test_a_command_reads_no_shadow_file_no_server_home_no_token_file_and_no_server_state(
    server: Server,
) -> None:
    token_file, journal, cache = server.tokens_file, server.journal, server.cache
    script = (
        f"cat /etc/shadow; cat ~/.ssh/id_ed25519; cat {server.home}/.ssh/id_ed25519; cat {token_file}; "
        f"ls {server.home}; ls {cache}; ls {cache}/objects; head -c 64 {journal}; cat /proc/1/environ; "
        "ls /root; echo probe-done"
    )

    async def work():  # type: ignore[no-untyped-def]
        async with server.client() as client:
            session = await start(client)
            return session, await run(client, session["session_id"], script)

    session, result = anyio.run(work)
    output = result.structured_content["process"]["output"]
    assert "probe-done" in output
    for secret in (SSH_KEY, ALICE, BOB, "root:", "SQLite format", "CUDA_AGENT_CACHE"):
        assert secret not in output, secret
    isolation = result.structured_content["isolation"]
    assert {"filesystem", "network", "pid"} <= set(isolation) and "reduced-isolation" not in isolation
    assert session["isolation"] == isolation  # what start_session promised is what the command got


def test_a_command_runs_as_neither_root_nor_the_server(server: Server) -> None:
    import os

    async def work():  # type: ignore[no-untyped-def]
        async with server.client() as client:
            first = await start(client)
            second = await start(client)
            ids = [await run(client, s["session_id"], "id -u") for s in (first, second)]
            return [r.structured_content["process"]["output"].strip() for r in ids]

    uids = anyio.run(work)
    if os.geteuid() == 0:
        assert all(uid.isdigit() and int(uid) >= 1000 for uid in uids), uids
        assert uids[0] != uids[1], "two sessions share a uid"
    else:
        assert uids == [str(os.geteuid())] * 2  # a user cannot switch users; isolation says so


def test_one_session_cannot_write_into_another_or_into_its_own_harness_files(server: Server) -> None:
    async def work():  # type: ignore[no-untyped-def]
        async with server.client() as client:
            victim = await start(client)
            attacker = await start(client)
            target = victim["workspace"]
            script = (
                f"echo planted > {target}/kernels/evil.cu; echo planted >> {target}/model_new.py; "
                f"ls {target}; echo 'x = 1' >> model.py; mv model.py gone.py; rm -f binding.cpp; "
                "echo '// harness' >> binding_registry.h; exit 0"
            )
            result = await run(client, attacker["session_id"], script)
            files = await client.call_tool("list_files", {"session_id": victim["session_id"]})
            reference = await client.call_tool(
                "read_file", {"session_id": attacker["session_id"], "path": "model.py"}
            )
            # Looked at while the server (a stdio one ends with its client) still holds the sessions.
            attacked = Path(attacker["workspace"])
            on_disk = {
                "victim model_new.py": Path(victim["workspace"], "model_new.py").read_text(),
                "model.py kept": (attacked / "model.py").is_file() and not (attacked / "gone.py").exists(),
                "binding.cpp kept": (attacked / "binding.cpp").is_file(),
                "registry": (attacked / "binding_registry.h").read_text(),
            }
            return result, files, reference, on_disk

    result, files, reference, on_disk = anyio.run(work)
    assert "kernels/evil.cu" not in files.structured_content["files"]
    assert "planted" not in on_disk["victim model_new.py"]
    assert on_disk["model.py kept"] and on_disk["binding.cpp kept"]
    assert "// harness" not in on_disk["registry"]
    assert "x = 1" not in reference.structured_content["content"]
    output = result.structured_content["process"]["output"]
    assert any(refusal in output for refusal in ("Read-only file system", "Permission denied", "busy")), (
        output
    )


def test_another_client_over_http_cannot_reach_a_session_even_by_its_path(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    from tests.security.conftest import require_view, serve_http, stop

    require_view()
    running = serve_http(tmp_path, shared_build_cache)

    async def work():  # type: ignore[no-untyped-def]
        async with running.client(ALICE) as alice:
            mine = await start(alice)
        async with running.client(BOB) as bob:
            opened = await bob.call_tool("start_session", {"directory": mine["workspace"]})
            theirs = await start(bob)
            peek = await run(
                bob, theirs["session_id"], f"ls {mine['workspace']}; cat {mine['workspace']}/model.py"
            )
        return opened, peek

    try:
        opened, peek = anyio.run(work)
    finally:
        stop(running)
    assert opened.is_error and "only the local client" in opened.content[0].text
    assert "class Model" not in peek.structured_content["process"]["output"]


@pytest.mark.parametrize("transport", ["http"])
def test_the_isolation_is_stated_when_the_server_starts(
    transport: str, tmp_path: Path, shared_build_cache: Path
) -> None:
    from tests.security.conftest import require_view, serve_http, stop

    require_view()
    running = serve_http(tmp_path, shared_build_cache)
    said = stop(running)
    assert "agent commands and builds run isolated:" in said and "filesystem" in said, said
