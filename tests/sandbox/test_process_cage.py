"""The pids cage (isolation/cgroup.py) on each kind of machine: cgroup v1 (the CPU machines), cgroup v2
with the pids controller (the H200: these tests skip elsewhere) and no usable hierarchy at all. A cage
must end a detached process, and where none can be made nothing may claim one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_agent_mcp.errors import IsolationUnavailable
from cuda_agent_mcp.isolation import cgroup
from cuda_agent_mcp.isolation.cgroup import (
    NO_CAGE_ENV,
    REDUCED_ISOLATION_ENV,
    CageUnavailable,
    PidsCgroup,
    cage_support,
    version_of,
)
from cuda_agent_mcp.isolation.judge_user import as_server_user, plan_judge_start
from cuda_agent_mcp.judge.worker_client import worker_isolation
from tests.processes import alive

# Starts a setsid'd grandchild that writes its pid to argv[1] and sleeps, then exits: the grandchild is
# nobody's child we can wait for, and no process group of ours holds it.
DETACH = r"""
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(sys.argv[1], "w").write(str(os.getpid()))
        time.sleep(600)
    os._exit(0)
os.wait()
"""


@pytest.fixture
def fresh_support() -> Iterator[None]:
    """cage_support() is probed once per process: probe again for this test, and after it."""
    cage_support.cache_clear()
    yield
    cage_support.cache_clear()


def _detach_into(cage: PidsCgroup, marker: Path) -> int:
    subprocess.run(
        ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(cage.path), sys.executable, "-c", DETACH,
         str(marker)],
        check=True,
        timeout=30,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return int(marker.read_text())


def _cage_ends_a_detached_process(tmp_path: Path) -> None:
    cage = PidsCgroup.create(f"worker-test-{os.getpid()}-{time.monotonic_ns()}", max_pids=16)
    assert cage is not None
    try:
        daemon = _detach_into(cage, tmp_path / "daemon.pid")
        assert cage.others() == [daemon]  # the cage saw it, though it left our process group
        assert alive(daemon)
        cage.kill_all()
        deadline = time.monotonic() + 5
        while alive(daemon) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not alive(daemon)
    finally:
        cage.remove()
    assert not cage.path.exists()


def _is_v2_with_pids() -> bool:
    base = Path("/sys/fs/cgroup")
    return version_of(base) == "v2" and "pids" in (base / "cgroup.controllers").read_text().split()


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making cgroups needs root")


@needs_root
@pytest.mark.skipif(
    version_of(Path("/sys/fs/cgroup/pids")) != "v1", reason="no cgroup v1 pids hierarchy on this machine"
)
def test_on_cgroup_v1_a_cage_ends_a_setsid_double_forked_process(tmp_path, fresh_support) -> None:
    support = cage_support()
    assert support.root is not None and support.version == "v1", support
    assert support.describe() == "pids cgroup v1"
    _cage_ends_a_detached_process(tmp_path)


@needs_root
@pytest.mark.skipif(
    not _is_v2_with_pids(), reason="no cgroup v2 with a pids controller here (the H200 has one)"
)
def test_on_cgroup_v2_the_cage_has_the_pids_controller_and_cgroup_kill_ends_a_detached_process(
    tmp_path, fresh_support, monkeypatch
) -> None:
    # Only the v2 hierarchy: on a hybrid machine v1 would be found first.
    monkeypatch.setattr(cgroup, "hierarchies", lambda: (tmp_path / "no-v1", Path("/sys/fs/cgroup")))
    support = cage_support()
    assert support.root is not None and support.version == "v2", support
    assert "pids" in (support.root / "cgroup.subtree_control").read_text().split()
    _cage_ends_a_detached_process(tmp_path)
    # A subtree handed to another uid: that uid makes its own cages in it, and nothing beside it.
    top = cgroup.delegate(f"judge-test-{os.getpid()}", 10001)
    assert top is not None
    try:
        script = (
            "import os, pathlib\n"
            f"top = pathlib.Path({str(top)!r})\n"
            "leaf = top / 'worker-x'; leaf.mkdir(); (leaf / 'pids.max').write_text('8')\n"
            "try:\n    (top.parent / 'intruder').mkdir(); print('ESCAPED')\nexcept OSError:\n    print('confined')\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=30,
            user=10001,
            group=10001,
            extra_groups=[],
            env={"PATH": "/usr/bin:/bin"},
            cwd="/",
        )
        assert done.stdout.strip() == "confined", done.stdout + done.stderr
    finally:
        cgroup.remove_tree(top)
    assert not top.exists()


def test_v2_without_a_pids_controller_is_no_cage_and_says_so(tmp_path, fresh_support, monkeypatch) -> None:
    unified = Path("/sys/fs/cgroup/unified")  # a hybrid machine's v2 mount: its controllers belong to v1
    if version_of(unified) != "v2" or "pids" in (unified / "cgroup.controllers").read_text().split():
        pytest.skip("no cgroup v2 mount without the pids controller here")
    monkeypatch.setattr(cgroup, "hierarchies", lambda: (tmp_path / "no-v1", unified))
    support = cage_support()
    assert support.root is None
    assert "no pids controller" in (support.problem or "")


def test_without_any_cgroup_hierarchy_nothing_claims_a_cage_and_workers_are_refused(
    tmp_path, fresh_support, monkeypatch
) -> None:
    monkeypatch.setattr(cgroup, "hierarchies", lambda: (tmp_path / "v1", tmp_path / "v2"))
    monkeypatch.delenv(cgroup.DELEGATED_ENV, raising=False)
    monkeypatch.delenv(NO_CAGE_ENV, raising=False)
    monkeypatch.delenv(REDUCED_ISOLATION_ENV, raising=False)
    support = cage_support()
    assert support.root is None and "is not a cgroup" in (support.problem or "")
    assert "no pids cgroup" in worker_isolation() and "pids cgroup v" not in worker_isolation()
    with pytest.raises(CageUnavailable, match="no pids cgroup can hold"):
        PidsCgroup.required("worker-x", max_pids=8)
    # The tool side refuses before any judge starts, naming the fix...
    with pytest.raises(IsolationUnavailable, match=REDUCED_ISOLATION_ENV):
        as_server_user(["python"], {}, tmp_path, "as the server's user")
    # ...and with reduced isolation asked for, the judge runs its workers uncaged and says so.
    monkeypatch.setenv(REDUCED_ISOLATION_ENV, "1")
    start = as_server_user(["python"], {}, tmp_path, "as the server's user")
    assert start.env[NO_CAGE_ENV] == "1"
    assert "process groups only" in start.isolation
    assert PidsCgroup.required("worker-x", max_pids=8) is None


def test_a_judge_of_container_workers_needs_no_pids_cgroup_but_nothing_runs_uncaged_beside_it(
    tmp_path, fresh_support, monkeypatch
) -> None:
    # On the H200 as a user of the docker group: no cgroup to create, and the judge service was refused,
    # though each candidate runs in a container with a pids limit.
    monkeypatch.setattr(cgroup, "hierarchies", lambda: (tmp_path / "v1", tmp_path / "v2"))
    for name in (cgroup.DELEGATED_ENV, NO_CAGE_ENV, REDUCED_ISOLATION_ENV):
        monkeypatch.delenv(name, raising=False)
    start = plan_judge_start(["python"], {}, tmp_path, workers="docker")
    assert NO_CAGE_ENV not in start.env
    assert "held by their containers' pids limits" in start.isolation
    # What the judge would start outside a container (the sanitizer's target) is still refused.
    with pytest.raises(CageUnavailable, match="no pids cgroup can hold"):
        PidsCgroup.required("target-x", max_pids=8)
    with pytest.raises(IsolationUnavailable):  # forked workers would be uncaged: still refused
        as_server_user(["python"], {}, tmp_path, "as the server's user", containers=False)
