"""Workers reaped after their job (judge/reaping.py): killed at once, waited for off the critical path, and
waited for before anything is measured or any memory they mapped is reused."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from cuda_agent_mcp.judge import staging
from cuda_agent_mcp.judge.reaping import reap_in_background, reaping_pending, wait_for_reaping
from cuda_agent_mcp.judge.worker_client import ForkedWorkerPool
from cuda_agent_mcp.results import Passed
from tests.evaluator.conftest import HONEST

SIGKILL_MASK = 1 << 8  # signal 9 in /proc/PID/status's pending masks


def _killed_or_gone(pid: int) -> bool:
    """Nothing of `pid` can run user code again: it is gone, a zombie, or SIGKILL is pending for it."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if fields["State"].strip().startswith(("Z", "X")):
        return True
    pending = int(fields["SigPnd"], 16) | int(fields["ShdPnd"], 16)
    return bool(pending & SIGKILL_MASK)


@pytest.fixture
def slow_reaping() -> Iterator[threading.Event]:
    """A reaping that lasts until the test sets the event (a CUDA context that takes long to go)."""
    done = threading.Event()
    reap_in_background(lambda: done.wait(30))
    yield done
    done.set()
    wait_for_reaping()


def test_a_worker_closed_for_reaping_later_is_killed_at_once_and_gone_with_its_files_once_reaped(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME")}
    worker = ForkedWorkerPool(tmp_path, env).take()
    pid = worker.process.pid
    directory = worker.directory
    cage = worker.cage.path if worker.cage is not None else None
    worker.close(reap_later=True)
    assert _killed_or_gone(pid)
    wait_for_reaping()
    assert not reaping_pending()
    assert not Path(f"/proc/{pid}").exists() or _killed_or_gone(pid)
    assert not directory.exists()
    assert cage is None or not cage.exists()


def test_a_profile_times_nothing_until_earlier_workers_are_reaped_and_a_verify_never_waits(run_judge) -> None:
    for mode in ("verify", "profile"):
        done = threading.Event()
        reap_in_background(lambda done=done: done.wait(30))  # a context that takes 3 s to go
        threading.Timer(3.0, done.set).start()
        report = run_judge(HONEST, mode=mode)
        assert isinstance(report.verdict, Passed), report.verdict
        if mode == "verify":
            assert "reap_wait" not in report.phases_s  # nothing measured: it ran beside the reaping
        else:
            assert report.phases_s["reap_wait"] >= 1.0  # waited before its first timed batch


def test_pools_given_back_while_a_worker_is_reaped_become_idle_only_after_it(
    monkeypatch: pytest.MonkeyPatch, slow_reaping: threading.Event
) -> None:
    monkeypatch.setattr(staging, "_IDLE", [])
    monkeypatch.setattr(staging, "_AWAITING_REAP", [])
    buffer = torch.zeros(4096, dtype=torch.uint8)
    ref = staging.share(buffer)
    pool = staging._Pool(
        slot_bytes=1024, regions=2, buffer=buffer, pool=None, ref=ref, counter=None, order=[0]
    )
    staging.give_back(pool)
    assert pool not in staging._IDLE  # a kernel the killed worker left in flight could still write it
    assert staging.idle_pool_bytes() == 4096  # kept on purpose: no reason to retire the judge
    slow_reaping.set()
    wait_for_reaping()
    assert staging._take_pool(torch.device("cpu"), 1024, 2) is pool
