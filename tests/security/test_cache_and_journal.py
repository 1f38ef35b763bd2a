"""The build cache and the journal, attacked end to end through a real HTTP server: an agent's command
cannot reach either, and what a reader finds corrupted anyway (an attacker who got past the view, a
disk error) is not trusted: a bad cache entry is evicted, rebuilt and logged; an unreadable journal row
is skipped and counted."""

from __future__ import annotations

import json
import sqlite3
import stat
import time
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.evaluation.rules_version import VERDICT_RULES_VERSION
from tests.conftest import EXAMPLES
from tests.security.conftest import ALICE, BOB, Server, require_view, run, serve_http, start, stop

pytestmark = pytest.mark.nvcc
POISON = b"\x7fPOISONED-BY-A-HOSTILE-CLIENT"
KERNELS = {f"kernels/{p.name}": p.read_text() for p in (EXAMPLES / "relu" / "kernels").iterdir()}


@pytest.fixture
def http_server(tmp_path: Path, shared_build_cache: Path):  # type: ignore[no-untyped-def]
    require_view()
    running = serve_http(tmp_path, shared_build_cache)
    yield running
    stop(running)


async def _compile(client, session: str) -> dict:  # type: ignore[no-untyped-def]
    for path, content in KERNELS.items():
        written = await client.call_tool(
            "write_file", {"session_id": session, "path": path, "content": content}
        )
        assert not written.is_error, written.content
    built = await client.call_tool("compile", {"session_id": session})
    state = built.structured_content
    while state["status"] == "running":  # a cold cache on a loaded machine: follow the job
        job = state["job"]["job_id"] if state.get("job") else state["job_id"]
        state = (await client.call_tool("wait_job", {"job_id": job})).structured_content
    assert state["result"]["ok"], state["result"]["summary"]
    # The answer is compact (no cache paths or content addresses); the full result is a resource.
    assert "extension_path" not in state["result"]
    full = await client.read_resource(f"session://{session}/result/compile")
    return json.loads(full.contents[0].text)


def test_a_poisoned_extension_or_object_is_never_handed_to_another_client(http_server: Server) -> None:
    async def work():  # type: ignore[no-untyped-def]
        async with http_server.client(ALICE) as alice:
            session = (await start(alice))["session_id"]
            built = await _compile(alice, session)
            extension = built["extension_path"]
            attempt = await run(
                alice, session, f"printf POISON >> {extension}; ls {Path(extension).parent}; exit 0"
            )
        # An attacker who got past the view (or a bad disk) changes both kinds of entry.
        objects = [
            http_server.cache / "objects" / f["object_key"][:2] / f"{f['object_key']}.o"
            for f in built["files"]
        ]
        for entry in (Path(extension), *objects):
            with entry.open("ab") as poisoned:
                poisoned.write(POISON)
        async with http_server.client(BOB) as bob:
            started = await start(bob)
            rebuilt = await _compile(bob, started["session_id"])
            in_workspace = Path(started["workspace"], "cuda_extension.so").read_bytes()
        return built, attempt, rebuilt, in_workspace, objects

    built, attempt, rebuilt, in_workspace, objects = anyio.run(work)
    output = attempt.structured_content["process"]["output"]
    assert output.count("No such file") == 2, output  # neither the entry nor its directory exists there
    assert rebuilt["build_key"] == built["build_key"]  # the same sources: the same entry, rebuilt
    assert {f["action"] for f in rebuilt["files"]} == {"compiled"}  # every poisoned object was evicted
    assert POISON not in in_workspace and POISON not in Path(rebuilt["extension_path"]).read_bytes()
    assert all(POISON not in path.read_bytes() for path in objects)
    said = stop(http_server)
    assert "build cache: evicted extension" in said and "build cache: evicted object" in said, said[-2000:]


def test_the_journal_is_out_of_reach_and_an_unreadable_row_is_skipped_not_a_crash(
    http_server: Server,
) -> None:
    journal = http_server.journal

    async def work():  # type: ignore[no-untyped-def]
        async with http_server.client(ALICE) as alice:
            started = await start(alice)
            session = started["session_id"]
            forge = (
                f"python -c \"import sqlite3; sqlite3.connect('{journal}').execute('select 1')\" 2>&1 | tail -1; "
                f"ls -l {journal}; exit 0"
            )
            attempt = await run(alice, session, forge)
            # Rows no honest process writes, injected past the view: each must be left out, not fail.
            _inject(journal, session)
            status = await alice.call_tool("session_status", {"session_id": session})
            history = await alice.read_resource(f"session://{session}/history")
            return attempt, status, history

    attempt, status, history = anyio.run(work)
    assert (
        "unable to open database" in attempt.structured_content["process"]["output"]
        or "No such file" in (attempt.structured_content["process"]["output"])
    )
    assert not status.is_error, status.content
    content = status.structured_content
    assert content["skipped_records"] == 3 and content["best_reward"] == 1.0, content
    assert json.loads(history.contents[0].text)["skipped_records"] == 3
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600


def _inject(journal: Path, session: str) -> None:
    db = sqlite3.connect(journal)
    row = "INSERT INTO evaluations VALUES (?, 'evaluate', ?, 't', 'h', 's', ?, 'passed', ?, ?, 1, '', ?, ?, NULL, ?)"
    now, rules = time.time(), VERDICT_RULES_VERSION
    rows = [
        ("good", session, "done", now, now, "{}", json.dumps({"reward": 1.0}), rules),
        ("bad-json", session, "done", now, now, "{}", "{not json", rules),
        ("bad-status", session, "forged", now, now, "{}", json.dumps({"reward": 3.0}), rules),
        ("bad-environment", session, "done", now, now, "[1, 2]", json.dumps({"reward": 3.0}), rules),
        ("odd-reward", session, "done", now, now, "{}", json.dumps({"reward": "3.0"}), rules),
        # A reward given under other rules is history, never the session's best.
        ("older-rules", session, "done", now, now, "{}", json.dumps({"reward": 3.0}), "2000-01-01"),
    ]
    with db:
        db.executemany(row, rows)
    db.close()
