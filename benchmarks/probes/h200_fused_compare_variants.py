"""Probe (H200, 2026-12-04): variants of the one-pass comparison kernel (judge/fused_compare.py) on a
6.4 GB fp32 output, beside `fused_summary` as it is in the tree; the run that chose today's kernel (then
compared with 1635cf7's all-float64 one): benchmarks/results/round_trip_h200_9ad5c77/fused_compare_variants_h200.txt.

    python3 benchmarks/probes/h200_fused_compare_variants.py

Variants: the tree's kernel at other BLOCK, blocks per program, warps and load stages. Each prints its
statistics (they must match) and its time. (The float64-only kernel and the float32 exact division that
the recorded run also timed are not in the tree any more.)
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from cuda_agent_mcp.judge.fused_compare import _summary_kernel, fused_summary

N = 4096 * 393216  # KernelBench level1/19's output
# (BLOCK, blocks per program, warps, load stages); the tree's choice is (1024, 64, 8, 3).
VARIANTS = [
    (1024, 64, 8, 1),
    (1024, 64, 8, 3),
    (2048, 32, 8, 1),
    (4096, 16, 16, 1),
    (512, 64, 4, 1),
    (1024, 16, 4, 1),
    (2048, 16, 8, 2),
]


def variant(
    out: torch.Tensor, ref: torch.Tensor, block: int, iters: int, warps: int, stages: int
) -> tuple[list[float], list[float]]:
    """The tree's kernel (`_summary_kernel`) launched with another shape."""
    per_program = block * iters
    programs = (out.numel() + per_program - 1) // per_program
    partial = torch.empty(6, programs, dtype=torch.float64, device=out.device)
    tolerances = torch.tensor([1e-4, 1e-4], dtype=torch.float64, device=out.device)
    _summary_kernel[(programs,)](
        out, ref, tolerances, partial, out.numel(), programs,
        BLOCK=block, ITERS=iters, STAGES=stages, num_warps=warps,
    )  # fmt: skip
    return partial[[0, 1, 4, 5]].sum(dim=1).tolist(), partial[[2, 3]].amax(dim=1).tolist()


def timed(name: str, work: Callable[[], object], repeats: int = 5) -> None:
    work()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(repeats):
        work()
    torch.cuda.synchronize()
    print(f"{name:50s} {(time.perf_counter() - started) / repeats * 1e3:8.2f} ms", flush=True)


def main() -> None:
    ref = torch.rand(N, device="cuda")
    out = ref + 1e-6 * torch.randn_like(ref)
    ref[5] = out[5] = float("nan")
    print("fused_summary", fused_summary(out, ref, atol=1e-4, rtol=1e-4))
    timed("fused_summary (the tree's)", lambda: fused_summary(out, ref, atol=1e-4, rtol=1e-4))
    for block, iters, warps, stages in VARIANTS:
        print((block, iters, warps, stages), variant(out, ref, block, iters, warps, stages))
        timed(
            f"B{block} I{iters} W{warps} st{stages}",
            lambda: variant(out, ref, block, iters, warps, stages),  # noqa: B023  (timed at once)
        )


if __name__ == "__main__":
    main()
