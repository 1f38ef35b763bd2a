"""Compare a candidate's outputs with the reference's: contract first, then values.

Values are compared in float64 over chunks of the flattened tensors, so a multi-gigabyte output
needs only a bounded amount of extra memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from cuda_agent_mcp.judge.fused_compare import fused_available, fused_summary
from cuda_agent_mcp.results import ContractCheck, Mismatch

CHUNK_ELEMENTS = 1 << 25


@dataclass(frozen=True)
class Problem:
    """Why outputs were refused: a contract check or a value mismatch (with its evidence)."""

    check: ContractCheck | None
    message: str
    mismatch: Mismatch | None = None


@dataclass(frozen=True)
class Errors:
    """How far one output is from its reference: max absolute and relative error, and the relative error
    norm ||out - ref|| / ||ref||, over finite positions."""

    max_abs: float
    max_rel: float
    norm: float


@dataclass
class _Tally:
    """Error statistics accumulated over chunks."""

    bad: int = 0
    first_bad: int | None = None
    max_abs: float = 0.0
    max_rel: float = 0.0
    diff_sq: float = 0.0
    ref_sq: float = 0.0
    nonfinite_mismatch: str | None = None
    worst: int = 0
    worst_value: float = -1.0
    samples: dict[int, tuple[float, float]] = field(default_factory=dict)


def check_outputs(
    actual: list[torch.Tensor],
    actual_structure: str,
    expected: list[torch.Tensor],
    expected_structure: str,
    *,
    atol: float,
    rtol: float,
    measured: list[Errors] | None = None,
) -> Problem | None:
    """None when the outputs match; otherwise the first problem found. `measured` receives each matching
    output's `Errors` from the same pass over memory (so no caller needs a second one)."""
    if actual_structure != expected_structure or len(actual) != len(expected):
        return Problem(
            "structure",
            f"forward returned a {actual_structure} of {len(actual)} tensors; the reference returns "
            f"a {expected_structure} of {len(expected)}",
        )
    for index, (out, ref) in enumerate(zip(actual, expected, strict=True)):
        if out.dtype != ref.dtype:
            return Problem("dtype", f"output {index} is {out.dtype}, the reference is {ref.dtype}")
        if out.shape != ref.shape:
            return Problem(
                "shape", f"output {index} has shape {list(out.shape)}, the reference {list(ref.shape)}"
            )
        if out.device.type != ref.device.type:
            return Problem(
                "device", f"output {index} is on {out.device.type}, the reference on {ref.device.type}"
            )
        problem = _compare_values(index, out, ref, atol=atol, rtol=rtol)
        if isinstance(problem, Problem):
            return problem
        if measured is not None:
            measured.append(problem)
    return None


def tally(out: torch.Tensor, ref: torch.Tensor, *, atol: float, rtol: float) -> _Tally:
    """Chunked error statistics of `out` against `ref` (same shape and dtype)."""
    result = _Tally()
    flat_out, flat_ref = out.reshape(-1), ref.reshape(-1)
    floating = out.is_floating_point()
    for start in range(0, flat_out.numel(), CHUNK_ELEMENTS):
        o = flat_out[start : start + CHUNK_ELEMENTS]
        r = flat_ref[start : start + CHUNK_ELEMENTS]
        if floating:
            for name, test in (("NaN", torch.isnan), ("+Inf", torch.isposinf), ("-Inf", torch.isneginf)):
                if result.nonfinite_mismatch is None and bool((test(o) != test(r)).any()):
                    result.nonfinite_mismatch = name
            od, rd = o.double(), r.double()
            finite = torch.isfinite(rd) & torch.isfinite(od)
            diff = torch.where(finite, (od - rd).abs(), 0.0)
            bad = (diff > atol + rtol * rd.abs()) & finite
            # Finite positions only: a NaN or infinite reference would make the largest error NaN.
            rel = torch.where(finite, diff / rd.abs().clamp_min(1e-12), 0.0)
            result.diff_sq += float((diff * diff).sum())
            result.ref_sq += float(torch.where(finite, rd * rd, 0.0).sum())
        else:
            od, rd = o.double(), r.double()
            diff = (od - rd).abs()
            bad = o != r
            rel = diff / rd.abs().clamp_min(1e-12)
        count = int(bad.sum())
        if count and result.first_bad is None:
            result.first_bad = start + int(bad.nonzero()[0])
        result.bad += count
        if diff.numel():
            chunk_max = float(diff.max())
            if chunk_max > result.worst_value:
                result.worst_value, result.worst = chunk_max, start + int(diff.argmax())
            result.max_abs = max(result.max_abs, chunk_max)
            result.max_rel = max(result.max_rel, float(rel.max()))
    return result


