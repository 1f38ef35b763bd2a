"""The seed operators task synthesis chains into fused programs, with the shape and dtype rules to chain them.

Each `SeedOp` says which running tensors it accepts (rank, layout, dtype) and has an `emit` function that,
given the program so far (`shapes.Program`), returns the `Step` it adds: __init__ lines, the forward
statement, the output tensor, its cost as size expressions and the constraints its sizes must keep. An
operator that does not fit the current tensor (a dimension too small, a magnitude the dtype cannot hold)
returns None and the composer picks another. Every operator is deterministic: nothing random runs in
forward (no dropout), and BatchNorm in training mode (KernelBench's default) normalizes by batch statistics.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from cuda_agent_mcp.synth.candidate import VendorClass
from cuda_agent_mcp.synth.shapes import DTypeName, Layout, Program, Step, Tensor, paren, product

Family = Literal[
    "elementwise",
    "activation",
    "reduction",
    "normalization",
    "gemm",
    "conv",
    "pooling",
    "attention",
    "scan",
    "loss",
]
FAMILIES: tuple[Family, ...] = (
    "elementwise",
    "activation",
    "reduction",
    "normalization",
    "gemm",
    "conv",
    "pooling",
    "attention",
    "scan",
    "loss",
)
ALL_DTYPES: frozenset[DTypeName] = frozenset({"float32", "float16", "bfloat16"})
ANY_LAYOUT: frozenset[Layout] = frozenset({"channels", "features"})
Emit = Callable[[Program], Step | None]


@dataclass(frozen=True)
class SeedOp:
    """One seed operator. `ranks` and `layouts` say which running tensors it reads; `start` the input
    shapes it may open a chain with ((rank, layout) pairs; empty: any it reads); `terminal` ones (losses)
    only end a chain."""

    name: str
    family: Family
    vendor_class: VendorClass
    ranks: frozenset[int]
    emit: Emit
    layouts: frozenset[Layout] = ANY_LAYOUT
    dtypes: frozenset[DTypeName] = ALL_DTYPES
    terminal: bool = False
    start: tuple[tuple[int, Layout], ...] = ()

    def accepts(self, x: Tensor, dtype: DTypeName) -> bool:
        return x.rank in self.ranks and x.layout in self.layouts and dtype in self.dtypes

    def start_shapes(self) -> tuple[tuple[int, Layout], ...]:
        """The (rank, layout) pairs a chain may open with, in a fixed order."""
        if self.start:
            return self.start
        pairs: list[tuple[int, Layout]] = []
        for rank in sorted(self.ranks):
            for layout in sorted(self.layouts):
                if (layout == "features" and 2 <= rank <= 4) or (layout == "channels" and 3 <= rank <= 5):
                    pairs.append((rank, layout))
        return tuple(pairs)


# -- helpers ---------------------------------------------------------------------------------------------------
def _with(x: Tensor, dims: tuple[str, ...] | None = None, *, mag: float | None = None) -> Tensor:
    """`x` with new dims and/or magnitude; a tensor of rank 2 or less is a feature tensor."""
    new_dims = x.dims if dims is None else dims
    layout: Layout = x.layout if len(new_dims) >= 3 else "features"
    return Tensor(new_dims, layout, x.mag if mag is None else mag)


def _natural_dim(x: Tensor) -> int:
    """The dimension a softmax-like operator runs over: channels for an image, the last one otherwise."""
    return 1 if x.layout == "channels" else x.rank - 1


def _dim_arg(x: Tensor, dim: int) -> str:
    return "-1" if dim == x.rank - 1 and x.layout == "features" else str(dim)


# -- elementwise and activations --------------------------------------------------------------------------
def _unary(
    name: str,
    family: Family,
    call: str,
    *,
    mag: Callable[[float], float] = lambda m: m,
    flops: int = 1,
) -> SeedOp:
    """An operator applied to every element: `call` is the expression of `x`."""

    def emit(p: Program) -> Step | None:
        out_mag = mag(p.x.mag)
        if not p.fits(out_mag):
            return None
        return Step(forward=f"x = {call}", out=_with(p.x, mag=out_mag), flops=f"{flops} * {p.x.numel}")

    return SeedOp(name, family, "other", frozenset({1, 2, 3, 4, 5}), emit)


def _scalar(
    name: str, symbol: str, values: tuple[float, ...], mag: Callable[[float, float], float]
) -> SeedOp:
    """x <symbol> a constant, as KernelBench writes scaling and shifting."""

    def emit(p: Program) -> Step | None:
        value = p.rng.choice(values)
        out_mag = mag(p.x.mag, value)
        if not p.fits(out_mag):
            return None
        return Step(forward=f"x = x {symbol} {value!r}", out=_with(p.x, mag=out_mag), flops=p.x.numel)

    return SeedOp(name, "elementwise", "other", frozenset({1, 2, 3, 4, 5}), emit)


def _emit_bias(p: Program) -> Step | None:
    """x + a learned bias: one per channel (C, 1, 1) for an image, one per feature otherwise."""
    x = p.x
    if x.layout == "channels":
        channels = p.arg(x.dims[1], "out_channels")
        shape = ", ".join([channels] + ["1"] * (x.rank - 2))
        numel = x.dims[1]
    else:
        shape = p.arg(x.dims[-1], "out_features")
        numel = x.dims[-1]
    attr = p.attribute("bias")
    return Step(
        forward=f"x = x + self.{attr}",
        out=_with(x, mag=x.mag + 4.5),
        init_lines=(f"self.{attr} = nn.Parameter(torch.randn({shape}{p.dtype_kw}))",),
        flops=x.numel,
        param_numel=numel,
    )


def _emit_clamp(p: Program) -> Step | None:
    low, high = p.rng.choice(((-1.0, 1.0), (0.0, 6.0), (-0.5, 0.5), (0.0, 1.0)))
    return Step(
        forward=f"x = torch.clamp(x, min={low!r}, max={high!r})", out=_with(p.x, mag=high), flops=p.x.numel
    )


def _emit_exp(p: Program) -> Step | None:
    if p.x.mag > 10.0:  # e^10 is already 2e4; exp of anything larger overflows half precision
        return None
    return Step(forward="x = torch.exp(x)", out=_with(p.x, mag=math.exp(p.x.mag)), flops=f"8 * {p.x.numel}")


def _softmax_like(name: str, call: str, mag: Callable[[float, int], float]) -> SeedOp:
    def emit(p: Program) -> Step | None:
        dim = _natural_dim(p.x)
        size = p.x.dims[dim]
        return Step(
            forward=f"x = {call}(x, dim={_dim_arg(p.x, dim)})",
            out=_with(p.x, mag=mag(p.x.mag, p.value(size))),
            flops=f"5 * {p.x.numel}",
            reads=2.0,
            constraints=(f"{size} >= 2",),
        )

    return SeedOp(name, "activation", "other", frozenset({2, 3, 4, 5}), emit)


# -- reductions and scans ----------------------------------------------------------------------------------
def _reduce_dim(p: Program) -> int:
    x = p.x
    if x.layout == "channels":
        return p.rng.choice([1, *range(2, x.rank)])
    return p.rng.choice([x.rank - 1, *range(1, x.rank - 1)])


def _reduction(name: str, call: str, mag: Callable[[float, int], float], extra: str = "") -> SeedOp:
    def emit(p: Program) -> Step | None:
        x = p.x
        dim = _reduce_dim(p)
        size = x.dims[dim]
        n = p.value(size)
        out_mag = mag(x.mag, n)
        if n < 2 or not p.fits(out_mag):
            return None
        keepdim = p.rng.random() < 0.5
        dims = x.dims[:dim] + (("1",) if keepdim else ()) + x.dims[dim + 1 :]
        layout: Layout = "features" if (dim == 1 and not keepdim) or len(dims) < 3 else x.layout
        return Step(
            forward=f"x = {call}(x{extra}, dim={dim}, keepdim={keepdim})",
            out=Tensor(dims, layout, out_mag),
            flops=x.numel,
            constraints=(f"{size} >= 2",),
        )

    return SeedOp(name, "reduction", "other", frozenset({2, 3, 4, 5}), emit)


def _scan(
    name: str, call: str, mag: Callable[[float, int], float | None], *, max_len: int = 1 << 20
) -> SeedOp:
    def emit(p: Program) -> Step | None:
        x = p.x
        dim = _reduce_dim(p) if x.rank >= 2 else 0
        size = x.dims[dim]
        n = p.value(size)
        out_mag = mag(x.mag, n)
        if n < 2 or n > max_len or out_mag is None or not p.fits(out_mag):
            return None
        return Step(
            forward=f"x = {call.format(dim=_dim_arg(x, dim))}",
            out=_with(x, mag=out_mag),
            flops=f"2 * {x.numel}",
            constraints=(f"{size} >= 2",),
            cpu_factor=10.0,
        )

    return SeedOp(name, "scan", "other", frozenset({2, 3, 4, 5}), emit)


def _cumprod_mag(m: float, n: int) -> float | None:
    # A product of |x| <= 1 stays bounded; of wider values only over a short dimension.
    return 1.0 if m <= 1.0 else (m**n if n <= 16 and m <= 6.0 else None)


# -- normalizations ----------------------------------------------------------------------------------------
def _norm_step(p: Program, module: str, init: str, constraint: str) -> Step:
    attr = p.attribute(module)
    return Step(
        forward=f"x = self.{attr}(x)",
        out=_with(p.x, mag=6.0),
        init_lines=(f"self.{attr} = {init}",),
        flops=f"8 * {p.x.numel}",
        reads=2.0,
        constraints=(constraint,),
    )


def _last_dim_norm(name: str, cls: str) -> SeedOp:
    def emit(p: Program) -> Step | None:
        size = p.x.dims[-1]
        features = p.arg(size, "normalized_shape")
        step = _norm_step(p, "norm", f"{cls}({features}{p.dtype_kw})", f"{size} >= 2")
        return replace(step, param_numel=f"2 * {paren(size)}")

    return SeedOp(name, "normalization", "other", frozenset({2, 3, 4}), emit, layouts=frozenset({"features"}))


def _batch_norm(name: str, ranks: frozenset[int], layouts: frozenset[Layout]) -> SeedOp:
    def emit(p: Program) -> Step | None:
        x = p.x
        channels = p.arg(x.dims[1], "num_features")
        per_channel = product(x.dims[:1] + x.dims[2:])  # training mode needs more than one value per channel
        step = _norm_step(p, "bn", f"{name}({channels}{p.dtype_kw})", f"{per_channel} >= 2")
        return replace(step, param_numel=f"4 * {paren(x.dims[1])}", reads=3.0)

    return SeedOp(name, "normalization", "other", ranks, emit, layouts=layouts)


def _emit_group_norm(p: Program) -> Step | None:
    x = p.x
    channels = p.value(x.dims[1])
    groups = [g for g in (32, 16, 8, 4, 2) if channels % g == 0 and g < channels]
    if not groups:
        return None
    num_groups = p.size_global("num_groups", "hyper", p.rng.choice(groups))
    init = f"nn.GroupNorm({p.arg(num_groups, 'num_groups')}, {p.arg(x.dims[1], 'num_channels')}{p.dtype_kw})"
    step = _norm_step(p, "group_norm", init, f"{paren(x.dims[1])} % {num_groups} == 0")
    return replace(step, param_numel=f"2 * {paren(x.dims[1])}")


def _instance_norm(rank: int) -> SeedOp:
    name = f"nn.InstanceNorm{rank - 2}d"

    def emit(p: Program) -> Step | None:
        x = p.x
        init = f"{name}({p.arg(x.dims[1], 'num_features')}{p.dtype_kw})"
        return _norm_step(p, "instance_norm", init, f"{product(x.dims[2:])} >= 2")

    return SeedOp(name, "normalization", "other", frozenset({rank}), emit, layouts=frozenset({"channels"}))


# -- gemm --------------------------------------------------------------------------------------------------
_FEATURES = (256, 512, 1024, 2048, 4096)
_MIN_K = 16  # a GEMM over fewer (a reduced, kept dimension of 1) is no GEMM worth a kernel


def _emit_linear(p: Program) -> Step | None:
    """nn.Linear on the last dimension; an image is flattened first (a classifier head)."""
    x = p.x
    if x.layout == "channels":
        in_expr, lead, call = product(x.dims[1:]), x.dims[:1], "torch.flatten(x, 1)"
        if p.value(in_expr) > 65536:
            return None
    else:
        in_expr, lead, call = x.dims[-1], x.dims[:-1], "x"
    if p.value(in_expr) < _MIN_K:
        return None
    out = p.choose_global("out_features", "feature", _FEATURES)
    attr = p.attribute("linear")
    init = f"nn.Linear({p.arg(in_expr, 'in_features')}, {p.arg(out, 'out_features')}{p.dtype_kw})"
    rows = product(lead)
    return Step(
        forward=f"x = self.{attr}({call})",
        out=Tensor((*lead, out), "features", x.mag),
        init_lines=(f"self.{attr} = {init}",),
        flops=f"2 * {rows} * {paren(in_expr)} * {out}",
        param_numel=f"{paren(in_expr)} * {out}",
    )


def _emit_matmul(p: Program) -> Step | None:
    """x @ W with a parameter W scaled by 1/sqrt(K), so the product keeps the magnitude of x."""
    x = p.x
    k_expr = x.dims[-1]
    if p.value(k_expr) < _MIN_K:
        return None
    n = p.choose_global("out_features", "feature", _FEATURES)
    k, n_arg = p.arg(k_expr, "in_features"), p.arg(n, "out_features")
    attr = p.attribute("weight")
    return Step(
        forward=f"x = torch.matmul(x, self.{attr})",
        out=Tensor((*x.dims[:-1], n), "features", x.mag),
        init_lines=(f"self.{attr} = nn.Parameter(torch.randn({k}, {n_arg}{p.dtype_kw}) / {k} ** 0.5)",),
        flops=f"2 * {x.numel} * {n}",
        param_numel=f"{paren(k_expr)} * {n}",
    )


def _emit_bmm(p: Program) -> Step | None:
    """torch.bmm with a second (B, K, N) input from get_inputs, as KernelBench's batched matmuls have."""
    x = p.x
    b, _, k = x.dims
    if p.value(k) < _MIN_K:
        return None
    out_mag = x.mag * 5.0 * math.sqrt(p.value(k))
    if not p.fits(out_mag):
        return None
    n = p.choose_global("n", "feature", (128, 256, 512, 1024))
    other = p.extra_input("y", f"torch.randn({b}, {k}, {n}{p.dtype_kw})", f"{paren(b)} * {paren(k)} * {n}")
    return Step(
        forward=f"x = torch.bmm(x, {other})",
        out=Tensor((*x.dims[:-1], n), "features", out_mag),
        flops=f"2 * {x.numel} * {n}",
    )


