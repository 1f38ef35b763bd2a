"""Error statistics of a large output in one pass over GPU memory (a Triton kernel).

The torch path in `compare.py` makes a dozen passes and several host syncs per chunk: about 0.2 s for a
6.4 GB output on an H200, paid for every call of a verify. This kernel reads each element of both tensors
once and leaves one row of partial sums per program, reduced by torch with a single sync. It answers only
"are these outputs clean, and how far off": the rare failing case goes back to the torch path for the
evidence (first mismatch index, values). Used for CUDA floating tensors when Triton is importable.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the torch path serves
    triton = None

# Measured on the H200 (6.4 GB fp32 outputs, benchmarks/results/round_trip_h200_*): float64 for what must be
# exact (the differences, the tolerance test, the sums), int32 for the counts and float32 with a fast
# division for the largest relative error (a figure that is reported, never judged on) took the pass
# from 8.9 ms to 3.7 ms; pipelining the loads (3 stages) gave the last 0.3 ms.
BLOCK = 1024
BLOCKS_PER_PROGRAM = 64
WARPS = 8
STAGES = 3
_ROWS = 6  # bad, nonfinite mismatches, max |diff|, max rel, sum diff^2, sum ref^2


@dataclass(frozen=True)
class Summary:
    """Whole-tensor statistics over the positions where both values are finite."""

    bad: int
    nonfinite_mismatches: int
    max_abs: float
    max_rel: float
    diff_sq: float
    ref_sq: float


if triton is not None:

    @triton.jit
    def _summary_kernel(  # type: ignore[no-untyped-def]  # Triton's JIT reads a kernel's annotations
        out_ptr,
        ref_ptr,
        tol_ptr,
        partial_ptr,
        n,
        programs,
        BLOCK: tl.constexpr,
        ITERS: tl.constexpr,
        STAGES: tl.constexpr,
    ):
        pid = tl.program_id(0)
        atol = tl.load(tol_ptr)
        rtol = tl.load(tol_ptr + 1)
        bad = tl.zeros([BLOCK], dtype=tl.int32)
        nonfinite = tl.zeros([BLOCK], dtype=tl.int32)
        max_abs = tl.zeros([BLOCK], dtype=tl.float64)
        max_rel = tl.zeros([BLOCK], dtype=tl.float32)
        diff_sq = tl.zeros([BLOCK], dtype=tl.float64)
        ref_sq = tl.zeros([BLOCK], dtype=tl.float64)
        start = pid.to(tl.int64) * BLOCK * ITERS
        for step in tl.range(ITERS, num_stages=STAGES):
            offsets = start + step * BLOCK + tl.arange(0, BLOCK)
            inside = offsets < n
            o_raw = tl.load(out_ptr + offsets, mask=inside, other=0.0)
            r_raw = tl.load(ref_ptr + offsets, mask=inside, other=0.0)
            o = o_raw.to(tl.float64)
            r = r_raw.to(tl.float64)
            o_nan = o_raw != o_raw
            r_nan = r_raw != r_raw
            o_inf = tl.abs(o_raw) == float("inf")
            r_inf = tl.abs(r_raw) == float("inf")
            # NaN positions must match, and an infinity must be the same infinity.
            mismatch = (o_nan != r_nan) | ((o_inf | r_inf) & (o_raw != r_raw) & ~o_nan & ~r_nan)
            finite = ~(o_nan | r_nan | o_inf | r_inf)
            diff = tl.where(finite, tl.abs(o - r), 0.0)
            magnitude = tl.where(finite, tl.abs(r), 0.0)
            bad += (finite & (diff > atol + rtol * magnitude)).to(tl.int32)
            nonfinite += mismatch.to(tl.int32)
            max_abs = tl.maximum(max_abs, diff)
            relative = tl.fdiv(
                diff.to(tl.float32), tl.maximum(magnitude.to(tl.float32), 1e-12), ieee_rounding=False
            )
            max_rel = tl.maximum(max_rel, tl.where(finite, relative, 0.0))
            diff_sq += diff * diff
            ref_sq += magnitude * magnitude
        tl.store(partial_ptr + 0 * programs + pid, tl.sum(bad, axis=0).to(tl.float64))
        tl.store(partial_ptr + 1 * programs + pid, tl.sum(nonfinite, axis=0).to(tl.float64))
        tl.store(partial_ptr + 2 * programs + pid, tl.max(max_abs, axis=0))
        tl.store(partial_ptr + 3 * programs + pid, tl.max(max_rel, axis=0).to(tl.float64))
        tl.store(partial_ptr + 4 * programs + pid, tl.sum(diff_sq, axis=0))
        tl.store(partial_ptr + 5 * programs + pid, tl.sum(ref_sq, axis=0))


def fused_available(out: torch.Tensor, ref: torch.Tensor) -> bool:
    return (
        triton is not None
        and out.is_cuda
        and ref.is_cuda
        and out.device == ref.device
        and out.is_floating_point()
        and out.dtype == ref.dtype
        and out.shape == ref.shape
        and out.numel() > 0
    )


def fused_summary(out: torch.Tensor, ref: torch.Tensor, *, atol: float, rtol: float) -> Summary:
    """Statistics of `out` against `ref` (see `fused_available` for what qualifies)."""
    flat_out, flat_ref = out.contiguous().reshape(-1), ref.contiguous().reshape(-1)
    n = flat_out.numel()
    per_program = BLOCK * BLOCKS_PER_PROGRAM
    programs = (n + per_program - 1) // per_program
    partial = torch.empty(_ROWS, programs, dtype=torch.float64, device=out.device)
    tolerances = torch.tensor([atol, rtol], dtype=torch.float64, device=out.device)
    # On the CPU only under Triton's interpreter (TRITON_INTERPRET=1), which the CPU tests use.
    with torch.cuda.device(out.device) if out.is_cuda else contextlib.nullcontext():
        _summary_kernel[(programs,)](
            flat_out,
            flat_ref,
            tolerances,
            partial,
            n,
            programs,
            BLOCK=BLOCK,
            ITERS=BLOCKS_PER_PROGRAM,
            STAGES=STAGES,
            num_warps=WARPS,
        )
    sums = partial[[0, 1, 4, 5]].sum(dim=1)
    maxima = partial[[2, 3]].amax(dim=1)
    bad, nonfinite, diff_sq, ref_sq = sums.tolist()
    max_abs, max_rel = maxima.tolist()
    return Summary(int(bad), int(nonfinite), max_abs, max_rel, diff_sq, ref_sq)


def warm_up(device: torch.device) -> None:
    """Compile the kernel for fp32 outputs ahead of the first job (about 0.5 s of Triton JIT), in the
    variants large outputs hit: element and program counts divisible by 16 or not."""
    if triton is None or device.type != "cuda":
        return
    per_program = BLOCK * BLOCKS_PER_PROGRAM
    for n in (16 * per_program, 17 * per_program + 1):
        a = torch.zeros(n, dtype=torch.float32, device=device)
        fused_summary(a, a, atol=0.0, rtol=0.0)
