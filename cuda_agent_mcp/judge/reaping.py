"""Killed workers reaped off a job's critical path (issue 25).

Runs in the judge process. A worker killed on a GPU takes a while to die: the driver tears down its CUDA
context before the process is gone (the first suspect for the 0.5 s per job that the H200 spent outside
every named phase at 3778cb8). So a worker closed with `reap_later` is sent its kill at once
(nothing of the candidate's runs after that) and waited for here, on a thread of its own, while the
judge writes its report and starts the next job. Two things wait for it:

- anything measured (timing, the kernel trace, the GPU's peak figures): `wait_for_reaping` first, so no
  context is torn down beside a clock;
- the memory it mapped: the judge's pools join the idle ones only once every reaping is done
  (`judge/staging.py`), so a kernel a killed candidate left in flight cannot write into the inputs of the
  next evaluation.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

REAP_WAIT_S = 30.0  # an honest teardown takes well under a second

_reapers: list[threading.Thread] = []
_lock = threading.Lock()


def reap_in_background(dispose: Callable[[], None]) -> None:
    """Run `dispose` (wait for a killed worker to die, remove what it left) on a thread of its own."""
    thread = threading.Thread(target=_reap, args=(dispose,), name="worker-reaper", daemon=True)
    with _lock:
        _reapers.append(thread)
    thread.start()


def _reap(dispose: Callable[[], None]) -> None:
    try:
        dispose()
    except Exception as exc:  # a leftover file or cgroup must not take the judge down; its log says so
        print(f"judge: reaping a worker failed: {type(exc).__name__}: {exc}", file=sys.stderr)


def _pending() -> list[threading.Thread]:
    with _lock:
        _reapers[:] = [thread for thread in _reapers if thread.is_alive()]
        return list(_reapers)


def reaping_pending() -> bool:
    """Whether some killed worker is still being reaped."""
    return bool(_pending())


def wait_for_reaping(limit_s: float = REAP_WAIT_S) -> None:
    """Block until every worker killed for reaping later is gone, with its files. TimeoutError after
    `limit_s` (a process the kernel cannot finish killing: the machine's fault)."""
    deadline = time.monotonic() + limit_s
    while pending := _pending():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"{len(pending)} killed worker(s) still not reaped after {limit_s:.0f} s")
        pending[0].join(remaining)
