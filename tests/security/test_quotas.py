"""Quotas per session, enforced while a command runs, with the defaults a server starts with: a command
that runs into one gets a tool error naming it, and the session goes on."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from cuda_agent_mcp.executors import ProcessLimits, SandboxedExecutor, SandboxPolicy
from cuda_agent_mcp.isolation.quota import QuotaOutcome, SessionQuotas
from cuda_agent_mcp.tools.run import limit_reached
from tests.security.conftest import Server, require_view, run, start, text

GiB, MiB = 1024**3, 1024**2


def test_a_two_gigabyte_file_stops_at_the_file_limit_and_the_session_goes_on(server: Server) -> None:
    async def work():  # type: ignore[no-untyped-def]
        async with server.client() as client:
            session = (await start(client))["session_id"]
            big = await run(client, session, "head -c 2G /dev/zero > big; ls -l big")
            after = await run(client, session, "stat -c %s big; echo still-here")
            return big, after

    big, after = anyio.run(work)
    assert big.is_error and "256 MiB for one file" in text(big), text(big)
    size, marker = after.structured_content["process"]["output"].split()
    assert int(size) <= 256 * MiB and marker == "still-here"


def test_the_workspace_stops_at_one_gibibyte_while_the_command_runs(server: Server) -> None:
    if server.transport == "stdio":
        return  # the same server code; one transport is enough for a gibibyte of writes
    fill = "for i in 1 2 3 4 5; do head -c 250M /dev/zero > f$i || echo failed-at-$i; done"

    async def work():  # type: ignore[no-untyped-def]
        async with server.client() as client:
            started = await start(client)
            session = started["session_id"]
            filled = await run(client, session, fill, timeout_s=300)
            used = sum(p.stat().st_size for p in Path(started["workspace"]).rglob("*") if p.is_file())
            # Space a command frees counts from the next command on (its writes land beside the lower layer).
            await run(client, session, "rm -f f*")
            freed = await run(client, session, "head -c 1M /dev/zero > small && echo wrote-again")
            return filled, used, freed

    filled, used, freed = anyio.run(work)
    assert filled.is_error and "quota of 1 GiB" in text(filled) and "failed-at-5" in text(filled), text(
        filled
    )
    assert used <= GiB
    assert not freed.is_error and "wrote-again" in freed.structured_content["process"]["output"]


def test_too_many_files_and_a_fork_bomb_are_stopped_with_their_names(server: Server) -> None:
    async def work():  # type: ignore[no-untyped-def]
        async with server.client() as client:
            session = (await start(client))["session_id"]
            files = await run(
                client, session, "mkdir many && cd many && for i in $(seq 5000); do : > $i; done"
            )
            bomb = await run(client, session, "bomb() { bomb | bomb & }; bomb; sleep 3", timeout_s=8)
            alive = await run(client, session, "rm -rf many; echo alive")
            return files, bomb, alive

    files, bomb, alive = anyio.run(work)
    assert files.is_error and "4096 files and directories" in text(files), text(files)
    from cuda_agent_mcp.isolation.cgroup import pids_cgroup_root

    if pids_cgroup_root() is not None:  # elsewhere RLIMIT_NPROC stops it, without a count to report
        assert bomb.is_error and "256 processes" in text(bomb), text(bomb)
    assert "alive" in alive.structured_content["process"]["output"]


def test_calls_per_minute_are_limited_per_session_with_a_message_saying_when_to_call_again(
    server: Server,
) -> None:
    if server.transport == "http":
        return  # the limit is counted by the registry, whichever transport

    async def work():  # type: ignore[no-untyped-def]
        async with server.client() as client:
            busy = (await start(client))["session_id"]
            calm = (await start(client))["session_id"]
            answers = [await client.call_tool("list_files", {"session_id": busy}) for _ in range(242)]
            other = await client.call_tool("list_files", {"session_id": calm})
            return answers, other

    answers, other = anyio.run(work)
    refused = [a for a in answers if a.is_error]
    assert refused and "calls in the last minute" in text(refused[0]) and "wait" in text(refused[0])
    assert not other.is_error


def test_cpu_time_per_call_is_a_limit_the_command_runs_into(tmp_path: Path) -> None:
    require_view()
    executor = SandboxedExecutor(SandboxPolicy(max_cpu_seconds=1))
    spin = [sys.executable, "-c", "while True: pass"]
    limits = ProcessLimits(timeout_s=30)
    result = anyio.run(
        lambda: executor.run(
            spin, cwd=tmp_path, limits=limits, readable=[Path(sys.prefix), Path(sys.base_prefix)]
        )
    )
    assert result.wall_s < 20
    message = limit_reached(result, QuotaOutcome(), SessionQuotas(cpu_seconds=1))
    assert message is not None and "CPU seconds" in message
