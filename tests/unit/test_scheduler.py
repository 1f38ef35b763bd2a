"""GPU leases: exclusivity for timing, bounded sharing, fairness between sessions, visible queue places."""

from __future__ import annotations

import anyio
import pytest

from cuda_agent_mcp.executors.scheduler import GpuScheduler, QueueStatus


def test_two_timed_jobs_never_hold_the_same_gpu_at_once() -> None:
    scheduler = GpuScheduler([0])
    active: list[str] = []
    overlaps: list[tuple[str, ...]] = []

    async def timed(owner: str) -> None:
        async with scheduler.lease(owner, exclusive=True):
            active.append(owner)
            overlaps.append(tuple(active))
            await anyio.sleep(0.01)
            active.remove(owner)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for owner in ("a", "b", "c", "a", "b"):
                group.start_soon(timed, owner)

    anyio.run(main)
    assert all(len(snapshot) == 1 for snapshot in overlaps)
    assert len(overlaps) == 5


def test_correctness_jobs_share_a_gpu_up_to_the_limit_and_block_timing() -> None:
    scheduler = GpuScheduler([0], shared_slots=2)
    seen: list[dict[int, str]] = []

    async def main() -> None:
        async with scheduler.lease("a", exclusive=False), scheduler.lease("b", exclusive=False):
            seen.append(scheduler.status())
            with anyio.move_on_after(0.05) as waiting:
                async with scheduler.lease("c", exclusive=True):
                    pass
            assert waiting.cancelled_caught  # timing waits while anything shares the GPU
        async with scheduler.lease("c", exclusive=True):
            seen.append(scheduler.status())
        seen.append(scheduler.status())

    anyio.run(main)
    assert seen == [{0: "shared:2"}, {0: "exclusive"}, {0: "idle"}]


def test_sessions_take_turns_instead_of_first_come_first_served() -> None:
    scheduler = GpuScheduler([0])
    order: list[str] = []

    async def job(owner: str, started: anyio.Event | None = None) -> None:
        async with scheduler.lease(owner, exclusive=True):
            if started:
                started.set()
            order.append(owner)
            await anyio.sleep(0.01)

    async def main() -> None:
        first = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(job, "busy", first)
            await first.wait()
            for _ in range(3):
                group.start_soon(job, "busy")  # a session that queues three more jobs
                await anyio.sleep(0)
            group.start_soon(job, "other")  # arrives last

    anyio.run(main)
    assert order[:2] == ["busy", "other"], order


def test_waiters_are_told_their_place_and_see_it_advance() -> None:
    scheduler = GpuScheduler([0])
    places: list[int] = []

    async def main() -> None:
        async with scheduler.lease("holder", exclusive=True):
            first_in_line = anyio.CancelScope()

            async def x_waits() -> None:
                with first_in_line:
                    async with scheduler.lease("x", exclusive=True):
                        pass

            async def y_waits() -> None:
                async with scheduler.lease("y", exclusive=True, on_wait=lambda s: places.append(s.position)):
                    pass

            async with anyio.create_task_group() as group:
                group.start_soon(x_waits)
                await anyio.sleep(0.01)
                group.start_soon(y_waits)
                await anyio.sleep(0.01)
                assert places == [2]
                first_in_line.cancel()  # x gives up: y moves up
                await anyio.sleep(0.01)
                assert places == [2, 1]
                group.cancel_scope.cancel()

    anyio.run(main)


def test_a_cancelled_waiter_leaves_the_queue_and_the_next_one_is_served() -> None:
    scheduler = GpuScheduler([0, 1])
    gpus: list[int] = []

    async def main() -> None:
        async with scheduler.lease("a", exclusive=True) as first:
            gpus.append(first.gpu)
            async with scheduler.lease("b", exclusive=True) as second:
                gpus.append(second.gpu)
                with anyio.move_on_after(0.02):
                    async with scheduler.lease("c", exclusive=True):
                        pytest.fail("no GPU was free")
        async with scheduler.lease("d", exclusive=True) as third:
            gpus.append(third.gpu)
        statuses: list[QueueStatus] = []
        async with scheduler.lease("e", exclusive=False, on_wait=statuses.append):
            pass
        assert statuses == []  # served at once: never waited

    anyio.run(main)
    assert sorted(gpus[:2]) == [0, 1] and gpus[2] in (0, 1)
    assert scheduler.status() == {0: "idle", 1: "idle"}


def test_a_drained_gpu_takes_no_new_work_and_waiting_jobs_go_to_the_others() -> None:

    scheduler = GpuScheduler([0, 1])
    granted: list[int] = []

    async def main() -> None:
        async with scheduler.lease("a", exclusive=True) as first:
            scheduler.record_probe(first.gpu, "probe kernel failed")
        for owner in ("b", "c"):
            async with scheduler.lease(owner, exclusive=True) as lease:
                granted.append(lease.gpu)
        assert scheduler.status()[0] == "drained: probe kernel failed"

    anyio.run(main)
    assert granted == [1, 1]
    assert scheduler.last_probe == {0: "probe kernel failed"}


def test_when_every_gpu_is_drained_waiting_and_new_requests_fail_with_the_reasons() -> None:
    from cuda_agent_mcp.errors import GpusDrained

    scheduler = GpuScheduler([0])
    outcomes: list[str] = []

    async def waiter() -> None:
        try:
            async with scheduler.lease("b", exclusive=True):
                outcomes.append("granted")
        except GpusDrained as exc:
            outcomes.append(str(exc))

    async def main() -> None:
        async with anyio.create_task_group() as group, scheduler.lease("a", exclusive=True) as lease:
            group.start_soon(waiter)
            await anyio.sleep(0.01)
            scheduler.drain(lease.gpu, "illegal address on the probe")
        with pytest.raises(GpusDrained, match="GPU 0: illegal address"):
            async with scheduler.lease("c", exclusive=False):
                pass

    anyio.run(main)
    assert outcomes == ["every GPU is drained (GPU 0: illegal address on the probe)"]