def _emit_bilinear(p: Program) -> Step | None:
    """nn.Bilinear of x and a second input: out[n, o] = x[n] A[o] x2[n] + b[o]."""
    x = p.x
    in1 = x.dims[-1]
    if not _MIN_K <= p.value(in1) <= 1024:
        return None
    in2 = p.choose_global("in2_features", "feature", (64, 128, 256))
    out = p.choose_global("out_features", "feature", (64, 128, 256))
    other = p.extra_input("x2", f"torch.randn({x.dims[0]}, {in2}{p.dtype_kw})", f"{paren(x.dims[0])} * {in2}")
    attr = p.attribute("bilinear")
    args = f"{p.arg(in1, 'in1_features')}, {p.arg(in2, 'in2_features')}, {p.arg(out, 'out_features')}"
    out_mag = x.mag * 5.0 * math.sqrt(p.value(in2))
    if not p.fits(out_mag):
        return None
    return Step(
        forward=f"x = self.{attr}(x, {other})",
        out=Tensor((x.dims[0], out), "features", out_mag),
        init_lines=(f"self.{attr} = nn.Bilinear({args}{p.dtype_kw})",),
        flops=f"2 * {paren(x.dims[0])} * {paren(in1)} * {in2} * {out}",
        param_numel=f"{paren(in1)} * {in2} * {out}",
        launches=3,
        cpu_factor=20.0,
    )


