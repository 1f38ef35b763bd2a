import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """HardSigmoid: clamp(x / 6 + 1/2, 0, 1), in one CUDA kernel (kernels/hardsigmoid.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.hardsigmoid(x, 0.0)
