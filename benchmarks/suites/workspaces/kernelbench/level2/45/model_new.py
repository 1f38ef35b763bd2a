import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Linear, sigmoid, Linear, logsumexp: two cuBLAS GEMMs and two fused bias kernels, four launches made in turn by
    the binding (kernels/mlp_logsumexp.cu)."""

    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        # Holds the reference's parameters under the same names, so its state_dict loads.
        self.linear1 = nn.Linear(input_size, hidden_size)
        self.linear2 = nn.Linear(hidden_size, output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.mlp_logsumexp(
            x, self.linear1.weight, self.linear1.bias, self.linear2.weight, self.linear2.bias
        )
