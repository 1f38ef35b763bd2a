"""Probe (H200): what sharing a batch's outputs costs the worker and the judge, per part.

    python benchmarks/probes/h200_share_cost_probe.py --outputs 44 --numel 262144 --batches 40

A stand-in for the judge's excess on a small task: per batch, `outputs` fresh CUDA tensors (as a ReLU's
outputs come from the caching allocator) are shared (`wire.transport.share`), the reply is encoded and
parsed as the judge parses it, and the previous batch's outputs are dropped. Prints the median and the
robust spread (1.4826 MAD) of each part in ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from cuda_agent_mcp.wire.protocol import BatchResult, SetOutputs, parse_reply
from cuda_agent_mcp.wire.transport import share


def spread(values: list[float]) -> float:
    centre = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - centre) for v in values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--outputs", type=int, default=44)
    parser.add_argument("--numel", type=int, default=16 * 16384)
    parser.add_argument("--batches", type=int, default=40)
    args = parser.parse_args()
    source = torch.rand(args.numel, device="cuda")
    parts: dict[str, list[float]] = {"share": [], "encode": [], "parse": [], "drop": []}
    kept: list[torch.Tensor] = []
    for _ in range(args.batches):
        outputs = [torch.relu(source) for _ in range(args.outputs)]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        refs = [share(t) for t in outputs]
        t1 = time.perf_counter()
        reply = BatchResult(
            sets=[SetOutputs(structure="tensor", outputs=[r]) for r in refs], event_ms=1.0, wall_ms=1.0
        )
        body = reply.model_dump_json().encode()  # what wire.protocol.encode frames
        t2 = time.perf_counter()
        parse_reply(body)
        t3 = time.perf_counter()
        kept = outputs
        del outputs
        t4 = time.perf_counter()
        for name, (a, b) in zip(parts, ((t0, t1), (t1, t2), (t2, t3), (t3, t4)), strict=True):
            parts[name].append((b - a) * 1e3)
    del kept
    summary = {
        name: {
            "median_ms": round(statistics.median(v[3:]), 4),
            "spread_ms": round(spread(v[3:]), 4),
            "max_ms": round(max(v[3:]), 4),
        }
        for name, v in parts.items()
    }
    print(json.dumps({"outputs": args.outputs, "numel": args.numel, "parts": summary}))


if __name__ == "__main__":
    main()