# -- convolutions and pooling ------------------------------------------------------------------------------
_CHANNELS = (16, 32, 64, 128, 256)


def _conv(rank: int) -> SeedOp:
    d = rank - 2
    name = f"nn.Conv{d}d"

    def emit(p: Program) -> Step | None:
        x = p.x
        in_arg = p.arg(x.dims[1], "in_channels")
        out_ch = p.choose_global("out_channels", "channel", _CHANNELS)
        out_arg = p.arg(out_ch, "out_channels")
        k = p.size_global("kernel_size", "hyper", p.rng.choice((3, 3, 5) if d < 3 else (3,)))
        kv = p.value(k)
        mode = p.rng.choice(("valid", "same", "stride2"))
        spatial = x.dims[2:]
        if mode == "valid":
            out_spatial, extra = tuple(f"{paren(s)} - {k} + 1" for s in spatial), ""
        elif mode == "same":
            out_spatial, extra = spatial, ", padding=kernel_size // 2"
        else:
            out_spatial, extra = (
                tuple(f"({s} - 1) // 2 + 1" for s in spatial),
                ", stride=2, padding=kernel_size // 2",
            )
        k_arg = p.arg(k, "kernel_size")
        extra = extra.replace("kernel_size", k_arg)
        args = f"{in_arg}, {out_arg}, {k_arg}"
        attr = p.attribute("conv")
        out = Tensor((x.dims[0], out_ch, *out_spatial), "channels", x.mag)
        return Step(
            forward=f"x = self.{attr}(x)",
            out=out,
            init_lines=(f"self.{attr} = {name}({args}{extra}{p.dtype_kw})",),
            flops=f"2 * {out.numel} * {paren(x.dims[1])} * {kv**d}",
            param_numel=f"{out_ch} * {paren(x.dims[1])} * {kv**d}",
            constraints=tuple(f"{s} >= {kv + 1}" for s in spatial),
        )

    return SeedOp(name, "conv", "conv", frozenset({rank}), emit, layouts=frozenset({"channels"}))


