"""The programmatic composer: chain seed operators into one fused KernelBench-format program, deterministically.

As the CUDA Agent paper builds its training tasks, a composed program stacks a few seed operators into a
single computational layer (`x = op1(x)`, `x = op2(x)`...). The number of operators follows the paper's
dataset (mostly two); each next operator must accept the running tensor (rank, layout, dtype, sizes);
losses only end a chain. Sizes are then chosen so that a roofline estimate of the eager time on an H200
lands log-uniformly in 3-30 ms, and `cpu_sizes` shrink the same program for a CPU check. Everything is
drawn from `random.Random(f"{seed}/{index}")`: the same arguments give the same program in any process.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from cuda_agent_mcp.synth.candidate import Candidate
from cuda_agent_mcp.synth.ops import SEED_OPS, Family, SeedOp
from cuda_agent_mcp.synth.shapes import (
    ITEMSIZE,
    SCALABLE_ROLES,
    DTypeName,
    ExtraInput,
    Layout,
    Program,
    Role,
    Step,
    Tensor,
)

# The operator-count distribution of CUDA-Agent-Ops-6K (the paper's synthesized dataset).
PAPER_OP_COUNT_WEIGHTS: dict[int, float] = {1: 0.034, 2: 0.8377, 3: 0.0762, 4: 0.028, 5: 0.0123}

# Which family opens a chain: mostly a GEMM or a convolution, as in KernelBench level 2. The weight of a
# family is shared by its operators, so a family with many members (activations) is not drawn more often.
FIRST_FAMILY_WEIGHTS: dict[Family, float] = {
    "gemm": 3.0,
    "conv": 3.0,
    "attention": 1.0,
    "normalization": 1.0,
    "pooling": 0.7,
    "reduction": 0.5,
    "activation": 0.5,
    "elementwise": 0.5,
    "scan": 0.5,
    "loss": 0.5,
}
NEXT_FAMILY_WEIGHTS: dict[Family, float] = {
    "activation": 1.5,
    "elementwise": 1.2,
    "normalization": 1.0,
    "reduction": 0.8,
    "pooling": 0.8,
    "gemm": 0.6,
    "conv": 0.6,
    "loss": 0.5,
    "scan": 0.4,
    "attention": 0.3,
}

# The cost model: a roofline per operator plus a launch overhead. Matmuls run in plain fp32 by default
# (torch.backends.cuda.matmul.allow_tf32 is off), cuDNN convolutions in TF32 (cudnn.allow_tf32 is on).
TARGET_MS = (3.0, 30.0)
BANDWIDTH_BYTES_PER_S = 3.0e12
LAUNCH_MS = 0.010
FLOP_RATES: dict[tuple[str, DTypeName], float] = {
    ("other", "float32"): 4.0e13,
    ("other", "float16"): 4.0e13,
    ("other", "bfloat16"): 4.0e13,
    ("gemm", "float32"): 4.0e13,
    ("gemm", "float16"): 4.0e14,
    ("gemm", "bfloat16"): 4.0e14,
    ("conv", "float32"): 1.0e14,
    ("conv", "float16"): 3.0e14,
    ("conv", "bfloat16"): 3.0e14,
}
MAX_TENSOR_BYTES = 2 * 1024**3  # one tensor stays under 2 GiB

# The CPU check's budget: well under a second and 512 MB on two cores.
CPU_MAX_WORK = 2.0e8  # flops, plus CPU_WORK_PER_ELEMENT per element read or written, times an op's cpu_factor
CPU_WORK_PER_ELEMENT = 20
CPU_MAX_TENSOR_BYTES = 16 * 1024**2
CPU_MAX_TOTAL_BYTES = 256 * 1024**2
_MIN_SIZE: dict[Role, int] = {
    "batch": 2,
    "spatial": 4,
    "seq": 4,
    "channel": 4,
    "feature": 8,
    "head": 1,
    "hyper": 1,
}
_MAX_SIZE: dict[Role, int] = {"spatial": 1024, "seq": 8192, "channel": 1024, "feature": 16384}
_BATCH = "batch_size"
_ATTEMPTS = 40
_EVAL_ERRORS = (NameError, SyntaxError, TypeError, ValueError, ArithmeticError)


@dataclass(frozen=True)
class _Link:
    op: SeedOp
    x: Tensor
    step: Step


def compose_programmatic(
    seed: int,
    index: int,
    *,
    max_ops: int = 5,
    dtype: Literal["float32", "float16", "bfloat16"] = "float32",
    registry: Sequence[SeedOp] | None = None,
    count_weights: Mapping[int, float] | None = None,
) -> Candidate:
    """Compose program `index` of the run with `seed`: a chain of 1..max_ops seed operators at sizes whose
    estimated H200 eager time is 3-30 ms. ValueError for bad arguments or a registry nothing can be built from."""
    if not 1 <= max_ops <= 5:
        raise ValueError(f"max_ops must be 1..5, not {max_ops}")
    if dtype not in ITEMSIZE:
        raise ValueError(f"dtype must be one of {sorted(ITEMSIZE)}, not {dtype!r}")
    ops = [op for op in (SEED_OPS if registry is None else registry) if dtype in op.dtypes]
    rng = random.Random(f"{seed}/{index}")
    count = _draw_count(rng, PAPER_OP_COUNT_WEIGHTS if count_weights is None else count_weights, max_ops)

    built: tuple[Program, list[_Link]] | None = None
    for length in range(count, 0, -1):  # a registry too narrow for long chains still gives a shorter one
        for _ in range(_ATTEMPTS):
            built = _try_chain(rng, ops, length, dtype)
            if built is not None:
                break
        if built is not None:
            break
    if built is None:
        raise ValueError("no chain of seed operators can be composed from this registry")
    program, links = built

    plan = _Plan(links, program.inputs, dtype)
    target = math.exp(rng.uniform(math.log(TARGET_MS[0]), math.log(TARGET_MS[1])))
    sizes = _tune(plan, program.sizes, program.roles, target)
    cpu = _cpu_sizes(plan, sizes, program.roles)
    names = tuple(link.op.name for link in links)
    return Candidate(
        index=index,
        composer="programmatic",
        seed=seed,
        code=_render(program, links, sizes),
        ops=names,
        vendor_classes=tuple(link.op.vendor_class for link in links),
        cpu_sizes=cpu,
        estimate_ms=round(plan.estimate_ms(sizes), 4),
        notes={"dtype": dtype, "target_ms": f"{target:.3f}"},
    )


# -- the chain ---------------------------------------------------------------------------------------------
def _draw_count(rng: random.Random, weights: Mapping[int, float], max_ops: int) -> int:
    counts = sorted(n for n, w in weights.items() if 1 <= n <= max_ops and w > 0)
    if not counts:
        raise ValueError(f"count_weights has no positive weight for 1..{max_ops} operators")
    total = sum(weights[n] for n in counts)
    draw = rng.random() * total
    for n in counts:
        draw -= weights[n]
        if draw < 0:
            return n
    return counts[-1]


def _order(rng: random.Random, ops: Sequence[SeedOp], weights: Mapping[Family, float]) -> list[SeedOp]:
    """`ops` in a random order drawn by weight (each family's weight shared by its members)."""
    members = Counter(op.family for op in ops)
    keyed: list[tuple[float, int]] = []
    for i, op in enumerate(ops):
        weight = weights.get(op.family, 1.0) / members[op.family]
        keyed.append((rng.random() ** (1.0 / weight) if weight > 0 else 0.0, i))
    keyed.sort(key=lambda t: (-t[0], t[1]))
    return [ops[i] for _, i in keyed]


def _try_chain(
    rng: random.Random, ops: Sequence[SeedOp], length: int, dtype: DTypeName
) -> tuple[Program, list[_Link]] | None:
    """One attempt at a chain of `length` operators; None where it dead-ends."""
    openers = [op for op in ops if op.start_shapes() and (length == 1 or not op.terminal)]
    if not openers:
        return None
    first = _order(rng, openers, FIRST_FAMILY_WEIGHTS)[0]
    rank, layout = rng.choice(first.start_shapes())
    program = Program(x=Tensor((), "features"), dtype=dtype, rng=rng)
    program.x = _start_tensor(program, rank, layout)
    start = program.x
    links: list[_Link] = []
    for position in range(length):
        last = position == length - 1
        if position == 0:
            candidates = [first]
        else:
            fitting = [op for op in ops if op.accepts(program.x, dtype) and (last or not op.terminal)]
            candidates = _order(rng, fitting, NEXT_FAMILY_WEIGHTS)
        for op in candidates:
            trial = program.fork()
            trial.is_last = last
            step = op.emit(trial)
            if step is not None and _step_fits(trial, step):
                links.append(_Link(op, program.x, step))
                program = trial
                program.x = step.out
                break
        else:
            return None
    program.x = start  # the program's input, which get_inputs makes
    return program, links


def _step_fits(p: Program, step: Step) -> bool:
    """Whether a step's shapes hold at the current sizes: dims positive, constraints true, tensors in bounds."""
    try:
        if any(p.value(d) < 1 for d in step.out.dims):
            return False
        if not all(p.value(c) for c in step.constraints):
            return False
        out_bytes = p.value(step.out.numel) * ITEMSIZE[p.dtype]
        if out_bytes >= MAX_TENSOR_BYTES or p.value(step.param_numel) * ITEMSIZE[p.dtype] >= MAX_TENSOR_BYTES:
            return False
        p.value(step.flops)
    except _EVAL_ERRORS:
        return False  # an operator whose expressions do not evaluate does not apply
    return p.fits(step.out.mag)


def _start_tensor(p: Program, rank: int, layout: Layout) -> Tensor:
    """The program's input x, with fresh size globals named as KernelBench names them."""
    batch = p.new_global(_BATCH, "batch", 16)
    if layout == "channels":
        channels = p.choose_global("in_channels", "channel", (3, 16, 32, 64))
        if rank == 3:
            spatial = [p.choose_global("length", "spatial", (512, 1024, 2048, 4096))]
        elif rank == 4:
            side = p.rng.choice((32, 64, 128, 256))
            spatial = [p.new_global("height", "spatial", side), p.new_global("width", "spatial", side)]
        else:
            depth, side = p.rng.choice((8, 16, 32)), p.rng.choice((32, 64, 128))
            spatial = [
                p.new_global("depth", "spatial", depth),
                p.new_global("height", "spatial", side),
                p.new_global("width", "spatial", side),
            ]
        return Tensor((batch, channels, *spatial), "channels")
    if rank == 2:
        return Tensor(
            (batch, p.choose_global("in_features", "feature", (256, 512, 1024, 2048, 4096))), "features"
        )
    if rank == 3:
        seq = p.choose_global("seq_len", "seq", (128, 256, 512, 1024))
        return Tensor((batch, seq, p.choose_global("embed_dim", "feature", (256, 512, 1024))), "features")
    heads = p.choose_global("num_heads", "head", (8, 16))
    seq = p.choose_global("seq_len", "seq", (256, 512, 1024, 2048))
    return Tensor((batch, heads, seq, p.choose_global("head_dim", "head", (32, 64, 128))), "features")


# -- sizes and cost ----------------------------------------------------------------------------------------
class _Plan:
    """A composed chain's size-dependent quantities, compiled once and evaluated at any sizes."""

    def __init__(self, links: Sequence[_Link], inputs: Sequence[ExtraInput], dtype: DTypeName) -> None:
        self._links = list(links)
        self._inputs = list(inputs)
        self._itemsize = ITEMSIZE[dtype]
        self._dtype: DTypeName = dtype
        quantities: list[str] = []
        for link in links:
            quantities += [link.x.numel, link.step.out.numel, link.step.param_numel, link.step.flops]
        quantities += [i.numel for i in inputs]
        dims = sorted({d for link in links for d in (*link.x.dims, *link.step.out.dims)})
        checks = [c for link in links for c in link.step.constraints] + [f"({d}) >= 1" for d in dims]
        self._quantities = compile("(" + "".join(f"({q})," for q in quantities) + ")", "<plan>", "eval")
        self._checks = compile("(" + "".join(f"bool({c})," for c in checks) + ")", "<checks>", "eval")

    def _values(self, sizes: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(int(v) for v in eval(self._quantities, {"__builtins__": {"bool": bool}}, dict(sizes)))

    def valid(self, sizes: Mapping[str, int]) -> bool:
        """Whether every constraint holds and every dimension is positive at `sizes`."""
        try:
            return all(eval(self._checks, {"__builtins__": {"bool": bool}}, dict(sizes)))
        except _EVAL_ERRORS:
            return False

    def _per_link(self, sizes: Mapping[str, int]) -> tuple[list[tuple[int, int, int, int]], list[int]]:
        values = self._values(sizes)
        n = len(self._links)
        rows = [(values[4 * i], values[4 * i + 1], values[4 * i + 2], values[4 * i + 3]) for i in range(n)]
        return rows, list(values[4 * n :])

    def estimate_ms(self, sizes: Mapping[str, int]) -> float:
        """The roofline estimate of the eager time on an H200, in milliseconds."""
        rows, extras = self._per_link(sizes)
        total = (
            sum(numel * i.itemsize for numel, i in zip(extras, self._inputs, strict=True))
            / BANDWIDTH_BYTES_PER_S
        )
        for link, (numel_in, numel_out, params, flops) in zip(self._links, rows, strict=True):
            moved = (link.step.reads * numel_in + numel_out + params) * self._itemsize
            rate = FLOP_RATES[(link.op.vendor_class, self._dtype)]
            total += moved / BANDWIDTH_BYTES_PER_S + flops / rate
        launches = sum(link.step.launches for link in self._links)
        return total * 1e3 + launches * LAUNCH_MS

    def tensor_bytes(self, sizes: Mapping[str, int]) -> list[int]:
        """The bytes of every tensor the program holds (activations, parameters, inputs), in a fixed order."""
        rows, extras = self._per_link(sizes)
        sizes_out = [
            n * self._itemsize
            for numel_in, numel_out, params, _ in rows
            for n in (numel_in, numel_out, params)
        ]
        return sizes_out + [numel * i.itemsize for numel, i in zip(extras, self._inputs, strict=True)]

    def fits_cpu(self, sizes: Mapping[str, int]) -> bool:
        """Whether the program at `sizes` runs well under a second and 512 MB on two CPU cores."""
        rows, _ = self._per_link(sizes)
        tensors = self.tensor_bytes(sizes)
        work = sum(
            (flops + CPU_WORK_PER_ELEMENT * (numel_in + numel_out)) * link.step.cpu_factor
            for link, (numel_in, numel_out, _, flops) in zip(self._links, rows, strict=True)
        )
        return (
            work <= CPU_MAX_WORK
            and max(tensors) <= CPU_MAX_TENSOR_BYTES
            and sum(tensors) <= CPU_MAX_TOTAL_BYTES
        )


def _nice(value: float) -> int:
    """A batch size rounded as a person would write it (a multiple of 32, 8 or 1 by magnitude)."""
    step = 32 if value >= 256 else 8 if value >= 32 else 1
    return max(step, round(value / step) * step)


def _fit_batch(plan: _Plan, sizes: dict[str, int], target: float) -> dict[str, int]:
    """`sizes` with the batch size that brings the estimate nearest `target`, within the tensor bound.

    Cost and tensor sizes are affine in the batch size, so two evaluations give both lines."""
    b0 = sizes[_BATCH]
    low, high = {**sizes, _BATCH: b0}, {**sizes, _BATCH: 2 * b0}
    e1, e2 = plan.estimate_ms(low), plan.estimate_ms(high)
    slope = (e2 - e1) / b0
    wanted = (target - (e1 - slope * b0)) / slope if slope > 0 else float(b0)
    cap = float("inf")
    for t1, t2 in zip(plan.tensor_bytes(low), plan.tensor_bytes(high), strict=True):
        per = (t2 - t1) / b0
        if per > 0:
            cap = min(cap, (MAX_TENSOR_BYTES - 1 - (t1 - per * b0)) / per)
    batch = _nice(max(2.0, min(wanted, 1 << 24)))
    if batch > cap:  # round down to the bound instead
        step = 32 if cap >= 256 else 8 if cap >= 32 else 1
        batch = int(cap // step) * step
    fitted = {**sizes, _BATCH: max(2, batch)}
    return fitted if plan.valid(fitted) else sizes


def _scaled(
    plan: _Plan, sizes: dict[str, int], roles: Mapping[str, Role], *, grow: bool, names: Sequence[str]
) -> dict[str, int] | None:
    """`sizes` with one of `names` doubled (grow) or halved, the first in order that keeps the program valid."""
    for name in names:
        value = sizes[name] * 2 if grow else sizes[name] // 2
        if value < _MIN_SIZE[roles[name]] or value > _MAX_SIZE.get(roles[name], 1 << 30):
            continue
        trial = {**sizes, name: value}
        if plan.valid(trial) and max(plan.tensor_bytes({**trial, _BATCH: 2})) < MAX_TENSOR_BYTES:
            return trial
    return None


def _tune(plan: _Plan, sizes: dict[str, int], roles: Mapping[str, Role], target: float) -> dict[str, int]:
    """Sizes whose estimate is near `target`: the batch size first, then the other scalable globals."""
    sizes = _fit_batch(plan, dict(sizes), target)
    grow = plan.estimate_ms(sizes) < target
    others = [n for n in sizes if roles[n] in SCALABLE_ROLES and n != _BATCH]
    for _ in range(12):
        estimate = plan.estimate_ms(sizes)
        if abs(math.log(estimate / target)) < math.log(1.25) or (estimate < target) != grow:
            break
        order = sorted(others, key=lambda n: (sizes[n] if grow else -sizes[n], n))
        trial = _scaled(plan, sizes, roles, grow=grow, names=order)
        if trial is None:
            break
        trial = _fit_batch(plan, trial, target)
        if grow and plan.estimate_ms(trial) <= estimate * 1.01:
            break  # bound by the tensor size: growing a dimension only shrinks the batch
        sizes = trial
    return sizes


def _cpu_sizes(plan: _Plan, sizes: dict[str, int], roles: Mapping[str, Role]) -> dict[str, int]:
    """Overrides that shrink the program for a CPU run: the largest scalable global halved, again and again."""
    cpu = dict(sizes)
    scalable = [n for n in sizes if roles[n] in SCALABLE_ROLES]
    for _ in range(256):
        if plan.fits_cpu(cpu):
            break
        trial = _scaled(plan, cpu, roles, grow=False, names=sorted(scalable, key=lambda n: (-cpu[n], n)))
        if trial is None:
            break
        cpu = trial
    return {n: v for n, v in cpu.items() if v != sizes[n]}


# -- the code ----------------------------------------------------------------------------------------------
def _render(program: Program, links: Sequence[_Link], sizes: Mapping[str, int]) -> str:
    """The KernelBench-format model.py of a chain at `sizes`."""
    init_lines = [line for link in links for line in link.step.init_lines]
    forward = [link.step.forward for link in links]
    uses_f = any("F." in line for line in (*init_lines, *forward))
    names = [link.op.name for link in links]
    summary = names[0] if len(names) == 1 else ", then ".join(names)
    params = "".join(f", {p}" for p, _ in program.init_args)
    inputs = "".join(f", {i.name}" for i in program.inputs)
    tensors = [
        f"torch.randn({', '.join(program.x.dims)}{program.dtype_kw})",
        *(i.creation for i in program.inputs),
    ]
    lines = ["import torch", "import torch.nn as nn"]
    if uses_f:
        lines.append("import torch.nn.functional as F")
    lines += [
        "",
        "",
        "class Model(nn.Module):",
        f'    """Applies {summary}."""',
        "",
        f"    def __init__(self{params}):",
        "        super().__init__()",
        *(f"        {line}" for line in init_lines),
        "",
        f"    def forward(self, x{inputs}):",
        *(f"        {line}" for line in forward),
        "        return x",
        "",
        "",
        *(f"{name} = {sizes[name]}" for name in program.sizes),
        "",
        "",
        "def get_inputs():",
        *_return_list(tensors),
        "",
        "",
        "def get_init_inputs():",
        f"    return [{', '.join(expr for _, expr in program.init_args)}]",
        "",
    ]
    return "\n".join(lines)


def _return_list(items: Sequence[str]) -> list[str]:
    """`return [a, b]` on one line where it fits, one item a line otherwise."""
    one_line = f"    return [{', '.join(items)}]"
    if len(one_line) <= 100:
        return [one_line]
    return ["    return [", *(f"        {item}," for item in items), "    ]"]
