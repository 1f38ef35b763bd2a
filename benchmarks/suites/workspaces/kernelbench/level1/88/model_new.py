import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """minGPT's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in one CUDA kernel (kernels/new_gelu.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.new_gelu(x, 0.0)
