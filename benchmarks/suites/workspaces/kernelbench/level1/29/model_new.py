import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Softplus (beta 1, threshold 20): x if x > 20 else log(1 + exp(x)), in one CUDA kernel (kernels/softplus.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.softplus(x, 0.0)
