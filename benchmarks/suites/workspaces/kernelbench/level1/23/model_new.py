import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Softmax over dim 1 of a 2-D input (kernels/softmax_rows.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() == 2, "softmax over dim 1 of a 2-D tensor"
        return cuda_extension.softmax_rows(x)
