import torch
import torch.nn as nn

import cuda_extension

THREADS = 256
MAX_BLOCKS = 132 * 32  # enough to fill an H100/H200; the grid-stride loop does the rest


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = x.numel()
        aligned = x.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0
        n_vec = n // 4 if aligned else 0
        if n_vec > 0:
            blocks = min((n_vec + THREADS - 1) // THREADS, MAX_BLOCKS)
            cuda_extension.relu_vec4_kernel(blocks, THREADS, (x, y, n_vec))
        start = n_vec * 4
        if start < n:
            rest = n - start
            cuda_extension.relu_tail_kernel((rest + THREADS - 1) // THREADS, THREADS, (x, y, start, n))
        return y
