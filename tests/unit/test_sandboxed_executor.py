"""The hardened local executor: nothing outlives a command, no network, file-size limits."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.executors import (
    DockerExecutor,
    LocalExecutor,
    ProcessLimits,
    SandboxedExecutor,
    SandboxPolicy,
    sandboxed,
)
from cuda_agent_mcp.executors.base import ProcessResult
from cuda_agent_mcp.isolation.identity import user_name
from cuda_agent_mcp.isolation.landlock import abi_version as landlock_abi
from cuda_agent_mcp.isolation.namespaces import available_isolation

DAEMON = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            with open(sys.argv[1], "a") as beat:
                beat.write("x")
            time.sleep(0.05)
    os._exit(0)
time.sleep(0.3)
"""


# What a Python command reads besides its directory: the interpreter's environment and installation.
PYTHON = [Path(sys.prefix), Path(sys.base_prefix)]


def run(executor: object, argv: list[str], tmp_path: Path, timeout_s: float = 20) -> ProcessResult:
    limits = ProcessLimits(timeout_s=timeout_s)
    return anyio.run(lambda: executor.run(argv, cwd=tmp_path, limits=limits, readable=PYTHON))  # type: ignore[attr-defined]


def _still_beating(path: Path) -> bool:
    before = path.stat().st_size
    time.sleep(0.4)
    return path.stat().st_size > before


@pytest.mark.skipif("pid" not in available_isolation(), reason="this machine refuses PID namespaces")
def test_a_double_forked_daemon_does_not_outlive_its_command(tmp_path: Path) -> None:
    beat = tmp_path / "beat"
    run(SandboxedExecutor(), [sys.executable, "-c", DAEMON, str(beat)], tmp_path)
    assert beat.exists()
    assert not _still_beating(beat)


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
def test_without_namespaces_or_a_cgroup_a_double_forked_daemon_still_does_not_outlive_its_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Landlock-only view (a machine where no namespaces can be made) and no pids cgroup either: the
    view process, the command's subreaper, inherits the daemon and ends it with the command."""
    monkeypatch.setattr(sandboxed, "view_backend", lambda: "landlock")
    monkeypatch.setattr(sandboxed, "allocate_session_uid", lambda: None)
    monkeypatch.setattr(sandboxed.PidsCgroup, "create", classmethod(lambda cls, name, *, max_pids: None))
    executor = SandboxedExecutor()
    assert executor.backend == "landlock" and "pid" not in executor.isolation
    beat = tmp_path / "beat"
    result = run(executor, [sys.executable, "-c", DAEMON, str(beat)], tmp_path)
    assert result.returncode == 0, result
    assert beat.exists()
    assert not _still_beating(beat)


@pytest.mark.skipif("pid" not in available_isolation(), reason="this machine refuses PID namespaces")
def test_the_same_daemon_escapes_a_plain_process_group_which_is_why_the_sandbox_exists(
    tmp_path: Path,
) -> None:
    beat = tmp_path / "beat"
    run(LocalExecutor(), [sys.executable, "-c", DAEMON, str(beat)], tmp_path)
    try:
        assert _still_beating(beat)
    finally:
        # The daemon is ours to clean up here: find it by the file it writes.
        import subprocess

        subprocess.run(["pkill", "-f", str(beat)], check=False)


def test_a_command_has_a_user_name_even_as_a_uid_without_a_passwd_entry(tmp_path: Path) -> None:
    # The session uids (as root) have no passwd entry: without USER and LOGNAME, getpass asks passwd
    # and fails, as torch 2.11's inductor does for an agent's own torch.compile.
    executor = SandboxedExecutor()
    probe = "import getpass, os; print(os.getuid(), getpass.getuser(), os.environ['LOGNAME'])"
    result = run(executor, [sys.executable, "-I", "-c", probe], tmp_path)
    assert result.returncode == 0, result.output
    uid, name, logname = result.output.split()
    expected = user_name(executor.uid if executor.uid is not None else os.getuid())
    assert name == logname == expected
    if executor.uid is not None:  # root: the command ran as the session's own uid, not ours
        assert int(uid) == executor.uid


@pytest.mark.skipif("network" not in available_isolation(), reason="this machine refuses network namespaces")
def test_a_command_cannot_reach_the_hosts_network(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        probe = (
            f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')"
        )
        assert "connected" in run(LocalExecutor(), [sys.executable, "-c", probe], tmp_path).output
        sandboxed = run(SandboxedExecutor(), [sys.executable, "-c", probe], tmp_path)
        assert "connected" not in sandboxed.output
        assert sandboxed.returncode != 0


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="prlimit is not installed")
def test_writing_a_file_past_the_size_limit_fails(tmp_path: Path) -> None:
    executor = SandboxedExecutor(SandboxPolicy(max_file_bytes=1024 * 1024))
    write = "open('big', 'wb').write(b'x' * (10 * 1024 * 1024))"
    result = run(executor, [sys.executable, "-c", write], tmp_path)
    assert result.returncode != 0
    assert not (tmp_path / "big").exists() or (tmp_path / "big").stat().st_size <= 1024 * 1024


def test_the_result_reports_the_command_as_given(tmp_path: Path) -> None:
    result = run(SandboxedExecutor(), [sys.executable, "-c", "print('hi')"], tmp_path)
    assert result.ok and "hi" in result.output
    assert result.argv == [sys.executable, "-c", "print('hi')"]


def test_the_executor_is_chosen_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda_agent_mcp.errors import IsolationUnavailable, UsageError
    from cuda_agent_mcp.executors import default_executor

    monkeypatch.setenv("CUDA_AGENT_EXECUTOR", "sandbox")
    assert isinstance(default_executor(), SandboxedExecutor)
    monkeypatch.delenv("CUDA_AGENT_EXECUTOR")
    assert isinstance(default_executor(), SandboxedExecutor)  # isolated unless asked otherwise
    monkeypatch.setenv("CUDA_AGENT_EXECUTOR", "local")
    with pytest.raises(IsolationUnavailable, match="CUDA_AGENT_ALLOW_REDUCED_ISOLATION=1"):
        default_executor()
    monkeypatch.setenv("CUDA_AGENT_ALLOW_REDUCED_ISOLATION", "1")
    assert isinstance(default_executor(), LocalExecutor)
    monkeypatch.setenv("CUDA_AGENT_EXECUTOR", "docker")
    assert isinstance(default_executor(), DockerExecutor)
    monkeypatch.setenv("CUDA_AGENT_EXECUTOR", "podman")
    with pytest.raises(UsageError, match="'local', 'sandbox' or 'docker'"):
        default_executor()
