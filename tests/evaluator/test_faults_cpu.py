"""Faults from candidate code that the worker's limits contain, on the CPU (real worker processes)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cuda_agent_mcp.evaluation.job import Timeouts
from cuda_agent_mcp.isolation.cgroup import pids_cgroup_root
from cuda_agent_mcp.isolation.landlock import abi_version as landlock_abi
from cuda_agent_mcp.judge import judge as judge_module
from cuda_agent_mcp.results import ContractViolation, Crashed, Passed, Rejected, TimedOut, WrongOutput
from cuda_agent_mcp.worker.__main__ import MAX_FILE_BYTES
from tests.evaluator.conftest import HONEST, SLEEPS_IN_INIT
from tests.processes import alive


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
    # Outside its directory the file cannot even be created (filesystem view); where there is no view,
    # the file-size limit stops it.
    assert not target.exists() or target.stat().st_size <= MAX_FILE_BYTES


def test_sleeping_forever_in_init_is_a_load_timeout(run_judge) -> None:
    report = run_judge(SLEEPS_IN_INIT, timeouts=Timeouts(load_s=5, call_s=10))
    assert isinstance(report.verdict, TimedOut), report.verdict
    assert report.verdict.phase == "load" and report.verdict.limit_s == 5
    assert isinstance(run_judge(HONEST).verdict, Passed)


needs_cgroup = pytest.mark.skipif(
    pids_cgroup_root() is None, reason="no writable pids cgroup here: process groups only"
)


# Each way a candidate can leave a process behind, started in forward() (the candidate's call); the
# process writes its pid to {marker} and sleeps.
_SLEEPER = "open({marker!r}, 'w').write(str(os.getpid())); time.sleep(3600)"
DETACHES = {
    "fork": "if os.fork() == 0:\n    {sleeper}\n",
    "double_fork_setsid": "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        {sleeper}\n"
    "    os._exit(0)\nos.wait()\n",
    "daemon": "import ctypes\nif os.fork() == 0:\n    ctypes.CDLL(None).daemon(0, 0)\n    {sleeper}\nos.wait()\n",
    "re_exec": "import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', \"import os, time; {sleeper_q}\"], "
    "start_new_session=True)\ntime.sleep(0.5)\n",
    "from_a_thread": "import threading\ndef _go():\n    if os.fork() == 0:\n        {sleeper}\n"
    "t = threading.Thread(target=_go); t.start(); t.join()\n",
}


@needs_cgroup
@pytest.mark.parametrize("how", sorted(DETACHES))
def test_a_process_left_running_after_the_call_is_rejected_and_killed(run_judge, tmp_path, how) -> None:
    # /dev/shm: a place outside its own directory that the worker's filesystem view leaves writable.
    marker = Path("/dev/shm") / f"cuda-agent-test-left-{how}-{tmp_path.name}.pid"
    sleeper = _SLEEPER.format(marker=str(marker))
    code = DETACHES[how].format(sleeper=sleeper, sleeper_q=sleeper.replace("'", "\\'"))
    body = "".join(f"        {line}\n" for line in code.splitlines())
    candidate = HONEST.replace(
        "        return (x * self.scale).clamp_min(0)",
        f"        import os, time\n        if not os.path.exists({str(marker)!r}):\n"
        + "".join(f"    {line}\n" for line in body.splitlines())
        + "        time.sleep(0.3)\n        return (x * self.scale).clamp_min(0)",
    )
    try:
        report = run_judge(candidate)
        assert isinstance(report.verdict, Rejected), report.verdict
        assert report.verdict.reason == "process_left_running", report.verdict
        assert report.verdict.evidence["processes_left"] >= 1
        left = int(marker.read_text())
    finally:
        marker.unlink(missing_ok=True)
    deadline = time.monotonic() + 10
    while alive(left) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(left), "a process the candidate started outlived its evaluation"
    assert "pids cgroup" in report.environment["worker_isolation"]


@needs_cgroup
@pytest.mark.skipif(landlock_abi() == 0, reason="without Landlock a worker may write its own cgroup files")
def test_a_process_cannot_move_itself_out_of_its_cage(run_judge, tmp_path) -> None:
    """The attack on the cage itself: a child writes its pid into the cgroup above its cage (the judge's
    subtree, or our hierarchy's root), every cgroup it can name, and stays. Its writes must fail: it is
    still in the cage, so it is found and killed."""
    marker = Path("/dev/shm") / f"cuda-agent-test-escape-{tmp_path.name}.txt"
    escape = HONEST.replace(
        "        return (x * self.scale).clamp_min(0)",
        "        import os, time\n"
        f"        if not os.path.exists({str(marker)!r}) and os.fork() == 0:\n"
        "            os.setsid()\n"
        "            moved = []\n"
        "            for line in open('/proc/self/cgroup').read().splitlines():\n"
        "                path = line.split(':', 2)[2]\n"
        "                controllers = line.split(':', 2)[1]\n"
        "                mount = '/sys/fs/cgroup/pids' if controllers == 'pids' else '/sys/fs/cgroup'\n"
        "                parts = path.strip('/').split('/')\n"
        "                for depth in range(len(parts)):\n"
        "                    target = '/'.join([mount, *parts[:depth]])\n"
        "                    for name in ('cgroup.procs', 'tasks'):\n"
        "                        try:\n"
        "                            open(target + '/' + name, 'w').write(str(os.getpid()))\n"
        "                            moved.append(target)\n"
        "                        except OSError:\n"
        "                            pass\n"
        f"            open({str(marker)!r}, 'w').write(repr(moved) + ' ' + str(os.getpid()))\n"
        "            time.sleep(3600)\n"
        "        time.sleep(0.3)\n"
        "        return (x * self.scale).clamp_min(0)",
    )
    try:
        report = run_judge(escape)
        written = marker.read_text()
    finally:
        marker.unlink(missing_ok=True)
    moved, pid = written.rsplit(" ", 1)
    assert moved == "[]", f"the candidate moved itself to {moved}"
    assert isinstance(report.verdict, Rejected) and report.verdict.reason == "process_left_running", (
        report.verdict
    )
    deadline = time.monotonic() + 10
    while alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(int(pid))


@needs_cgroup
def test_a_child_that_ends_before_the_call_returns_is_no_leftover(run_judge) -> None:
    tidy = HONEST.replace(
        "        return (x * self.scale).clamp_min(0)",
        "        import subprocess\n        subprocess.run(['true'], check=True)\n"
        "        return (x * self.scale).clamp_min(0)",
    )
    assert isinstance(run_judge(tidy).verdict, Passed)


@needs_cgroup
def test_a_fork_bomb_stops_at_the_process_cap_and_leaves_nothing_behind(run_judge) -> None:
    bomb = HONEST.replace(
        "        return (x * self.scale).clamp_min(0)",
        "        import os, time\n"
        "        while True:\n"
        "            try:\n"
        "                os.fork()\n"
        "            except OSError:\n"
        "                break\n"
        "        time.sleep(3600)",
    )
    root = pids_cgroup_root()
    assert root is not None
    before = set(root.glob("worker-*"))
    report = run_judge(bomb, timeouts=Timeouts(load_s=60, call_s=10))
    assert isinstance(report.verdict, TimedOut | Crashed), report.verdict
    # worker-run-* are the sandboxed executor's (commands and builds of other tests running meanwhile).
    new = {d for d in set(root.glob("worker-*")) - before if not d.name.startswith("worker-run-")}
    leftovers = [d for d in new if (d / "cgroup.procs").read_text().strip()]
    assert not leftovers
    assert isinstance(run_judge(HONEST).verdict, Passed)


needs_landlock = pytest.mark.skipif(landlock_abi() == 0, reason="this kernel has no Landlock")


@needs_landlock
def test_candidate_code_sees_only_its_own_files(run_judge, tmp_path) -> None:
    """The evaluator's sources, the reference beside the candidate, another session's workspace and the
    judge's memory are out of reach; writing is possible only in the worker's own directory."""
    other = tmp_path / "other-session"
    other.mkdir()
    (other / "model_new.py").write_text("SECRET = 1\n")
    judge_source = Path(judge_module.__file__)
    reads = [str(judge_source), str(tmp_path / "reference" / "model.py"), str(other / "model_new.py")]
    probe = HONEST.replace(
        "        super().__init__()",
        "        super().__init__()\n"
        "        import os\n"
        "        got = []\n"
        f"        for path in {reads!r} + [f'/proc/{{os.getppid()}}/mem']:\n"
        "            try:\n"
        "                open(path, 'rb').read(1)\n"
        "                got.append('read ' + path)\n"
        "            except OSError:\n"
        "                pass\n"
        f"        for path in [{str(tmp_path / 'planted.txt')!r}, os.path.join(os.getcwd(), 'own.txt')]:\n"
        "            try:\n"
        "                open(path, 'w').write('x')\n"
        "                got.append('wrote ' + path)\n"
        "            except OSError:\n"
        "                pass\n"
        "        raise RuntimeError('VIEW ' + repr(got))",
    )
    report = run_judge(probe)
    assert isinstance(report.verdict, Crashed), report.verdict
    message = report.verdict.message
    assert "VIEW" in message
    view = message[message.index("VIEW") :]
    assert "read " not in view, view
    assert "planted.txt" not in view and not (tmp_path / "planted.txt").exists()
    assert "own.txt" in view  # its own directory stays writable
    assert "landlock filesystem view" in report.environment["worker_isolation"]
    assert isinstance(run_judge(HONEST).verdict, Passed)


def test_a_segfault_in_candidate_native_code_is_a_crash_and_the_next_evaluation_is_clean(run_judge) -> None:
    segfault = HONEST.replace(
        "        return (x * self.scale).clamp_min(0)",
        "        import ctypes\n        ctypes.string_at(0)  # native code reading address 0\n"
        "        return (x * self.scale).clamp_min(0)",
    )
    report = run_judge(segfault)
    assert isinstance(report.verdict, Crashed), report.verdict
    assert report.verdict.kind == "process_exited" and report.verdict.phase == "call"
    assert isinstance(run_judge(HONEST).verdict, Passed)


# Files of the worker's own (its outputs: named with its tag) or the judge's (its inputs: the files it has
# mapped, found in /proc/self/maps without touching anyone else's), found again and again by a thread.
_SHARED_FILES = {
    "its outputs": "glob.glob((os.environ.get('CUDA_AGENT_SHM_DIR') or '/dev/shm') + '/cuda-agent-' "
    "+ os.environ['CUDA_AGENT_SHM_TAG'] + '-*')",
    "the judge's inputs": "{line.split()[-1] for line in open('/proc/self/maps') if '/cuda-agent-' in line "
    "and os.environ['CUDA_AGENT_SHM_TAG'] not in line}",
}


@pytest.mark.parametrize("files", sorted(_SHARED_FILES))
def test_a_candidate_that_shortens_shared_files_while_the_judge_reads_them_cannot_crash_the_judge(
    run_judge, files: str
) -> None:
    """A thread of the candidate truncates and regrows the shared files while the judge reads them (issue 24,
    item 5). A judge that mapped those files would die of SIGBUS, and this test with it."""
    saboteur = HONEST.replace(
        "        return (x * self.scale).clamp_min(0)",
        # The output is computed first, from inputs still whole; the files are shortened and regrown after
        # the call returns, while the judge copies the outputs and reads its inputs back.
        "        import glob, os, threading, time\n"
        "        out = (x * self.scale).clamp_min(0)\n"
        f"        paths = {_SHARED_FILES[files]}\n"
        "        def _shorten():\n"
        "            sizes = {}\n"
        "            until = time.monotonic() + 2\n"
        "            while time.monotonic() < until:\n"
        f"                for path in set(paths) | set({_SHARED_FILES[files]}):\n"
        "                    try:\n"
        "                        size = sizes.setdefault(path, os.stat(path).st_size)\n"
        "                        os.truncate(path, 0)\n"
        "                        time.sleep(0.002)\n"
        "                        os.truncate(path, size)\n"
        "                    except OSError:\n"
        "                        pass\n"
        "        threading.Thread(target=_shorten, daemon=True).start()\n"
        "        return out",
    )
    report = run_judge(saboteur)
    # Whichever moment the judge's read met: a whole copy, a file refused as too short, the zeros a
    # truncated and regrown file holds, or the worker's own SIGBUS on a file it had mapped. The candidate
    # spoils its own evaluation; the judge only has to come back with a verdict.
    assert isinstance(report.verdict, Passed | ContractViolation | WrongOutput | Crashed), report.verdict
    if isinstance(report.verdict, ContractViolation):
        assert report.verdict.check in {"transport", "input_mutated"}, report.verdict
    assert isinstance(run_judge(HONEST).verdict, Passed)
