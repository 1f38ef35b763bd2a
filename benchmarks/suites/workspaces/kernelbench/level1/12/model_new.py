import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """diag(A) @ B as a row scaling of B, one pass (kernels/diag_matmul.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return cuda_extension.diag_matmul(A, B)
