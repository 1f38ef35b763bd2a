import torch
import torch.nn as nn

import cuda_extension

# The launch shape of kernels/gemm_tiled.cuh: 128 x 128 tiles of C, 256 threads, two stages of the
# A and B tiles (32 x 132 floats each) in dynamic shared memory, over the 48 KiB default.
_TILE = 128
_THREADS = 256
_SMEM_BYTES = 2 * 2 * 32 * (128 + 4) * 4  # 67584


class ModelNew(nn.Module):
    """Matmul C = A @ B of an M x K and a K x N matrix: a shared-memory tiled fp32 GEMM (kernels/matmul.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A = A.contiguous()
        B = B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)
        grid = ((N + _TILE - 1) // _TILE, (M + _TILE - 1) // _TILE)
        cuda_extension.matmul_nn(grid, _THREADS, (A, B, C, M, N, K), shared_mem=_SMEM_BYTES)
        return C
