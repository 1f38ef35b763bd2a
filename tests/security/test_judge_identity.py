"""Judges and their workers have a complete identity whatever uid they run as (issue 23).

Started as the worker uid, which has no passwd entry here (as on the H200 where every profile crashed
in torch 2.11's inductor on `getpwuid(): uid not found: 10001`), the judge, a candidate's worker and the
torch.compile baseline's worker each have HOME, USER and LOGNAME, so `getpass.getuser()` works, and name
inductor's and Triton's caches: the judge's in its home (persistent), a candidate's in its own directory,
the baseline's in the judge's where Landlock confines candidates. The values themselves are checked, so
a torch that tolerates a missing identity (2.14 does) cannot hide a regression; `.ci/run` runs this file
on torch 2.11 too. No GPU and no build: the jobs are CPU jobs with pure-PyTorch candidates, sent to a
real judge server through the tool layer's pool.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
from pathlib import Path
from typing import Any

import anyio
import pytest

from cuda_agent_mcp.evaluation.job import EvalJob, JudgeReport, TimingPolicy
from cuda_agent_mcp.evaluation.judge_service import JudgePool
from cuda_agent_mcp.isolation import landlock
from cuda_agent_mcp.isolation.identity import FALLBACK_USER
from cuda_agent_mcp.isolation.uids import WORKER_UID
from cuda_agent_mcp.tools.session import judge_env
from tests.evaluator.conftest import HONEST

# What each process reports about itself: its uid, user name and home as getpass and the environment say,
# and its compile caches as the environment and inductor itself say.
PROBE = """
import getpass, json, os


