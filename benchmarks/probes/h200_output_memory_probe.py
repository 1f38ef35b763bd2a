"""Probe (H200): does a worker's GPU memory grow while it shares a batch of outputs per batch with a judge?

    python benchmarks/probes/h200_output_memory_probe.py --outputs 44 --numel 262144 --batches 100

A child (the worker's part: drop the last batch's outputs, `torch.cuda.ipc_collect()`, compute `outputs`
new tensors, share them with `wire.transport.share`) and its parent (the judge's part: `receive` each, a
private copy, and let go). Prints the child's allocated and reserved bytes and NVML's count for it every
ten batches, as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
from typing import Any

import torch


def nvml_used(pid: int) -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == pid:
                return int(proc.usedGpuMemory or 0)
    except Exception:
        return None
    return None


def child(conn: Any, outputs: int, numel: int) -> None:
    from cuda_agent_mcp.wire.transport import share
    from cuda_agent_mcp.worker.runner import free_block_sizes

    device = torch.device("cuda", 0)
    source = torch.rand(numel, device=device)
    kept: list[torch.Tensor] = []
    out_bytes = outputs * numel * 4
    while conn.recv() == "go":
        kept.clear()  # the runner's _release_outputs, then prepare's collect and poison
        torch.cuda.ipc_collect()
        free = free_block_sizes(device)
        wanted = free + ([out_bytes] if not free or free[0] < out_bytes else [])
        held = [torch.empty(size, dtype=torch.uint8, device=device) for size in wanted]
        for block in held:
            block.fill_(7)
        torch.cuda.synchronize()
        held.clear()
        made = [torch.relu(source) for _ in range(outputs)]
        torch.cuda.synchronize()
        refs = [share(t).model_dump_json() for t in made]
        kept.extend(made)
        del made
        conn.send((refs, torch.cuda.memory_allocated(), torch.cuda.memory_reserved()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--outputs", type=int, default=44)
    parser.add_argument("--numel", type=int, default=16 * 16384)
    parser.add_argument("--batches", type=int, default=100)
    args = parser.parse_args()
    from cuda_agent_mcp.wire.refs import TensorRef
    from cuda_agent_mcp.wire.transport import receive

    ctx = mp.get_context("spawn")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(target=child, args=(theirs, args.outputs, args.numel))
    proc.start()
    torch.cuda.init()
    rows = []
    for batch in range(args.batches):
        ours.send("go")
        refs, allocated, reserved = ours.recv()
        copies = [
            receive(
                TensorRef.model_validate_json(r), max_bytes=1 << 40, expected_device=0, sender_pid=proc.pid
            )
            for r in refs
        ]
        torch.cuda.synchronize()
        del copies
        if batch % 10 == 9:
            rows.append(
                {
                    "batch": batch + 1,
                    "allocated": allocated,
                    "reserved": reserved,
                    "nvml": nvml_used(proc.pid),
                }
            )
    ours.send("stop")
    proc.join(30)
    print(json.dumps({"outputs": args.outputs, "numel": args.numel, "rows": rows}))


if __name__ == "__main__":
    main()
