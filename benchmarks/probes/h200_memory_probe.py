"""Probe (issue 24, item 4): what the judge can measure, from outside, of the GPU memory a worker holds.

    python benchmarks/probes/h200_memory_probe.py --out memory_probe.json      (on a GPU machine)

1. NVML's per-process `usedGpuMemory` for a process that (a) only made a context, (b) allocated 2 GiB
   with torch, (c) allocated 2 GiB with cudaMalloc outside torch's allocator, (d) mapped a 2 GiB buffer
   another process shared over CUDA IPC (does an importer pay for what it maps?).
2. How long one `nvmlDeviceGetComputeRunningProcesses` takes (the watch's cost per poll).
3. How soon NVML sees a new allocation (poll right after the child says it allocated).
4. Whether MPS could enforce a limit here: is `nvidia-cuda-mps-control` installed, is a daemon running.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pynvml
import torch

CHILD = r"""
import ctypes, sys, time, torch
what = sys.argv[1]
torch.empty(1, device="cuda")
keep = None
if what == "torch":
    keep = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
elif what == "cudamalloc":
    lib = ctypes.CDLL("libcuda.so.1")
    ptr = ctypes.c_uint64()
    assert lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(2 << 30)) == 0
    keep = ptr
elif what == "imported":
    from cuda_agent_mcp.wire.refs import TensorRef
    from cuda_agent_mcp.wire.transport import open_ref
    ref = TensorRef.model_validate_json(sys.stdin.readline())
    keep = open_ref(ref, max_bytes=1 << 40, expected_device=0)
    keep[:16].sum().item()
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
"""


def used_by(handle, pid: int) -> int:
    return sum(
        int(p.usedGpuMemory or 0) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle) if p.pid == pid
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    pynvml.nvmlInit()
    uuid = str(torch.cuda.get_device_properties(0).uuid)
    handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    result: dict = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    from cuda_agent_mcp.wire.transport import share

    shared = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    ref_json = share(shared).model_dump_json()
    for what in ("context", "torch", "cudamalloc", "imported"):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, what], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert child.stdin and child.stdout
        if what == "imported":
            child.stdin.write(ref_json + "\n")
            child.stdin.flush()
        line = child.stdout.readline().strip()
        seen_after_ms = None
        started = time.perf_counter()
        first = used_by(handle, child.pid)
        for _ in range(200):
            if used_by(handle, child.pid) > 0:
                seen_after_ms = (time.perf_counter() - started) * 1e3
                break
            time.sleep(0.005)
        result[what] = {
            "child_said": line,
            "nvml_used_mib_at_once": first / 2**20,
            "nvml_used_mib": used_by(handle, child.pid) / 2**20,
            "first_seen_after_ms": seen_after_ms,
        }
        child.stdin.write("done\n")
        child.stdin.flush()
        child.wait(timeout=60)
    costs = []
    for _ in range(200):
        t0 = time.perf_counter()
        pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        costs.append((time.perf_counter() - t0) * 1e3)
    result["nvml_process_list_ms"] = {"median": statistics.median(costs), "max": max(costs)}
    result["mps"] = {
        "control_binary": shutil.which("nvidia-cuda-mps-control"),
        "server_binary": shutil.which("nvidia-cuda-mps-server"),
        "daemon_running": any(
            "nvidia-cuda-mps" in p.read_text(errors="replace")
            for p in Path("/proc").glob("[0-9]*/comm")
            if p.exists()
        ),
        "compute_mode": pynvml.nvmlDeviceGetComputeMode(handle),
    }
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