def _conv_transpose(rank: int) -> SeedOp:
    d = rank - 2
    name = f"nn.ConvTranspose{d}d"

    def emit(p: Program) -> Step | None:
        x = p.x
        in_arg = p.arg(x.dims[1], "in_channels")
        out_ch = p.choose_global("out_channels", "channel", _CHANNELS[:4])
        out_arg = p.arg(out_ch, "out_channels")
        k = p.size_global("kernel_size", "hyper", 3)
        stride2 = p.rng.random() < 0.6
        spatial = x.dims[2:]
        if stride2:  # kernel 3, stride 2, padding 1, output_padding 1: exactly doubles each side
            out_spatial, extra = (
                tuple(f"{paren(s)} * 2" for s in spatial),
                ", stride=2, padding=1, output_padding=1",
            )
        else:
            out_spatial, extra = spatial, ", padding=1"
        args = f"{in_arg}, {out_arg}, {p.arg(k, 'kernel_size')}"
        attr = p.attribute("conv_transpose")
        return Step(
            forward=f"x = self.{attr}(x)",
            out=Tensor((x.dims[0], out_ch, *out_spatial), "channels", x.mag),
            init_lines=(f"self.{attr} = {name}({args}{extra}{p.dtype_kw})",),
            flops=f"2 * {x.numel} * {out_ch} * {3**d}",
            param_numel=f"{out_ch} * {paren(x.dims[1])} * {3**d}",
        )

    return SeedOp(name, "conv", "conv", frozenset({rank}), emit, layouts=frozenset({"channels"}))


