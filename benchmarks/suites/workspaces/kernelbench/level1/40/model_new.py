import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """LayerNorm over the trailing dimensions: partial sums, statistics and the normalisation, three kernels launched
    in turn by the binding (kernels/layer_norm.cu)."""

    def __init__(self, normalized_shape: tuple):
        super().__init__()
        # Holds the reference's parameters under the same name, so its state_dict loads.
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.layer_norm(x, self.ln.weight, self.ln.bias, self.ln.eps)
