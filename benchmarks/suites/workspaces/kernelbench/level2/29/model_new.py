import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Linear, Mish, Mish: cuBLAS GEMM and one fused epilogue kernel (kernels/linear_mish_mish.cu)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        # Holds the reference's parameters under the same name, so its state_dict loads.
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.linear_mish_mish(x, self.linear.weight, self.linear.bias, 0.0, 0.0)