def _pool(kind: str, rank: int, dtypes: frozenset[DTypeName] = ALL_DTYPES) -> SeedOp:
    d = rank - 2
    name = f"nn.{kind}Pool{d}d"

    def emit(p: Program) -> Step | None:
        x = p.x
        k = p.size_global("pool_kernel_size", "hyper", p.rng.choice((2, 2, 3) if d < 3 else (2,)))
        kv = p.value(k)
        spatial = x.dims[2:]
        if any(p.value(s) < 2 * kv for s in spatial):
            return None
        attr = p.attribute(f"{kind.lower()}_pool")
        return Step(
            forward=f"x = self.{attr}(x)",
            out=_with(x, (*x.dims[:2], *(f"{paren(s)} // {k}" for s in spatial))),
            init_lines=(f"self.{attr} = nn.{kind}Pool{d}d(kernel_size={p.arg(k, 'pool_kernel_size')})",),
            flops=x.numel,
            constraints=tuple(f"{s} >= {kv}" for s in spatial),
        )

    return SeedOp(
        name, "pooling", "other", frozenset({rank}), emit, layouts=frozenset({"channels"}), dtypes=dtypes
    )


def _adaptive_pool(kind: str, rank: int) -> SeedOp:
    d = rank - 2
    name = f"nn.Adaptive{kind}Pool{d}d"

    def emit(p: Program) -> Step | None:
        x = p.x
        size = p.rng.choice((1, 1, 2, 4))
        spatial = x.dims[2:]
        if any(p.value(s) < 2 * size for s in spatial):
            return None
        attr = p.attribute("adaptive_pool")
        shape = str(size) if d == 1 else "(" + ", ".join([str(size)] * d) + ")"
        return Step(
            forward=f"x = self.{attr}(x)",
            out=_with(x, (*x.dims[:2], *([str(size)] * d))),
            init_lines=(f"self.{attr} = {name}({shape})",),
            flops=x.numel,
            constraints=tuple(f"{s} >= {size}" for s in spatial),
        )

    return SeedOp(name, "pooling", "other", frozenset({rank}), emit, layouts=frozenset({"channels"}))


