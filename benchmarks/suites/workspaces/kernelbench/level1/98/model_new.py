import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """KL divergence, batchmean: per-block partial sums, then a deterministic total (kernels/kl_div.cu)."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return cuda_extension.kl_div(predictions, targets)