def _relative_norm(diff_sq: float, ref_sq: float) -> float:
    return diff_sq**0.5 / ref_sq**0.5 if ref_sq > 0 else 0.0


def _compare_values(
    index: int, out: torch.Tensor, ref: torch.Tensor, *, atol: float, rtol: float
) -> Problem | Errors:
    """The problem, or (the values match) how far off they are."""
    if fused_available(out, ref):
        quick = fused_summary(out, ref, atol=atol, rtol=rtol)
        clean = not quick.bad and not quick.nonfinite_mismatches
        norm = _relative_norm(quick.diff_sq, quick.ref_sq)
        if clean and norm <= max(rtol, atol):
            return Errors(quick.max_abs, quick.max_rel, norm)
    # A mismatch (or no fused path): the chunked pass below also finds the evidence.
    stats = tally(out, ref, atol=atol, rtol=rtol)
    if stats.nonfinite_mismatch is not None:
        return Problem(
            "nan_positions", f"output {index}: {stats.nonfinite_mismatch} positions differ from the reference"
        )
    norm_error = _relative_norm(stats.diff_sq, stats.ref_sq)
    if stats.bad:
        return Problem(
            None,
            f"output {index}: {stats.bad} of {out.numel()} values outside atol={atol}, rtol={rtol}",
            _mismatch(index, out, ref, stats, stats.first_bad or 0, norm_error),
        )
    # An absolute tolerance alone lets all-zeros pass when the reference's values are tiny.
    if norm_error > max(rtol, atol):
        return Problem(
            None,
            f"output {index}: relative error norm {norm_error:.3g} exceeds {max(rtol, atol):g}",
            _mismatch(index, out, ref, stats, stats.worst, norm_error),
        )
    return Errors(stats.max_abs, stats.max_rel, norm_error)


def _mismatch(
    index: int, out: torch.Tensor, ref: torch.Tensor, stats: _Tally, flat: int, norm_error: float
) -> Mismatch:
    position = [int(i) for i in torch.unravel_index(torch.tensor(flat), out.shape)] if out.dim() else []
    return Mismatch(
        output_index=index,
        mismatched=stats.bad,
        total=out.numel(),
        max_abs_error=stats.max_abs,
        max_rel_error=stats.max_rel,
        relative_norm_error=norm_error,
        first_index=position,
        expected=float(ref.reshape(-1)[flat]),
        actual=float(out.reshape(-1)[flat]),
    )


def errors(out: torch.Tensor, ref: torch.Tensor) -> Errors:
    """`Errors` of `out` against `ref` on their own (a comparison that passed measured them already:
    `check_outputs`' `measured`)."""
    if out.dtype != ref.dtype or out.shape != ref.shape:
        return Errors(float("inf"), float("inf"), float("inf"))
    if fused_available(out, ref):
        quick = fused_summary(out, ref, atol=float("inf"), rtol=0.0)
        return Errors(quick.max_abs, quick.max_rel, _relative_norm(quick.diff_sq, quick.ref_sq))
    stats = tally(out, ref, atol=float("inf"), rtol=0.0)
    return Errors(stats.max_abs, stats.max_rel, _relative_norm(stats.diff_sq, stats.ref_sq))


def unchanged(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Bitwise equality, NaNs included: an input the candidate wrote to is a contract violation."""
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    if before.is_floating_point() and before.element_size() in _SAME_SIZE_INTEGER:
        # Compare the bits: one pass, and a NaN equals itself (its payload included).
        integer = _SAME_SIZE_INTEGER[before.element_size()]
        return bool(torch.equal(before.contiguous().view(integer), after.contiguous().view(integer)))
    return bool(torch.equal(before, after))


_SAME_SIZE_INTEGER = {2: torch.int16, 4: torch.int32, 8: torch.int64}
