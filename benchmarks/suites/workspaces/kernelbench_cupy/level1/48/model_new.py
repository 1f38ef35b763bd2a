import torch
import torch.nn as nn

import cuda_extension

_LANES, _SLICES = 32, 8  # the block shape of kernels/reduce_dim.cu
_MAX_GRID_Y = 65535  # the kernel strides over further outer indices


class ModelNew(nn.Module):
    """torch.mean(x, dim) (the dimension dropped) in one NVRTC kernel (kernels/reduce_dim.cu)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim % x.dim()
        outer = 1
        for size in x.shape[:dim]:
            outer *= size
        inner = 1
        for size in x.shape[dim + 1 :]:
            inner *= size
        r_len = x.shape[dim]
        shape = list(x.shape[:dim]) + list(x.shape[dim + 1 :])
        y = torch.empty(shape, device=x.device, dtype=x.dtype)
        grid = (max(1, (inner + _LANES - 1) // _LANES), max(1, min(outer, _MAX_GRID_Y)))
        cuda_extension.reduce_dim(grid, (_LANES, _SLICES), (x, y, outer, r_len, inner, float(r_len)))
        return y
