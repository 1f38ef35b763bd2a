import torch
import torch.nn as nn

import cuda_extension

# The launch shape of kernels/gemm_tiled.cuh: 128 x 128 tiles of the output, 256 threads, two stages of
# the A and B tiles (32 x 132 floats each) in dynamic shared memory, over the 48 KiB default.
_TILE = 128
_THREADS = 256
_SMEM_BYTES = 2 * 2 * 32 * (128 + 4) * 4  # 67584


class ModelNew(nn.Module):
    """Linear without bias, add a bias parameter, ReLU: a tiled fp32 GEMM with the add and ReLU fused
    into its stores (kernels/linear_add_relu.cu)."""

    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        # Holds the reference's parameters under the same names, so its state_dict loads.
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        weight = self.gemm.weight.contiguous()
        bias = self.bias.contiguous()
        M, K = x.shape
        N = weight.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = ((N + _TILE - 1) // _TILE, (M + _TILE - 1) // _TILE)
        cuda_extension.linear_add_relu(grid, _THREADS, (x, weight, bias, y, M, N, K), shared_mem=_SMEM_BYTES)
        return y
