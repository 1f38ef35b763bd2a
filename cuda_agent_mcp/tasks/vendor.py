"""Which vendor math libraries a task lets a candidate use (the paper's policy: cuBLAS for GEMMs, cuDNN
for convolutions, nothing else).

The policy is read from the reference: a task whose `Model` multiplies matrices may call cuBLAS, one
that convolves may call cuDNN. A task may also name its libraries outright (`TaskPolicy.vendor_libraries`).
"""

from __future__ import annotations

import re
from typing import Literal

VendorLibrary = Literal["cublas", "cudnn"]

_GEMM = re.compile(
    r"\bnn\.(?:Linear|Bilinear|MultiheadAttention|LSTM|GRU|RNN|Transformer\w*)\b"
    r"|\b(?:torch|F)\.(?:matmul|mm|bmm|addmm|baddbmm|addbmm|einsum|linear|bilinear|tensordot|inner|chain_matmul)\b"
    r"|\.(?:matmul|mm|bmm)\(|[\w\])]\s*@\s*[\w(]"
)
_CONV = re.compile(r"\bnn\.(?:Conv\w*|LazyConv\w*)\b|\bF\.conv\w*\b|\btorch\.conv\w*\b")


def paper_vendor_libraries(reference_code: str) -> tuple[VendorLibrary, ...]:
    """cuBLAS when the reference multiplies matrices, cuDNN when it convolves."""
    found: list[VendorLibrary] = []
    if _GEMM.search(reference_code):
        found.append("cublas")
    if _CONV.search(reference_code):
        found.append("cudnn")
    return tuple(found)
