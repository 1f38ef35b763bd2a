import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_stats_kernel(x_ptr, mean_ptr, m2_ptr, N, n_chunks, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    # A row (the normalized_shape, 4M elements in KernelBench) is cut into chunks so the whole GPU
    # works on few rows. Each program stores its chunk's mean and sum of squared deviations (M2),
    # computed in two passes over the chunk (no E[x^2] - E[x]^2 cancellation).
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    start = chunk.to(tl.int64) * CHUNK
    count = tl.minimum(N - start, CHUNK).to(tl.float32)
    base = x_ptr + row * N + start
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, CHUNK, BLOCK):
        offs = c0 + cols
        acc += tl.load(base + offs, mask=(start + offs) < N, other=0.0)
    mean = tl.sum(acc, axis=0) / count
    acc2 = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, CHUNK, BLOCK):
        offs = c0 + cols
        m = (start + offs) < N
        d = tl.where(m, tl.load(base + offs, mask=m, other=0.0) - mean, 0.0)
        acc2 += d * d
    tl.store(mean_ptr + row * n_chunks + chunk, mean)
    tl.store(m2_ptr + row * n_chunks + chunk, tl.sum(acc2, axis=0))


@triton.jit
def layernorm_apply_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    mean_ptr,
    m2_ptr,
    N,
    n_chunks,
    eps,
    CHUNK: tl.constexpr,
    BLOCK: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    # Combine the row's chunk statistics (Chan et al.: M2 = sum(M2_i + n_i (mean_i - mean)^2)).
    # Every program redoes this small combine instead of a third launch.
    cidx = tl.arange(0, BLOCK_C)
    s = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for c0 in range(0, n_chunks, BLOCK_C):
        ci = c0 + cidx
        cm = ci < n_chunks
        cnt = tl.minimum(N - ci.to(tl.int64) * CHUNK, CHUNK).to(tl.float32)
        s += tl.where(cm, tl.load(mean_ptr + row * n_chunks + ci, mask=cm, other=0.0) * cnt, 0.0)
    mean = tl.sum(s, axis=0) / N
    q = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for c0 in range(0, n_chunks, BLOCK_C):
        ci = c0 + cidx
        cm = ci < n_chunks
        cnt = tl.minimum(N - ci.to(tl.int64) * CHUNK, CHUNK).to(tl.float32)
        mu = tl.load(mean_ptr + row * n_chunks + ci, mask=cm, other=0.0)
        m2 = tl.load(m2_ptr + row * n_chunks + ci, mask=cm, other=0.0)
        q += tl.where(cm, m2 + cnt * (mu - mean) * (mu - mean), 0.0)
    var = tl.sum(q, axis=0) / N
    rstd = 1.0 / tl.sqrt_rn(var + eps)

    start = chunk.to(tl.int64) * CHUNK
    cols = tl.arange(0, BLOCK)
    for c0 in range(0, CHUNK, BLOCK):
        offs = start + c0 + cols
        m = offs < N
        x = tl.load(x_ptr + row * N + offs, mask=m, other=0.0)
        w = tl.load(w_ptr + offs, mask=m, other=0.0)
        b = tl.load(b_ptr + offs, mask=m, other=0.0)
        tl.store(y_ptr + row * N + offs, (x - mean) * rstd * w + b, mask=m)


def triton_layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.contiguous()
    weight = weight.contiguous()
    bias = bias.contiguous()
    N = weight.numel()
    rows = x.numel() // N
    y = torch.empty_like(x)
    BLOCK = min(1024, triton.next_power_of_2(N))
    CHUNK = BLOCK * min(8, triton.cdiv(N, BLOCK))
    n_chunks = triton.cdiv(N, CHUNK)
    chunk_mean = torch.empty((rows, n_chunks), device=x.device, dtype=torch.float32)
    chunk_m2 = torch.empty((rows, n_chunks), device=x.device, dtype=torch.float32)
    grid = (rows, n_chunks)
    layernorm_stats_kernel[grid](x, chunk_mean, chunk_m2, N, n_chunks, CHUNK=CHUNK, BLOCK=BLOCK, num_warps=4)
    BLOCK_C = min(1024, triton.next_power_of_2(n_chunks))
    layernorm_apply_kernel[grid](
        x,
        weight,
        bias,
        y,
        chunk_mean,
        chunk_m2,
        N,
        n_chunks,
        eps,
        CHUNK=CHUNK,
        BLOCK=BLOCK,
        BLOCK_C=BLOCK_C,
        num_warps=4,
    )
    return y


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        # Kept as the holder of weight and bias so the reference's state_dict loads.
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return triton_layernorm(x, self.ln.weight, self.ln.bias, self.ln.eps)
