import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Batched matrix product: one strided-batched cuBLAS SGEMM in pedantic fp32 (kernels/bmm_cublas.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return cuda_extension.bmm_cublas(A, B)
