import torch
import torch.nn as nn

import cuda_extension

# The launch shape of kernels/gemm_tiled.cuh: 128 x 128 tiles of the output, 256 threads, two stages of
# the A and B tiles (32 x 132 floats each) in dynamic shared memory, over the 48 KiB default.
_TILE = 128
_THREADS = 256
_SMEM_BYTES = 2 * 2 * 32 * (128 + 4) * 4  # 67584


class ModelNew(nn.Module):
    """Linear, divide, GELU: a tiled fp32 GEMM with the tail fused into its stores
    (kernels/linear_div_gelu.cu)."""

    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        # Holds the reference's parameters under the same name, so its state_dict loads.
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        weight = self.linear.weight.contiguous()
        bias = self.linear.bias.contiguous()
        M, K = x.shape
        N = weight.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = ((N + _TILE - 1) // _TILE, (M + _TILE - 1) // _TILE)
        args = (x, weight, bias, y, M, N, K, float(self.divisor))
        cuda_extension.linear_div_gelu(grid, _THREADS, args, shared_mem=_SMEM_BYTES)
        return y
