"""On a GPU machine run as root: a judge started as the worker uid, in its own network and mount
namespaces, verifies and profiles a real kernel (CUDA IPC between it and its workers works), measures the
eager and torch.compile baselines (issue 23: every profile that measured them crashed when the uid had
no passwd entry), and every result says so."""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.evaluation.judge_service import JudgePool
from cuda_agent_mcp.isolation.uids import WORKER_UID
from cuda_agent_mcp.tools import ProfileRequest, Session, VerifyRequest, profile_kernels, verify_kernels
from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root starts a judge as another uid")
def test_a_judge_as_the_worker_uid_verifies_and_profiles_a_real_kernel(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    shutil.copytree(EXAMPLES / "relu", tmp_path / "ws")
    session = Session.open(tmp_path / "ws", cache_dir=shared_build_cache, judges=JudgePool(tmp_path / "logs"))
    try:
        verified = anyio.run(verify_kernels, session, VerifyRequest())
        profiled = anyio.run(profile_kernels, session, ProfileRequest(baselines="skip"))
    finally:
        session.judges.close()
    print(
        "judge:",
        verified.environment.get("judge"),
        "| workers:",
        verified.environment.get("worker_isolation"),
    )
    print("phases:", verified.phases_s, profiled.phases_s)
    assert verified.verdict.status == "passed", verified.verdict
    assert profiled.verdict.status == "passed", profiled.verdict
    assert verified.environment["judge"].startswith(f"as uid {WORKER_UID}"), verified.environment


@pytest.mark.skipif(os.geteuid() != 0, reason="only root starts a judge as another uid")
def test_a_judge_as_the_worker_uid_measures_the_torch_compile_baseline_of_a_real_kernel(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    shutil.copytree(EXAMPLES / "relu", tmp_path / "ws")
    session = Session.open(tmp_path / "ws", cache_dir=shared_build_cache, judges=JudgePool(tmp_path / "logs"))
    try:
        profiled = anyio.run(profile_kernels, session, ProfileRequest(baselines="measure"))
    finally:
        session.judges.close()
    try:
        entry = f"passwd entry {pwd.getpwuid(WORKER_UID).pw_name!r}"
    except KeyError:
        entry = "no passwd entry (the case of issue 23)"
    print(f"uid {WORKER_UID}: {entry} | judge: {profiled.environment.get('judge')}")
    print("phases:", profiled.phases_s, "| eager:", profiled.eager, "| compiled:", profiled.compiled)
    assert profiled.verdict.status == "passed", profiled.verdict
    assert profiled.eager is not None and profiled.compiled is not None
    assert profiled.environment["judge"].startswith(f"as uid {WORKER_UID}"), profiled.environment
