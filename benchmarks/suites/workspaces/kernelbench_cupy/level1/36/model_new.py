import torch
import torch.nn as nn

import cuda_extension

_THREADS = 256
_MAX_BLOCKS = 1 << 16  # the kernel strides over the rest


class ModelNew(nn.Module):
    """RMS normalisation over dim 1, x / sqrt(mean(x^2, dim=1) + eps), in one NVRTC kernel
    (kernels/rms_norm.cu)."""

    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        batch, features = x.shape[0], x.shape[1]
        inner = 1
        for size in x.shape[2:]:
            inner *= size
        columns = batch * inner
        blocks = max(1, min((columns + _THREADS - 1) // _THREADS, _MAX_BLOCKS))
        cuda_extension.rms_norm(blocks, _THREADS, (x, y, batch, features, inner, float(self.eps)))
        return y
