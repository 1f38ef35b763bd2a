"""Faults from candidate code that the worker's limits contain, on the CPU (real worker processes)."""

from __future__ import annotations

from cuda_agent_mcp.evaluator.job import Timeouts
from cuda_agent_mcp.results import Crashed, Passed, TimedOut
from cuda_agent_mcp.worker.__main__ import MAX_FILE_BYTES
from tests.evaluator.conftest import HONEST


def test_a_gigabyte_printed_to_stdout_is_cut_off_and_reported(run_judge, tmp_path) -> None:
    flood = HONEST.replace(
        "        return (x * self.scale).clamp_min(0)",
        "        import sys\n        for _ in range(1024):\n            sys.stdout.write('x' * (1 << 20))\n"
        "        sys.stdout.flush()\n        return (x * self.scale).clamp_min(0)",
    )
    report = run_judge(flood)
    assert isinstance(report.verdict, Crashed), report.verdict
    assert "File too large" in report.verdict.message
    logs = list(tmp_path.rglob("worker.log"))
    assert all(log.stat().st_size <= MAX_FILE_BYTES for log in logs)
    assert isinstance(run_judge(HONEST).verdict, Passed)


def test_writing_a_large_file_anywhere_fails_in_the_worker(run_judge, tmp_path) -> None:
    target = tmp_path / "planted.bin"
    writer = HONEST.replace(
        "        return (x * self.scale).clamp_min(0)",
        f"        open({str(target)!r}, 'wb').write(b'0' * (128 << 20))\n        return (x * self.scale).clamp_min(0)",
    )
    report = run_judge(writer)
    assert isinstance(report.verdict, Crashed), report.verdict
    assert target.stat().st_size <= MAX_FILE_BYTES


def test_sleeping_forever_in_init_is_a_load_timeout(run_judge) -> None:
    sleeper = HONEST.replace(
        "        super().__init__()",
        "        super().__init__()\n        import time\n        time.sleep(3600)",
    )
    report = run_judge(sleeper, timeouts=Timeouts(load_s=5, call_s=10))
    assert isinstance(report.verdict, TimedOut), report.verdict
    assert report.verdict.phase == "load" and report.verdict.limit_s == 5
    assert isinstance(run_judge(HONEST).verdict, Passed)
