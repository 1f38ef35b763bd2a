"""Judges run as the unprivileged worker uid, in network and mount namespaces of their own, and every
result says how its judge ran; asked to, they run as the server's user and say that instead."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.evaluation.judge_service import JudgePool
from cuda_agent_mcp.isolation.uids import WORKER_UID
from cuda_agent_mcp.tools import Session, VerifyRequest, verify_kernels
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.nvcc
TORCH_MODEL_NEW = (
    "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        return x.clamp_min(0)\n"
)


def _session(tmp_path: Path, cache: Path) -> Session:
    workspace = tmp_path / "ws"
    shutil.copytree(EXAMPLES / "relu", workspace)
    model = workspace / "model.py"
    model.write_text(model.read_text().replace("batch_size = 4096\ndim = 8192", "batch_size = 8\ndim = 16"))
    (workspace / "model_new.py").write_text(TORCH_MODEL_NEW)
    return Session.open(workspace, cache_dir=cache, judges=JudgePool(tmp_path / "logs"))


def _status_uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError("no Uid line")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can start a judge as another uid")
def test_a_judge_runs_as_the_worker_uid_in_its_own_network_and_mount_namespaces(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    session = _session(tmp_path, shared_build_cache)
    try:
        result = anyio.run(verify_kernels, session, VerifyRequest(device="cpu", audit=False, trials=1))
        (judge,) = [s for idle in session.judges._idle.values() for s in idle]
        pid = judge.process.pid
        facts = {
            "uid": _status_uid(pid),
            "net": os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net"),
            "mnt": os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt"),
            "shm": any(
                " /dev/shm " in line and "tmpfs" in line
                for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
            ),
        }
    finally:
        session.judges.close()
    assert result.verdict.status == "passed", result.verdict
    assert facts == {"uid": WORKER_UID, "net": True, "mnt": True, "shm": True}
    assert result.environment["judge"].startswith(f"as uid {WORKER_UID}")


def test_asked_to_a_judge_runs_as_the_server_and_every_result_says_so(
    tmp_path: Path, shared_build_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_AGENT_JUDGE_USER", "server")
    session = _session(tmp_path, shared_build_cache)
    try:
        result = anyio.run(verify_kernels, session, VerifyRequest(device="cpu", audit=False, trials=1))
    finally:
        session.judges.close()
    assert result.verdict.status == "passed", result.verdict
    assert result.environment["judge"] == "as the server's user (asked for)"
