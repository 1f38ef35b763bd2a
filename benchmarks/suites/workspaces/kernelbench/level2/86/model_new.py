import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Linear, divide, GELU: cuBLAS GEMM and one fused epilogue kernel (kernels/linear_div_gelu.cu)."""

    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        # Holds the reference's parameters under the same name, so its state_dict loads.
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.linear_div_gelu(x, self.linear.weight, self.linear.bias, self.divisor, 0.0)
