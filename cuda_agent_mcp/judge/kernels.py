"""Which kernels a candidate's call ran, and whether the workspace's own kernels did the work.

The trace comes from the profiler inside the worker (CUPTI), so a candidate can hide from it: it is
evidence against a candidate (PyTorch or library kernels doing the work), never proof for one. Names are
matched on the function name and its linkage (`kernel_names.py`): the build's names come from ptxas or
NVRTC, the trace's from CUPTI, and the two spell signatures differently.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Literal

from cuda_agent_mcp.evaluation.kernel_names import kernel_identity, library_lookalike
from cuda_agent_mcp.results import KernelBreakdown, KernelTime
from cuda_agent_mcp.wire.protocol import TracedKernel

# The workspace's kernels must carry at least this share of the call's kernel time.
MIN_WORKSPACE_SHARE = 0.5
_COPY_PREFIXES = ("memcpy", "memset")
_SHOWN = 20


# How cuBLAS and cuDNN kernels are named (e.g. `sm90_xmma_gemm_f32f32_...`, `ampere_sgemm_128x64_nn`,
# `cutlass::Kernel2<cutlass_80_simt_sgemm_...>`, `gemv2N_kernel`, `cudnn::winograd...`,
# `implicit_convolve_sgemm`, `xmma_fprop_implicit_gemm_...`). Broad on purpose: they apply only to the
# libraries a task allows, and a PyTorch op that reaches the same library kernels computes what the
# candidate could have asked the library for directly.
_LIBRARY_KERNELS = {
    "cublas": re.compile(r"gemm|gemv|xmma|cutlass|cublas|splitkreduce", re.IGNORECASE),
    "cudnn": re.compile(
        r"cudnn|conv|fprop|dgrad|wgrad|winograd|fft|implicit|nchw|nhwc|xmma|cutlass|gemm", re.IGNORECASE
    ),
}


def breakdown(
    traced: list[TracedKernel], workspace_kernels: list[str], libraries: Collection[str] = ()
) -> KernelBreakdown:
    """Sum the trace by kernel and say which came from the workspace or an allowed library."""
    # A workspace kernel named as library kernels are is never its own: the trace would credit the
    # library's (cuBLAS run through PyTorch, say) to the workspace.
    ours = {kernel_identity(name) for name in workspace_kernels if not library_lookalike(name)}
    library_patterns = [_LIBRARY_KERNELS[name] for name in libraries if name in _LIBRARY_KERNELS]
    rows: list[KernelTime] = []
    for kernel in traced:
        origin: Literal["workspace", "library", "other", "copy"]
        if kernel.name.lower().startswith(_COPY_PREFIXES):
            origin = "copy"
        elif kernel_identity(kernel.name) in ours:
            origin = "workspace"
        elif any(pattern.search(kernel.name) for pattern in library_patterns):
            origin = "library"
        else:
            origin = "other"
        rows.append(
            KernelTime(name=kernel.name, calls=kernel.calls, total_ms=kernel.device_ns / 1e6, origin=origin)
        )
    rows.sort(key=lambda row: row.total_ms, reverse=True)
    kernel_ms = sum(row.total_ms for row in rows if row.origin != "copy")
    workspace_ms = sum(row.total_ms for row in rows if row.origin in ("workspace", "library"))
    note = "" if rows else "the trace recorded no device activity (no profiler here, or it was switched off)"
    return KernelBreakdown(
        kernels=rows[:_SHOWN],
        traced_ms=sum(row.total_ms for row in rows),
        workspace_share=workspace_ms / kernel_ms if kernel_ms > 0 else None,
        note=note,
    )


def foreign_work(found: KernelBreakdown) -> str | None:
    """Why the trace shows that kernels not built from the workspace did the work, or None."""
    if found.workspace_share is None or found.workspace_share >= MIN_WORKSPACE_SHARE:
        return None
    others = [row for row in found.kernels if row.origin == "other"][:3]
    listed = "; ".join(f"{row.name[:120]} ({row.total_ms:.3f} ms)" for row in others)
    return (
        f"kernels compiled from the workspace (and libraries the task allows) ran {found.workspace_share:.0%} of "
        "the call's kernel time "
        f"(at least {MIN_WORKSPACE_SHARE:.0%} required); the rest ran in: {listed}"
    )
