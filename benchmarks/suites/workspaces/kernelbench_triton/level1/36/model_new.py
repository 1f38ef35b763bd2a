import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, y_ptr, F, S, eps, BLOCK_S: tl.constexpr):
    # x is (B, F, S) with S the flattened trailing dims; the RMS runs over F for every (b, s).
    # A program owns BLOCK_S contiguous positions of one batch row (coalesced loads) and walks F
    # twice: the sum of squares, then the scaled write.
    pid_b = tl.program_id(0).to(tl.int64)
    pid_s = tl.program_id(1)
    offs = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    mask = offs < S
    base = pid_b * F * S
    ss = tl.zeros((BLOCK_S,), dtype=tl.float32)
    for f in range(0, F):
        x = tl.load(x_ptr + base + f * S + offs, mask=mask, other=0.0)
        ss += x * x
    # IEEE sqrt (sqrt_rn), as torch.sqrt; the reference divides x by the rms.
    rms = tl.sqrt_rn(ss / F + eps)
    for f in range(0, F):
        ptr_off = base + f * S + offs
        x = tl.load(x_ptr + ptr_off, mask=mask, other=0.0)
        tl.store(y_ptr + ptr_off, x / rms, mask=mask)


def triton_rmsnorm(x: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.contiguous()
    B, F = x.shape[0], x.shape[1]
    S = x.numel() // max(B * F, 1)
    y = torch.empty_like(x)
    BLOCK_S = min(1024, triton.next_power_of_2(max(S, 1)))
    grid = (B, triton.cdiv(S, BLOCK_S))
    rmsnorm_kernel[grid](x, y, F, S, eps, BLOCK_S=BLOCK_S, num_warps=4)
    return y


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return triton_rmsnorm(x, self.eps)