def identity():
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    names = ("HOME", "USER", "LOGNAME", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    found = {name: os.environ.get(name) for name in names}
    return {**found, "pid": os.getpid(), "uid": os.getuid(), "cwd": os.getcwd(),
            "getuser": getpass.getuser(), "inductor_sees": cache_dir()}
"""

# The reference runs in the judge and in the baseline workers; each records itself in RECORDS.
RECORDING_REFERENCE = (
    PROBE
    + """
import torch
import torch.nn as nn

RECORDS = __RECORDS__


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        found = identity()
        with open(os.path.join(RECORDS, f"{os.getpid()}.json"), "w") as record:
            json.dump(found, record)

    def forward(self, x):
        return torch.relu(x * self.scale)


def get_inputs():
    return [torch.rand(64, 32)]


def get_init_inputs():
    return [32]
"""
)

# A candidate can write nothing the test could read (its view holds only its own directory, removed
# after the job): it reports itself in the exception its load raises.
REPORTING_CANDIDATE = (
    PROBE
    + """
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        raise RuntimeError("IDENTITY " + json.dumps(identity()))
"""
)


@pytest.fixture
def uid_without_passwd_entry() -> None:
    """Root, and a worker uid that passwd does not know: the case that crashed."""
    if os.geteuid() != 0:
        pytest.skip("only root starts a judge as another uid")
    try:
        entry = pwd.getpwuid(WORKER_UID)
    except KeyError:
        return
    pytest.fail(
        f"uid {WORKER_UID} has a passwd entry here ({entry.pw_name!r}): these tests need a worker uid "
        "without one (as on the H200 of issue 23), or they would pass whatever the judge's environment says"
    )


def _run(tmp_path: Path, mode: str, candidate: str) -> tuple[JudgeReport, int, Path]:
    """One CPU job in a judge of a fresh pool whose state is `tmp_path`: its report, the judge's pid and
    the judge's home (its records are in `home/records`)."""
    home = tmp_path / "judge-home"
    records = home / "records"
    records.mkdir(parents=True)
    os.chown(home, WORKER_UID, WORKER_UID)
    os.chown(records, WORKER_UID, WORKER_UID)
    reference = tmp_path / "reference" / "model.py"
    reference.parent.mkdir()
    reference.write_text(RECORDING_REFERENCE.replace("__RECORDS__", repr(str(records))))
    (tmp_path / "candidate").mkdir()
    (tmp_path / "candidate" / "model_new.py").write_text(candidate)
    job = EvalJob(
        mode=mode,  # type: ignore[arg-type]
        reference_path=str(reference),
        candidate_dir=str(tmp_path / "candidate"),
        device="cpu",
        seeds=[secrets.randbits(62) for _ in range(4)],
        init_seed=7,
        atol=1e-2,
        rtol=1e-2,
        baselines="measure",
        timing=TimingPolicy(min_samples=5, max_samples=8, budget_s=1.0),
    )
    pool = JudgePool(tmp_path / "logs")  # its judges' state directory is tmp_path
    try:
        report, _ = anyio.run(pool.run, job, judge_env(None), 600.0)
        (judge,) = [server for idle in pool._idle.values() for server in idle]
        pid = judge.process.pid
    finally:
        pool.close()
    assert report.environment["judge"].startswith(f"as uid {WORKER_UID} "), report.environment
    return report, pid, home


def _records(home: Path) -> dict[int, dict[str, Any]]:
    return {int(p.stem): json.loads(p.read_text()) for p in (home / "records").glob("*.json")}


def _who(found: dict[str, Any]) -> dict[str, Any]:
    return {key: found[key] for key in ("uid", "getuser", "USER", "LOGNAME", "HOME")}


def _worker_uid_at_home(home: Path | str) -> dict[str, Any]:
    """Who every process of the judge's uid must be: the worker uid, named ours, at `home`."""
    name = FALLBACK_USER
    return {"uid": WORKER_UID, "getuser": name, "USER": name, "LOGNAME": name, "HOME": str(home)}


def _caches(found: dict[str, Any]) -> tuple[str, str, str]:
    """A process's inductor cache as its environment names it and as inductor sees it, and Triton's."""
    return found["TORCHINDUCTOR_CACHE_DIR"], found["inductor_sees"], found["TRITON_CACHE_DIR"]


def _caches_in(root: Path | str) -> tuple[str, str, str]:
    return f"{root}/inductor", f"{root}/inductor", f"{root}/triton"


def test_a_judge_as_a_uid_without_a_passwd_entry_and_its_candidate_worker_have_a_complete_identity(
    tmp_path: Path, uid_without_passwd_entry: None
) -> None:
    report, judge_pid, home = _run(tmp_path, "verify", REPORTING_CANDIDATE)

    (judge,) = _records(home).values()  # verify runs the reference only in the judge
    assert judge["pid"] == judge_pid
    assert _who(judge) == _worker_uid_at_home(home)
    assert _caches(judge) == _caches_in(home / "cache")

    assert report.verdict.status == "crashed", report.verdict
    found = re.search(r"IDENTITY (\{.*?\})", report.verdict.message)
    assert found is not None, report.verdict.message
    worker = json.loads(found.group(1))
    own = worker["cwd"]  # the worker's own directory: its HOME, never the judge's
    assert _who(worker) == _worker_uid_at_home(own)
    assert not own.startswith(str(home)) and os.path.basename(own).startswith("worker-")
    assert _caches(worker) == _caches_in(f"{own}/cache")


def test_a_torch_compile_baseline_is_measured_in_a_judge_as_a_uid_without_a_passwd_entry(
    tmp_path: Path, uid_without_passwd_entry: None
) -> None:
    report, judge_pid, home = _run(tmp_path, "profile", HONEST)

    assert report.verdict.status == "passed", (report.verdict, report.infra_error)
    assert report.eager is not None and report.compiled is not None
    records = _records(home)
    workers = [found for pid, found in records.items() if pid != judge_pid]
    assert judge_pid in records and len(workers) == 2  # the eager and the torch.compile baseline
    for worker in workers:
        assert _who(worker) == _worker_uid_at_home(worker["cwd"])
    # Where Landlock keeps candidates out of it, the compile baseline uses the judge's persistent caches
    # (and fills them); every other baseline, and every one elsewhere, compiles in its own directory.
    shared = [w for w in workers if _caches(w) == _caches_in(home / "cache")]
    assert all(_caches(w) == _caches_in(f"{w['cwd']}/cache") for w in workers if w not in shared)
    if landlock.abi_version() > 0:
        assert len(shared) == 1
        assert any((home / "cache" / "inductor").iterdir()), "the baseline left nothing in the judge's cache"
    else:
        assert not shared
