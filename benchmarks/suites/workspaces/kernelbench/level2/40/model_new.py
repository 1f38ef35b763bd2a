import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Linear, scale, residual add: cuBLAS GEMM and one fused epilogue kernel (kernels/linear_scale_residual.cu)."""

    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        # Holds the reference's parameters under the same name, so its state_dict loads.
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.linear_scale_residual(
            x, self.matmul.weight, self.matmul.bias, self.scaling_factor, 0.0
        )
