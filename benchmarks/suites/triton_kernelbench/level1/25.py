import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def swish_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # 64-bit offsets: KernelBench's inputs hold more than 2**31 elements.
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    # x * sigmoid(x), as the reference computes it; exp(-x) overflowing to inf gives x * 0.
    sig = 1.0 / (1.0 + tl.exp(-x))
    tl.store(y_ptr + offs, x * sig, mask=mask)


def triton_swish(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    BLOCK_SIZE = 1024
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    swish_kernel[grid](x, y, n, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return triton_swish(x)
