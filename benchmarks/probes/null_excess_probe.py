"""Probe: how far a parent's clock runs beyond a child's wall clock around a GPU window, by window length.

    python benchmarks/probes/null_excess_probe.py --out probe.json

Two children (no candidate code: each spins the GPU with `torch.cuda._sleep` for W ms, synchronizes, exports a
fresh output by CUDA IPC, replies) are driven alternately by a parent that never touches CUDA, with the
parent waiting either in `select` (blocking: its vCPU may halt) or by polling a non-blocking pipe (spinning).
For each window W the excess is parent_ms - child_wall_ms - ping_ms. This is the judge's null overhead in
its own conditions; the figures decide how the timing cross-check sizes windows and how it waits.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import statistics
import subprocess
import sys
import time

CHILD = r"""
import os, sys, time, json, torch
from torch.multiprocessing.reductions import reduce_tensor
dev = torch.device('cuda')
torch.empty(1, device=dev)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
torch.cuda.synchronize(); s.record(); torch.cuda._sleep(1_000_000); e.record(); torch.cuda.synchronize()
cycles_per_ms = 1_000_000 / s.elapsed_time(e)
out_elems = int(sys.argv[1])
rd, wr = sys.stdin.buffer, sys.stdout.buffer
while True:
    line = rd.readline()
    if not line:
        break
    w = float(line)
    if w < 0:
        wr.write(b'pong\n'); wr.flush(); continue
    torch.cuda.synchronize()
    t0 = time.perf_counter(); s.record()
    if w > 0:
        torch.cuda._sleep(int(w * cycles_per_ms))
    out = torch.empty(out_elems, device=dev)
    e.record(); torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) * 1e3
    storage = out.untyped_storage()._share_cuda_()
    wr.write(json.dumps({'wall': wall, 'event': s.elapsed_time(e)}).encode() + b'\n'); wr.flush()
"""


class Child:
    def __init__(self, out_elems: int) -> None:
        self.p = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(out_elems)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.fd = self.p.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.buf = b""

    def ask(self, w: float, spin: bool) -> tuple[float, bytes]:
        started = time.perf_counter()
        self.p.stdin.write(f"{w}\n".encode())
        self.p.stdin.flush()
        while b"\n" not in self.buf:
            if not spin:
                select.select([self.fd], [], [], 60)
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                raise EOFError
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return (time.perf_counter() - started) * 1e3, line


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--out-elems", type=int, default=1 << 20)
    args = parser.parse_args()
    children = [Child(args.out_elems), Child(args.out_elems)]
    for c in children:
        c.ask(0.5, False)
    windows = [0.5, 1.0, 2.0, 5.0, 10.0]
    plan = [
        (w, spin, i) for w in windows for spin in (False, True) for i in range(2) for _ in range(args.reps)
    ]
    random.Random(0).shuffle(plan)
    records: dict[str, list[float]] = {}
    for w, spin, i in plan:
        judge_ms, line = children[i].ask(w, spin)
        reply = json.loads(line)
        ping_ms, _ = children[i].ask(-1, spin)
        key = f"w={w} {'spin' if spin else 'block'} child={i}"
        records.setdefault(key, []).append(judge_ms - reply["wall"] - ping_ms)
    summary = {}
    for key, values in sorted(records.items()):
        ordered = sorted(values)
        summary[key] = {
            "median": statistics.median(ordered),
            "p10": ordered[len(ordered) // 10],
            "p90": ordered[9 * len(ordered) // 10],
            "max": ordered[-1],
            "mad": statistics.median(abs(v - statistics.median(ordered)) for v in ordered),
        }
        print(key, {k: round(v, 4) for k, v in summary[key].items()})
    with open(args.out, "w") as f:
        json.dump({"summary": summary, "samples": records}, f, indent=1)


if __name__ == "__main__":
    main()
