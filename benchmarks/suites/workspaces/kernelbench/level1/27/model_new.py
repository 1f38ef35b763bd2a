import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """SELU: scale * (x if x > 0 else alpha * (exp(x) - 1)), in one CUDA kernel (kernels/selu.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.selu(x, 0.0)
