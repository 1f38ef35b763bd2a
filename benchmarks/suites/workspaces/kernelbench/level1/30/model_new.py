import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Softsign: x / (1 + |x|), in one CUDA kernel (kernels/softsign.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.softsign(x, 0.0)