# -- attention ---------------------------------------------------------------------------------------------
def _emit_sdpa(p: Program) -> Step | None:
    """Attention of x as the queries over keys and values from get_inputs, shaped like x (B, H, S, E)."""
    x = p.x
    if p.value(x.dims[-1]) > 256:  # the fused kernels stop at head dimension 256
        return None
    shape = ", ".join(x.dims)
    k = p.extra_input("k", f"torch.randn({shape}{p.dtype_kw})", x.numel)
    v = p.extra_input("v", f"torch.randn({shape}{p.dtype_kw})", x.numel)
    causal = p.rng.random() < 0.3
    b, h, s, e = (paren(d) for d in x.dims)
    return Step(
        forward=f"x = F.scaled_dot_product_attention(x, {k}, {v}{', is_causal=True' if causal else ''})",
        out=_with(x, mag=6.0),
        flops=f"4 * {b} * {h} * {s} * {s} * {e}",
        constraints=(f"{x.dims[2]} >= 2",),
    )


def _emit_mha(p: Program) -> Step | None:
    """Self-attention with nn.MultiheadAttention (batch_first, no dropout, weights not returned)."""
    x = p.x
    embed = p.value(x.dims[-1])
    heads = [h for h in (16, 8, 4) if embed % h == 0 and embed // h >= 16]
    if not heads or embed > 4096:
        return None
    num_heads = p.size_global("num_heads", "head", p.rng.choice(heads))
    attr = p.attribute("attention")
    args = f"{p.arg(x.dims[-1], 'embed_dim')}, {p.arg(num_heads, 'num_heads')}"
    n, s, e = (paren(d) for d in x.dims)
    return Step(
        forward=f"x = self.{attr}(x, x, x, need_weights=False)[0]",
        out=_with(x, mag=x.mag + 5.0),
        init_lines=(f"self.{attr} = nn.MultiheadAttention({args}, batch_first=True{p.dtype_kw})",),
        flops=f"8 * {n} * {s} * {e} * {e} + 4 * {n} * {s} * {s} * {e}",
        param_numel=f"4 * {e} * {e}",
        launches=6,
        constraints=(f"{e} % {num_heads} == 0", f"{x.dims[1]} >= 2"),
    )


# -- losses ------------------------------------------------------------------------------------------------
def _loss(
    name: str,
    targets: str,
    *,
    ranks: frozenset[int] = frozenset({1, 2, 3, 4, 5}),
    call: str = "",
    exp_inside: bool = False,
) -> SeedOp:
    """A loss of x against targets of x's shape; `targets` is a factory with `{shape}`, `{dtype}` (empty for
    float32) and `{explicit_dtype}` to fill."""

    def emit(p: Program) -> Step | None:
        if exp_inside and not p.fits(math.exp(min(p.x.mag, 700.0))):  # the loss computes exp(-y * x)
            return None
        shape = ", ".join(p.x.dims)
        creation = targets.format(shape=shape, dtype=p.dtype_kw, explicit_dtype=f", dtype=torch.{p.dtype}")
        target = p.extra_input("targets", creation, p.x.numel)
        attr = p.attribute("loss")
        return Step(
            forward=f"x = self.{attr}({call or 'x'}, {target})",
            out=Tensor((), "features", p.x.mag),
            init_lines=(f"self.{attr} = {name}()" if "(" not in name else f"self.{attr} = {name}",),
            flops=f"4 * {p.x.numel}",
            reads=2.0,
            launches=2,
        )

    return SeedOp(name.split("(")[0], "loss", "other", ranks, emit, terminal=True)


def _emit_cross_entropy(p: Program) -> Step | None:
    """Classes along dim 1: logits (N, C), or per-position logits of an image (N, C, *spatial)."""
    x = p.x
    if x.layout == "features" and x.rank > 2:
        return None
    classes = x.dims[1]
    rest = (x.dims[0], *x.dims[2:])
    shape = ", ".join(rest) + ("," if len(rest) == 1 else "")
    target = p.extra_input("targets", f"torch.randint(0, {classes}, ({shape}))", product(rest), itemsize=8)
    attr = p.attribute("loss")
    return Step(
        forward=f"x = self.{attr}(x, {target})",
        out=Tensor((), "features", 10.0),
        init_lines=(f"self.{attr} = nn.CrossEntropyLoss()",),
        flops=f"6 * {x.numel}",
        reads=2.0,
        launches=2,
        constraints=(f"{classes} >= 2",),
    )


def _pair_loss(name: str, extra: tuple[str, ...], *, target: bool) -> SeedOp:
    """A loss of x and other (N, D) inputs shaped like it (cosine embedding, triplet margin)."""

    def emit(p: Program) -> Step | None:
        x = p.x
        n, dim = x.dims
        others = [p.extra_input(hint, f"torch.randn({n}, {dim}{p.dtype_kw})", x.numel) for hint in extra]
        if target:
            others.append(p.extra_input("y", f"torch.randint(0, 2, ({n},)) * 2 - 1", n, itemsize=8))
        attr = p.attribute("loss")
        return Step(
            forward=f"x = self.{attr}(x, {', '.join(others)})",
            out=Tensor((), "features", 10.0),
            init_lines=(f"self.{attr} = {name}()",),
            flops=f"6 * {x.numel} * {len(extra) + 1}",
            reads=1.0 + len(extra),
            launches=3,
        )

    return SeedOp(name, "loss", "other", frozenset({2}), emit, layouts=frozenset({"features"}), terminal=True)


_RANDN = "torch.randn({shape}{dtype})"
_CHANNELS_ONLY: frozenset[Layout] = frozenset({"channels"})

SEED_OPS: tuple[SeedOp, ...] = (
    # elementwise
    SeedOp("torch.add", "elementwise", "other", frozenset({1, 2, 3, 4, 5}), _emit_bias),
    _scalar("torch.sub", "-", (0.5, 1.0, 0.25), lambda m, v: m + v),
    _scalar("torch.mul", "*", (0.5, 2.0, 1.5, 0.1), lambda m, v: m * v),
    _scalar("torch.div", "/", (2.0, 4.0, 0.5), lambda m, v: m / v),
    SeedOp("torch.clamp", "elementwise", "other", frozenset({1, 2, 3, 4, 5}), _emit_clamp),
    _unary("torch.abs", "elementwise", "torch.abs(x)"),
    SeedOp("torch.exp", "elementwise", "other", frozenset({1, 2, 3, 4, 5}), _emit_exp),
    _unary("torch.square", "elementwise", "torch.square(x)", mag=lambda m: m * m),
    # activations
    _unary("torch.relu", "activation", "torch.relu(x)"),
    _unary("F.gelu", "activation", "F.gelu(x)", flops=8),
    _unary("F.silu", "activation", "F.silu(x)", flops=5),
    _unary("torch.tanh", "activation", "torch.tanh(x)", mag=lambda m: 1.0, flops=5),
    _unary("torch.sigmoid", "activation", "torch.sigmoid(x)", mag=lambda m: 1.0, flops=5),
    _unary("F.softplus", "activation", "F.softplus(x)", flops=6),
    _unary("F.hardswish", "activation", "F.hardswish(x)", flops=4),
    _unary("F.leaky_relu", "activation", "F.leaky_relu(x, negative_slope=0.1)", flops=2),
    _unary("F.elu", "activation", "F.elu(x)", flops=5),
    _unary("F.mish", "activation", "F.mish(x)", flops=10),
    _unary("F.hardtanh", "activation", "F.hardtanh(x, min_val=-1.0, max_val=1.0)", mag=lambda m: 1.0),
    _unary("F.relu6", "activation", "F.relu6(x)", mag=lambda m: min(m, 6.0)),
    _unary("F.selu", "activation", "F.selu(x)", mag=lambda m: 1.06 * m + 2.0, flops=5),
    _unary("F.hardsigmoid", "activation", "F.hardsigmoid(x)", mag=lambda m: 1.0, flops=3),
    _softmax_like("torch.softmax", "torch.softmax", lambda m, n: 1.0),
    _softmax_like("torch.log_softmax", "torch.log_softmax", lambda m, n: 2.0 * m + math.log(n)),
    # reductions over one dimension
    _reduction("torch.sum", "torch.sum", lambda m, n: m * n),
    _reduction("torch.mean", "torch.mean", lambda m, n: m),
    _reduction("torch.amax", "torch.amax", lambda m, n: m),
    _reduction("torch.amin", "torch.amin", lambda m, n: m),
    _reduction("torch.logsumexp", "torch.logsumexp", lambda m, n: m + math.log(n)),
    _reduction("torch.norm", "torch.norm", lambda m, n: m * math.sqrt(n), extra=", p=2"),
    _reduction("torch.var", "torch.var", lambda m, n: m * m),
    # normalizations
    _last_dim_norm("nn.LayerNorm", "nn.LayerNorm"),
    _last_dim_norm("nn.RMSNorm", "nn.RMSNorm"),
    _batch_norm("nn.BatchNorm1d", frozenset({2, 3}), ANY_LAYOUT),
    _batch_norm("nn.BatchNorm2d", frozenset({4}), _CHANNELS_ONLY),
    _batch_norm("nn.BatchNorm3d", frozenset({5}), _CHANNELS_ONLY),
    SeedOp(
        "nn.GroupNorm",
        "normalization",
        "other",
        frozenset({3, 4, 5}),
        _emit_group_norm,
        layouts=_CHANNELS_ONLY,
    ),
    _instance_norm(3),
    _instance_norm(4),
    _instance_norm(5),
    # gemm
    SeedOp(
        "nn.Linear",
        "gemm",
        "gemm",
        frozenset({2, 3, 4, 5}),
        _emit_linear,
        start=((2, "features"), (3, "features")),
    ),
    SeedOp(
        "torch.matmul", "gemm", "gemm", frozenset({2, 3, 4}), _emit_matmul, layouts=frozenset({"features"})
    ),
    SeedOp("torch.bmm", "gemm", "gemm", frozenset({3}), _emit_bmm, layouts=frozenset({"features"})),
    SeedOp("nn.Bilinear", "gemm", "gemm", frozenset({2}), _emit_bilinear, layouts=frozenset({"features"})),
    # convolutions
    _conv(3),
    _conv(4),
    _conv(5),
    _conv_transpose(3),
    _conv_transpose(4),
    _conv_transpose(5),
    # pooling
    _pool("Max", 3),
    _pool("Max", 4),
    _pool("Max", 5),
    _pool("Avg", 3),
    _pool("Avg", 4),
    # The CPU has no half-precision avg_pool3d, and every candidate is checked on a CPU first.
    _pool("Avg", 5, frozenset({"float32"})),
    _adaptive_pool("Avg", 3),
    _adaptive_pool("Avg", 4),
    _adaptive_pool("Max", 4),
    # attention
    SeedOp(
        "F.scaled_dot_product_attention",
        "attention",
        "gemm",
        frozenset({4}),
        _emit_sdpa,
        layouts=frozenset({"features"}),
    ),
    SeedOp(
        "nn.MultiheadAttention",
        "attention",
        "gemm",
        frozenset({3}),
        _emit_mha,
        layouts=frozenset({"features"}),
    ),
    # scans
    _scan("torch.cumsum", "torch.cumsum(x, dim={dim})", lambda m, n: m * n),
    _scan("torch.cumprod", "torch.cumprod(x, dim={dim})", _cumprod_mag),
    _scan("torch.cummax", "torch.cummax(x, dim={dim}).values", lambda m, n: m),
    _scan("torch.logcumsumexp", "torch.logcumsumexp(x, dim={dim})", lambda m, n: m + math.log(n)),
    # losses: they end a chain
    _loss("nn.MSELoss", _RANDN),
    _loss("nn.L1Loss", _RANDN),
    _loss("nn.SmoothL1Loss", _RANDN),
    _loss("nn.HuberLoss(delta=0.5)", _RANDN),
    _loss("nn.BCEWithLogitsLoss", "torch.rand({shape}{dtype})"),
    _loss("nn.SoftMarginLoss", "torch.randint(0, 2, ({shape},){explicit_dtype}) * 2 - 1", exp_inside=True),
    _loss(
        "nn.KLDivLoss(reduction='batchmean')",
        "torch.softmax(torch.randn({shape}{dtype}), dim=-1)",
        ranks=frozenset({2, 3, 4, 5}),
        call="torch.log_softmax(x, dim=-1)",
    ),
    SeedOp(
        "nn.CrossEntropyLoss", "loss", "other", frozenset({2, 3, 4, 5}), _emit_cross_entropy, terminal=True
    ),
    _pair_loss("nn.CosineEmbeddingLoss", ("x2",), target=True),
    _pair_loss("nn.TripletMarginLoss", ("positive", "negative"), target=False),
)

_BY_NAME = {op.name: op for op in SEED_OPS}


def seed_op(name: str) -> SeedOp:
    """The registry's operator called `name` ("nn.Conv2d", "torch.relu"); ValueError if there is none."""
    op = _BY_NAME.get(name)
    if op is None:
        raise ValueError(f"unknown seed operator {name!r}; known: {', '.join(sorted(_BY_NAME))}")
    return op
