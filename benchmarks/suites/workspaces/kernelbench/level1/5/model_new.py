import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """A * s in one CUDA kernel (kernels/scale.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return cuda_extension.scale(A, float(s))
