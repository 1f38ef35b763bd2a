import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """C = A^T B: one cuBLAS SGEMM in pedantic fp32, the transposes as flags (kernels/matmul_tn.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return cuda_extension.matmul_tn(A, B)
