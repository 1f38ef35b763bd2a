import torch
import torch.nn as nn

import cuda_extension

_THREADS = 1024
_MAX_BLOCKS = 1 << 16  # the kernel strides over further rows


class ModelNew(nn.Module):
    """Softmax over dim 1 of a 2-D input: one block per row, online max and sum, warp-shuffle merges
    (kernels/softmax.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        cuda_extension.softmax_rows(max(1, min(rows, _MAX_BLOCKS)), _THREADS, (x, y, rows, cols))
        return y
