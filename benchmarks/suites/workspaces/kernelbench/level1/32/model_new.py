import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """HardTanh: clamp(x, -1, 1), in one CUDA kernel (kernels/hardtanh.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.hardtanh(x, 0.0)
