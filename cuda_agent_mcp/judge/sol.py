"""Speed of light per task (principle 5): the least time the reference's work can take on this GPU.

Runs in the judge process. T_SOL = max(bytes / bandwidth, FLOPs / peak): the bytes the reference must
move (its inputs and weights read once, its outputs written once) at the GPU's measured copy bandwidth,
and the FLOPs it performs (`torch.utils.flop_counter.FlopCounterMode` over one forward on the meta
device: matrix products, convolutions, attention; elementwise work counts no FLOPs) at the measured
arithmetic peak for the task's dtype (fp32 without TF32: the precision check forbids TF32 on fp32
tasks). Peaks are measured once per GPU and stored with its identity (`gpu_peaks.json` ships the
figures measured on the H200; another GPU is measured on first use and cached beside the baselines).

SOL-ExecBench's score S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)) is 0.5 at the best baseline and 1
at speed of light. A candidate faster than T_SOL is flagged and measured again, never rejected for it:
honest algebraic simplifications beat the reference's own FLOP count.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from cuda_agent_mcp.results import SpeedOfLight

SHIPPED_PEAKS = Path(__file__).with_name("gpu_peaks.json")
_DTYPE_PEAK = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}


@dataclass(frozen=True)
class Work:
    """What the reference must do per call."""

    bytes_moved: int
    flops: int
    dtype: torch.dtype
    note: str = ""


def reference_work(reference: ModuleType, init_args: list[Any]) -> Work | None:
    """Bytes and FLOPs of one reference forward, counted on the meta device; None if it cannot run there."""
    try:
        with torch.device("meta"):
            model = reference.Model(*_to_meta(init_args)).eval()
            inputs = [x for x in reference.get_inputs()]
            counter = FlopCounterMode(display=False)
            with counter, torch.no_grad():
                output = model(*inputs)
    except Exception:
        return None
    outputs = (
        [output] if isinstance(output, torch.Tensor) else [o for o in output if isinstance(o, torch.Tensor)]
    )
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    weights = [*model.parameters(), *model.buffers()]
    moved = sum(t.numel() * t.element_size() for t in (*tensors, *weights, *outputs))
    floating = [t.dtype for t in (*outputs, *tensors) if t.is_floating_point()]
    return Work(
        bytes_moved=moved,
        flops=int(counter.get_total_flops()),
        dtype=floating[0] if floating else torch.float32,
    )


def _to_meta(values: list[Any]) -> list[Any]:
    return [v.to("meta") if isinstance(v, torch.Tensor) else v for v in values]


def gpu_identity(device: torch.device) -> str:
    name = torch.cuda.get_device_name(device)
    driver = getattr(torch._C, "_cuda_getDriverVersion", lambda: 0)()
    return f"{name}|driver-cuda {driver}"


def peaks_for(device: torch.device, cache: Path | None) -> dict[str, Any] | None:
    """The GPU's measured peaks: shipped figures for its name, else a cached measurement, else measured now
    (about two seconds) and cached."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    shipped = _read(SHIPPED_PEAKS)
    if name in shipped:
        return shipped[name]
    identity = gpu_identity(device)
    cached = _read(cache) if cache is not None else {}
    if identity in cached:
        return cached[identity]
    measured = measure_peaks(device)
    if cache is not None:
        cached[identity] = measured
        cache.parent.mkdir(parents=True, exist_ok=True)
        temporary = cache.with_suffix(f".{secrets.token_hex(6)}.tmp")
        temporary.write_text(json.dumps(cached, indent=1))
        temporary.replace(cache)
    return measured


def measure_peaks(device: torch.device) -> dict[str, Any]:
    """Copy bandwidth (bytes read plus written per second) and matrix-product rates per dtype."""

    def median_ms(fn: Any, reps: int = 7) -> float:
        fn()
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(reps):
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize(device)
            times.append(start.elapsed_time(end))
        return sorted(times)[reps // 2]

    free = torch.cuda.mem_get_info(device)[0]
    elements = min(1 << 28, free // 16)
    source = torch.empty(elements, device=device)
    target = torch.empty_like(source)
    copy_ms = median_ms(lambda: target.copy_(source))
    found: dict[str, Any] = {"copy_bytes_per_s": 2 * elements * 4 / (copy_ms / 1e3)}
    source = target = None  # free them before the matrix products
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for dtype, label, size in (
            (torch.float32, "fp32", 4096),
            (torch.float64, "fp64", 2048),
            (torch.float16, "fp16", 4096),
            (torch.bfloat16, "bf16", 4096),
        ):
            x = torch.randn(size, size, device=device, dtype=dtype)
            y = torch.randn(size, size, device=device, dtype=dtype)
            found[f"matmul_{label}_flops_per_s"] = 2 * size**3 / (median_ms(lambda x=x, y=y: x @ y) / 1e3)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    found["source"] = f"measured on first use ({gpu_identity(device)})"
    return found


def speed_of_light(
    work: Work | None, peaks: dict[str, Any] | None, candidate_ms: float | None, baseline_ms: float | None
) -> SpeedOfLight | None:
    """T_SOL, the candidate's fraction of it and SOL-ExecBench's score; None without work or peaks."""
    if work is None or not peaks or not peaks.get("copy_bytes_per_s"):
        return None
    memory_ms = work.bytes_moved / peaks["copy_bytes_per_s"] * 1e3
    peak = peaks.get(f"matmul_{_DTYPE_PEAK.get(work.dtype, 'fp32')}_flops_per_s") or 0.0
    compute_ms = work.flops / peak * 1e3 if peak > 0 else 0.0
    t_sol = max(memory_ms, compute_ms)
    fraction = t_sol / candidate_ms if candidate_ms and t_sol > 0 else None
    score = None
    if candidate_ms is not None and baseline_ms is not None and baseline_ms > t_sol:
        score = 1.0 / (1.0 + (candidate_ms - t_sol) / (baseline_ms - t_sol))
    return SpeedOfLight(
        t_sol_ms=t_sol,
        bytes_moved=work.bytes_moved,
        flops=work.flops,
        bound="compute" if compute_ms > memory_ms else "memory",
        fraction=fraction,
        score=score,
        peaks=str(peaks.get("source", "")),
    )


def _read(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
