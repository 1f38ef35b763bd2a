"""Diagnostic: where one verify call's time goes on a multi-GB output, old poison against new.

    python benchmarks/verify_call_probe.py [--gb 6.4 0.134] [--calls 6] --out probe.json

Two processes as in the evaluator: the parent (the judge's role) shares a persistent input by CUDA IPC,
the child (the worker's role) poisons freed memory, runs `relu` (the allocation pattern of an
elementwise candidate), shares its output; the parent maps and copies it, the child drops it. Each
step is timed on both sides. `old` poisons by allocating twice the output's size per call (the code
before this probe); `new` is `Runner._poison` (fill the allocator's free blocks, allocate only while
none is large enough); `new+collect` adds `torch.cuda.ipc_collect()` after each release. The forward
runs under the op audit's dispatch mode (`op_recorder`) as verify calls do, and once without it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import time
from pathlib import Path

import torch

from cuda_agent_mcp.evaluator.transport import open_ref, share
from cuda_agent_mcp.worker.runner import OpRecorder, Runner


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1e3, 3)


def child(conn, strategy: str, record: bool) -> None:  # type: ignore[no-untyped-def]
    runner = Runner()
    runner.device = torch.device("cuda")
    x = None
    while (message := conn.recv()) is not None:
        ref, poison = message
        times: dict[str, float] = {}
        if x is None:
            x = open_ref(ref, max_bytes=1 << 40)
        nbytes = x.numel() * x.element_size()
        started = time.perf_counter()
        if strategy == "old":
            block = torch.empty(2 * nbytes // 4, dtype=torch.float32, device="cuda")
            block.fill_(poison)
            torch.cuda.synchronize()
            del block
        else:
            runner._poison(poison, 2 * nbytes)
        times["poison"] = _ms(started)
        started = time.perf_counter()
        if record:
            with OpRecorder():
                out = torch.relu(x)
        else:
            out = torch.relu(x)
        torch.cuda.synchronize()
        times["forward"] = _ms(started)
        started = time.perf_counter()
        out_ref = share(out)
        times["share"] = _ms(started)
        conn.send((out_ref, times))
        conn.recv()  # released by the parent
        started = time.perf_counter()
        del out
        if strategy == "new+collect":
            torch.cuda.ipc_collect()
        times_release = _ms(started)
        conn.send(times_release)


def probe(strategy: str, record: bool, gb: float, calls: int) -> dict[str, object]:
    ctx = mp.get_context("spawn")
    parent_end, child_end = ctx.Pipe()
    process = ctx.Process(target=child, args=(child_end, strategy, record))
    process.start()
    x = torch.randn(int(gb * 1e9 / 4), device="cuda")
    ref = share(x)
    torch.cuda.synchronize()
    rows = []
    for call in range(calls):
        started = time.perf_counter()
        parent_end.send((ref, (float("nan"), -7.77e7)[call % 2]))
        if not parent_end.poll(60):
            process.kill()
            return {"gb": gb, "strategy": strategy, "op_recorder": record, "calls": rows, "hung": True}
        out_ref, times = parent_end.recv()
        times["judge_round_trip"] = _ms(started)
        started = time.perf_counter()
        copy = open_ref(out_ref, max_bytes=1 << 40).clone()
        torch.cuda.synchronize()
        times["judge_open_copy"] = _ms(started)
        del copy
        parent_end.send("release")
        times["release"] = parent_end.recv()
        rows.append(times)
    parent_end.send(None)
    process.join(timeout=60)
    keys = rows[0].keys()
    return {
        "gb": gb,
        "strategy": strategy,
        "op_recorder": record,
        "calls": rows,
        "median_after_first": {k: statistics.median(r[k] for r in rows[1:]) for k in keys},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, nargs="+", default=[6.4, 0.134])
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result: dict[str, object] = {"gpu": torch.cuda.get_device_name(), "probes": []}
    for gb in args.gb:
        for strategy, record in (("new", False), ("new", True), ("old", False), ("new+collect", False)):
            result["probes"].append(probe(strategy, record, gb, args.calls))  # type: ignore[attr-defined]
            text = json.dumps(result, indent=2)
            if args.out:  # after every probe, so a run cut short keeps what it measured
                args.out.write_text(text + "\n")
            print(json.dumps(result["probes"][-1]), flush=True)  # type: ignore[index]


if __name__ == "__main__":
    main()
