import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def max_dim_kernel(x_ptr, y_ptr, R, INNER, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    # x is viewed as (OUTER, R, INNER) and reduced over R; y is (OUTER, INNER).
    # A program owns BLOCK_I contiguous inner positions of one outer index (coalesced loads) and walks
    # R in BLOCK_R steps, keeping a (BLOCK_R, BLOCK_I) running maximum and whether a NaN was seen
    # (torch.max propagates NaN; tl.max alone would drop it).
    pid_o = tl.program_id(0).to(tl.int64)
    pid_i = tl.program_id(1)
    offs_i = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    mask_i = offs_i < INNER
    offs_r = tl.arange(0, BLOCK_R)
    # 64-bit: KernelBench's input holds 2.1e9 elements.
    base = x_ptr + pid_o * R * INNER
    acc = tl.full((BLOCK_R, BLOCK_I), float("-inf"), dtype=tl.float32)
    nan = tl.zeros((BLOCK_R, BLOCK_I), dtype=tl.int32)
    for r0 in range(0, R, BLOCK_R):
        rr = r0 + offs_r
        ptrs = base + rr[:, None].to(tl.int64) * INNER + offs_i[None, :]
        x = tl.load(ptrs, mask=(rr[:, None] < R) & mask_i[None, :], other=float("-inf"))
        acc = tl.maximum(acc, x)
        nan = tl.maximum(nan, (x != x).to(tl.int32))
    best = tl.max(acc, axis=0)
    best = tl.where(tl.max(nan, axis=0) > 0, float("nan"), best)
    tl.store(y_ptr + pid_o * INNER + offs_i, best, mask=mask_i)


def triton_max_dim(x: torch.Tensor, dim: int) -> torch.Tensor:
    x = x.contiguous()
    dim = dim % x.dim()
    shape = list(x.shape)
    R = shape[dim]
    outer = 1
    for s in shape[:dim]:
        outer *= s
    inner = 1
    for s in shape[dim + 1 :]:
        inner *= s
    y = torch.empty(shape[:dim] + shape[dim + 1 :], device=x.device, dtype=x.dtype)
    BLOCK_I = min(128, triton.next_power_of_2(max(inner, 1)))
    BLOCK_R = 8
    grid = (outer, triton.cdiv(inner, BLOCK_I))
    max_dim_kernel[grid](x, y, R, inner, BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I, num_warps=4)
    return y


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return triton_max_dim(x, self.dim)
