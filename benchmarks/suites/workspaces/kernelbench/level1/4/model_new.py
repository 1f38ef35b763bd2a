import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Matrix-vector product: a block per row, a deterministic tree sum (kernels/matvec.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return cuda_extension.matvec(A, B)
