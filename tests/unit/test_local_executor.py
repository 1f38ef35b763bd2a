"""The local executor: limits on time and output, and that nothing it started outlives a call."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.executors import LocalExecutor, ProcessLimits


def run(argv: list[str], tmp_path: Path, **limits: float) -> object:
    return anyio.run(lambda: LocalExecutor().run(argv, cwd=tmp_path, limits=ProcessLimits(**limits)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child that its parent has not reaped yet is a zombie, not alive.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ")[1][0] != "Z"


def test_output_and_exit_status_are_returned(tmp_path: Path) -> None:
    result = run(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
        tmp_path,
    )
    assert result.returncode == 3  # type: ignore[attr-defined]
    assert "out" in result.output and "err" in result.output  # type: ignore[attr-defined]
    assert not result.ok  # type: ignore[attr-defined]


def test_a_process_past_its_time_limit_is_killed_with_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    result = run([sys.executable, "-c", script], tmp_path, timeout_s=1.5)
    assert time.monotonic() - started < 10
    assert result.timed_out and result.returncode is None  # type: ignore[attr-defined]
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_a_flood_of_output_is_stopped_and_truncated_with_a_marker(tmp_path: Path) -> None:
    flood = "import sys\nwhile True: sys.stdout.write('x' * 65536)\n"
    result = run(
        [sys.executable, "-c", flood], tmp_path, max_output_bytes=1_000_000, keep_output_bytes=20_000
    )
    assert result.output_limit_hit and result.returncode is None  # type: ignore[attr-defined]
    assert "bytes of output truncated" in result.output  # type: ignore[attr-defined]
    assert len(result.output) < 25_000  # type: ignore[attr-defined]


def test_a_missing_program_is_an_infrastructure_error(tmp_path: Path) -> None:
    with pytest.raises(ExecutorUnavailable, match="no-such-compiler"):
        run(["no-such-compiler", "--version"], tmp_path)


def test_the_environment_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_SEED", "1234")
    result = run([sys.executable, "-c", "import os; print(sorted(os.environ))"], tmp_path)
    assert "SECRET_SEED" not in result.output  # type: ignore[attr-defined]
    assert "'LC_ALL'" in result.output  # type: ignore[attr-defined]
