import torch
import torch.nn as nn

import cuda_extension

_THREADS = 256  # kThreads of kernels/layer_norm.cu
_CHUNK = 16384  # elements of a row per ln_partials block
_MAX_GRID_Y = 65535  # ln_partials and ln_apply stride over further rows
_APPLY_BLOCKS = 1 << 14  # ln_apply blocks across all rows together


class ModelNew(nn.Module):
    """nn.LayerNorm over the trailing dimensions, weight and bias applied, in three NVRTC kernels
    (kernels/layer_norm.cu: chunk partial sums, per-row statistics, normalisation)."""

    def __init__(self, normalized_shape: tuple):
        super().__init__()
        # Holds the reference's parameters under the same name, so its state_dict loads.
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        weight = self.ln.weight.contiguous()
        bias = self.ln.bias.contiguous()
        y = torch.empty_like(x)
        row_len = weight.numel()
        rows = x.numel() // row_len
        chunks = (row_len + _CHUNK - 1) // _CHUNK
        partials = torch.empty((rows, chunks, 2), device=x.device, dtype=torch.float64)
        stats = torch.empty((rows, 2), device=x.device, dtype=torch.float32)
        grid_rows = max(1, min(rows, _MAX_GRID_Y))
        cuda_extension.ln_partials((chunks, grid_rows), _THREADS, (x, partials, rows, row_len, _CHUNK))
        cuda_extension.ln_stats(rows, _THREADS, (partials, stats, chunks, row_len, float(self.ln.eps)))
        blocks_per_row = max(1, min(chunks, _APPLY_BLOCKS // grid_rows))
        cuda_extension.ln_apply(
            (blocks_per_row, grid_rows), _THREADS, (x, weight, bias, stats, y, rows, row_len)
        )
        return y
