"""Is a GPU still fit for work after a crash or a timeout? A tiny kernel in a fresh process, and no
process of ours left on it. A GPU that fails is drained (see scheduler.py) and reported; we never reset
one: that needs an operator, and other tenants may be using it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from cuda_agent_mcp.wire import JUDGE_MODULE

_PROBE = (
    "import torch\n"
    "x = torch.arange(1024, device='cuda', dtype=torch.float32)\n"
    "total = (x * 2).sum().item()\n"
    "torch.cuda.synchronize()\n"
    "assert total == 1047552.0, total\n"
)


# A process killed a moment ago (a worker, a candidate's leftover caught by its cage) still shows on the
# GPU while the driver tears its context down; only what is still there after this counts as left over.
LEFTOVER_GRACE_S = 5.0


def probe_gpu(
    gpu: int, *, timeout_s: float = 120.0, look_for_leftovers: bool = True, grace_s: float = LEFTOVER_GRACE_S
) -> str | None:
    """None when GPU `gpu` runs a small kernel correctly and holds no leftover process of ours; else why not.

    `look_for_leftovers` is for a caller that knows no other evaluation of this server runs on the GPU:
    beside others (shared leases), their live workers are processes of ours too, and taking them for
    leftovers drained the GPU under every evaluation in flight (measured on the H200, 8 at once)."""
    if look_for_leftovers and (leftovers := _lasting_leftovers(gpu, grace_s)):
        return f"processes of this server still hold GPU {gpu}: {leftovers}"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return f"the probe kernel on GPU {gpu} did not finish within {timeout_s:.0f} s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"the probe kernel on GPU {gpu} failed: {last[:300]}"
    return None


def _lasting_leftovers(gpu: int, grace_s: float) -> list[int]:
    """Our processes on `gpu` that are still there after `grace_s` (looked at every half second)."""
    deadline = time.monotonic() + grace_s
    while (found := _our_processes_on(gpu)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return found


def _our_processes_on(gpu: int) -> list[int]:
    """Compute processes on `gpu` that descend from this process, other than the warm judge servers
    (which hold a CUDA context by design): a worker left behind by a crash or a timeout."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        done = subprocess.run(
            [smi, "--query-compute-apps=pid", "--format=csv,noheader", f"--id={gpu}"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    pids = [int(p) for p in done.stdout.split() if p.strip().isdigit()]
    return [pid for pid in pids if _descends_from(pid, os.getpid()) and not _is_judge_server(pid)]


def _is_judge_server(pid: int) -> bool:
    try:
        return JUDGE_MODULE.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _descends_from(pid: int, ancestor: int) -> bool:
    seen = 0
    while pid > 1 and seen < 64:
        if pid == ancestor:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # field 4: the parent's pid
        seen += 1
    return False
