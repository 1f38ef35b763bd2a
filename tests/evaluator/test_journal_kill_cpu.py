"""kill -9 in the middle of a verify: the journal keeps its history, marks the job interrupted, and the
judge server the killed process started does not outlive it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent_mcp.tools.journal import Journal
from tests.conftest import EXAMPLES, REPO
from tests.processes import alive, children, cmdline

pytestmark = pytest.mark.nvcc

SCRIPT = """
import shutil, sys
from pathlib import Path
import anyio
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session, VerifyRequest, verify_kernels
from cuda_agent_mcp.tools.journal import open_journal

work, cache, example = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
reference = work / "reference.py"
reference.write_text((example / "model.py").read_text()
    .replace("batch_size = 8192\\nfeatures = 4096", "batch_size = 16\\nfeatures = 32"))
session = Session.create(load_task_file(reference, task_id="cpu/bias_add_relu"), work / "ws", cache_dir=cache,
                         journal=open_journal(work / "journal.sqlite"))
shutil.copytree(example / "kernels", session.workspace.root / "kernels", dirs_exist_ok=True)
(session.workspace.root / "model_new.py").write_text(
    "import time\\nimport torch\\nimport torch.nn as nn\\n\\n"
    "class ModelNew(nn.Module):\\n"
    "    def __init__(self, features):\\n        super().__init__()\\n"
    "        self.bias = nn.Parameter(torch.empty(features))\\n\\n"
    "    def forward(self, x):\\n        time.sleep(3600)\\n"
)
ok = VerifyRequest(device="cpu", trials=1, audit=False)
if sys.argv[4] == "first-passes":
    (session.workspace.root / "model_new.py").write_text((session.workspace.root / "model_new.py").read_text()
        .replace("time.sleep(3600)", "return (x + self.bias).clamp_min(0)"))
    print(anyio.run(lambda: verify_kernels(session, ok)).verdict.status, flush=True)
    (session.workspace.root / "model_new.py").write_text((session.workspace.root / "model_new.py").read_text()
        .replace("return (x + self.bias).clamp_min(0)", "time.sleep(3600)"))
anyio.run(lambda: verify_kernels(session, VerifyRequest(device="cpu", trials=1, audit=False, call_timeout_s=3600)))
"""


def test_kill_9_mid_verify_leaves_history_intact_and_the_job_interrupted(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SCRIPT,
            str(work),
            str(shared_build_cache),
            str(EXAMPLES / "bias_add_relu"),
            "first-passes",
        ],
        stdout=subprocess.PIPE,
        env=env,
    )
    journal_path = work / "journal.sqlite"
    assert process.stdout is not None
    assert process.stdout.readline().decode().strip() == "passed"  # the first verify finished
    deadline = time.monotonic() + 120
    servers: list[int] = []
    while time.monotonic() < deadline and process.poll() is None:
        servers = [pid for pid in children(process.pid) if b"cuda_agent_mcp.judge" in cmdline(pid)]
        running = [r for r in Journal(journal_path).records() if r.status == "running"]
        if servers and running:
            break
        time.sleep(0.5)
    assert process.poll() is None and servers, "the hung verify never started"
    time.sleep(2)  # let the hung call reach the worker
    process.send_signal(signal.SIGKILL)
    process.wait()

    reopened = Journal(journal_path)
    assert reopened.interrupted_on_open == 1
    interrupted, done = reopened.records()  # newest first
    assert interrupted.status == "interrupted" and interrupted.kind == "verify"
    assert done.status == "done" and done.verdict == "passed" and done.result is not None
    # The judge server (and its workers) did not outlive the process that asked for the job.
    gone_by = time.monotonic() + 15
    while any(alive(pid) for pid in servers) and time.monotonic() < gone_by:
        time.sleep(0.2)
    assert servers and not any(alive(pid) for pid in servers)
