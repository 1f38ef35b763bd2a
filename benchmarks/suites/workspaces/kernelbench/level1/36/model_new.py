import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """RMSNorm over the feature dimension (dim 1) in one kernel (kernels/rms_norm.cu)."""

    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.rms_norm(x, self.eps)
