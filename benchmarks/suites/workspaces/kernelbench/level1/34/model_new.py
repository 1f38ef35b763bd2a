import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """InstanceNorm2d: a block per (n, c) plane, its statistics then its normalisation (kernels/instance_norm.cu)."""

    def __init__(self, num_features: int):
        super().__init__()
        self.eps = 1e-5  # nn.InstanceNorm2d's default; it has no affine parameters and no running statistics

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.instance_norm(x, self.eps)
