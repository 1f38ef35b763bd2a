import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Tanh, in one CUDA kernel (kernels/tanh_act.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.tanh_act(x, 0.0)
