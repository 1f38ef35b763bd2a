"""The sandbox issue's fault suite, the cases that need no GPU, on both isolating backends.

Each case asserts the structured outcome and that the same executor's next command succeeds. Commands
are shell and g++ only, which both the host and the sandbox image have."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import anyio
import pytest

import cuda_agent_mcp
from cuda_agent_mcp.executors import ProcessLimits
from cuda_agent_mcp.executors.base import ProcessResult
from cuda_agent_mcp.isolation.cgroup import pids_cgroup_root
from tests.processes import cmdline


def run(executor: object, script: str, cwd: Path, timeout_s: float = 20, **limits: int) -> ProcessResult:
    process_limits = ProcessLimits(timeout_s=timeout_s, **limits)
    argv = ["bash", "-c", script]
    return anyio.run(lambda: executor.run(argv, cwd=cwd, limits=process_limits))  # type: ignore[attr-defined]


def still_works(executor: object, cwd: Path) -> None:
    result = run(executor, "echo alive > alive.txt && cat alive.txt", cwd)
    assert result.ok and "alive" in result.output, result
    assert (cwd / "alive.txt").read_text().strip() == "alive"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


def test_a_gigabyte_printed_to_stdout_is_cut_off_with_a_marker(executor: object, workdir: Path) -> None:
    result = run(executor, "head -c 1073741824 /dev/zero | tr '\\0' x", workdir, max_output_bytes=4 << 20)
    assert result.output_limit_hit and result.returncode is None
    assert result.output_truncated and "bytes of output truncated" in result.output
    still_works(executor, workdir)


def test_writing_outside_the_workspace_fails(executor: object, workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    result = run(executor, f"echo planted > {outside}/planted; echo planted > /usr/planted; exit 0", workdir)
    assert not (outside / "planted").exists()
    assert not Path("/usr/planted").exists()
    assert "Read-only file system" in result.output or "No such file or directory" in result.output
    still_works(executor, workdir)


def test_the_evaluators_sources_and_other_workspaces_cannot_be_read(
    executor: object, workdir: Path, tmp_path: Path
) -> None:
    judge_source = Path(cuda_agent_mcp.__file__).parent / "judge" / "judge.py"
    other = tmp_path / "other-session"
    other.mkdir()
    (other / "model_new.py").write_text("SECRET = 'another agent's kernel'\n")
    script = f"cat {judge_source}; cat {other}/model_new.py; echo listing: $(ls {tmp_path}); exit 0"
    result = run(executor, script, workdir)
    assert "def " not in result.output and "SECRET" not in result.output
    assert "listing: work\n" in result.output  # the other session's directory is not even listed
    still_works(executor, workdir)


def test_no_network_connection_reaches_the_host(executor: object, workdir: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        result = run(executor, f"echo hi > /dev/tcp/127.0.0.1/{port} && echo connected", workdir)
    assert "connected" not in result.output and result.returncode != 0
    still_works(executor, workdir)


def test_sleeping_forever_is_a_timeout_and_is_killed(executor: object, workdir: Path) -> None:
    result = run(executor, "sleep 3600", workdir, timeout_s=3)
    assert result.timed_out and result.returncode is None
    assert result.wall_s < 15
    still_works(executor, workdir)


def test_a_compile_that_never_ends_is_a_timeout(executor: object, workdir: Path) -> None:
    # Unbounded template recursion only overflows g++'s stack; a constant-evaluated loop of 2^31 steps
    # keeps it busy for minutes.
    (workdir / "spin.cpp").write_text(
        "constexpr unsigned long spin() { unsigned long s = 0;\n"
        "  for (unsigned long i = 0; i < (1UL << 62); ++i) s += i ^ s; return s; }\n"
        "static_assert(spin() != 1);\n"
    )
    limits = "-fconstexpr-loop-limit=2147483647 -fconstexpr-ops-limit=4611686018427387904"
    result = run(executor, f"g++ -std=c++20 {limits} -c spin.cpp -o spin.o", workdir, timeout_s=4)
    assert result.timed_out, result
    still_works(executor, workdir)


def test_a_background_daemon_does_not_outlive_its_command(executor: object, workdir: Path) -> None:
    daemon = "setsid bash -c 'while true; do echo x >> beat; sleep 0.05; done' </dev/null >/dev/null 2>&1 &"
    result = run(executor, f"{daemon} sleep 0.5; exit 0", workdir)
    assert result.ok
    size = (workdir / "beat").stat().st_size
    time.sleep(0.6)
    assert (workdir / "beat").stat().st_size == size, "a process the command started outlived it"
    still_works(executor, workdir)


def test_a_fork_bomb_stops_at_the_process_cap_and_leaves_nothing(executor: object, workdir: Path) -> None:
    if executor.name == "sandbox" and pids_cgroup_root() is None:  # type: ignore[attr-defined]
        pytest.skip("no writable pids cgroup here: the process sandbox cannot cap processes")
    root = pids_cgroup_root()
    before = set(root.glob("worker-run-*")) if root is not None else set()
    result = run(executor, "bomb() { bomb | bomb & }; bomb; sleep 3600", workdir, timeout_s=5)
    assert result.timed_out or result.returncode != 0
    still_works(executor, workdir)
    if executor.name == "sandbox" and root is not None:  # type: ignore[attr-defined]
        # Only this command's processes count: other tests' commands and builds may run meanwhile.
        new = set(root.glob("worker-run-*")) - before
        assert not [d for d in new if any(b"bomb" in cmdline(int(pid)) for pid in _procs(d))]


def _procs(cgroup: Path) -> list[str]:
    try:
        return (cgroup / "cgroup.procs").read_text().split()
    except OSError:
        return []  # removed meanwhile
