"""The symbolic tensors and the program under construction that seed operators read and extend.

A dimension is a Python expression over the program's module-level size globals ("batch_size",
"height - kernel_size + 1"), never a bare number: the same expression is written into the code
(get_inputs, get_init_inputs), evaluated for the cost model, and re-evaluated when the CPU run
overrides some globals, so every shape stays consistent with every parameter at any sizes.
"""

from __future__ import annotations

import copy
import math
import random
import re
from dataclasses import dataclass, field
from functools import lru_cache
from types import CodeType
from typing import Literal

Layout = Literal["channels", "features"]
"""channels: (N, C, *spatial), what convolutions, pools and channel norms read; features: (..., F)."""
DTypeName = Literal["float32", "float16", "bfloat16"]
Role = Literal["batch", "channel", "spatial", "seq", "feature", "head", "hyper"]
"""What a size global measures; batch, spatial, seq, channel and feature globals may be scaled."""

SCALABLE_ROLES: tuple[Role, ...] = ("batch", "spatial", "seq", "channel", "feature")
ITEMSIZE: dict[DTypeName, int] = {"float32": 4, "float16": 2, "bfloat16": 2}
# The largest magnitude a dtype holds; a chain whose rough magnitude would pass it is refused.
MAX_MAGNITUDE: dict[DTypeName, float] = {"float32": 1e30, "float16": 3e4, "bfloat16": 1e30}

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def paren(expr: str) -> str:
    """`expr` safe to use as an operand: bare names and numbers as they are, anything else in parentheses."""
    return expr if _IDENTIFIER.fullmatch(expr) or expr.isdigit() else f"({expr})"


def product(exprs: tuple[str, ...] | list[str]) -> str:
    """The product of dimension expressions as one expression ("1" for none)."""
    return " * ".join(paren(e) for e in exprs) if exprs else "1"


@lru_cache(maxsize=8192)
def _compiled(expr: str) -> CodeType:
    return compile(expr, "<size>", "eval")


def evaluate(expr: str, sizes: dict[str, int]) -> int:
    """The value of a size expression the composer wrote, at `sizes` (names only, no builtins)."""
    value = eval(_compiled(expr), {"__builtins__": {}}, dict(sizes))  # only expressions the composer wrote
    return int(value)


@dataclass(frozen=True)
class Tensor:
    """The running activation `x`: its dimensions as expressions, its layout and a rough magnitude
    (about the largest |x|), which keeps exp, cumprod and sums from overflowing the dtype."""

    dims: tuple[str, ...]
    layout: Layout
    mag: float = 5.0

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def numel(self) -> str:
        return product(self.dims)


@dataclass(frozen=True)
class ExtraInput:
    """A second forward argument (loss targets, the other bmm operand): its name and how get_inputs makes it."""

    name: str
    creation: str
    numel: str
    itemsize: int


@dataclass(frozen=True)
class Step:
    """What one operator adds to the program. `flops` and `param_numel` are size expressions;
    `reads` is how many passes over the input the eager kernels make (2 for a norm's statistics);
    `launches` how many kernels it starts; `constraints` boolean size expressions that must hold at
    any sizes the program is run at (divisibility, a dimension at least a kernel); `cpu_factor` how much
    slower than its flop and element counts say the operator runs on a CPU (sequential scans, bilinear)."""

    forward: str
    out: Tensor
    init_lines: tuple[str, ...] = ()
    flops: str = "0"
    param_numel: str = "0"
    reads: float = 1.0
    launches: int = 1
    constraints: tuple[str, ...] = ()
    cpu_factor: float = 1.0


@dataclass
class Program:
    """The program so far, which an operator's `emit` extends: size globals, init arguments, module
    attributes and forward inputs. Operators work on a copy (`fork`), which the composer keeps only if
    the operator applied, so a refused operator leaves nothing behind."""

    x: Tensor
    dtype: DTypeName
    rng: random.Random
    sizes: dict[str, int] = field(default_factory=dict)
    roles: dict[str, Role] = field(default_factory=dict)
    init_args: list[tuple[str, str]] = field(default_factory=list)
    attributes: list[str] = field(default_factory=list)
    inputs: list[ExtraInput] = field(default_factory=list)
    is_last: bool = False

    def fork(self) -> Program:
        """A copy to try an operator on; it shares the random generator, so trials stay deterministic."""
        twin = copy.copy(self)
        twin.sizes = dict(self.sizes)
        twin.roles = dict(self.roles)
        twin.init_args = list(self.init_args)
        twin.attributes = list(self.attributes)
        twin.inputs = list(self.inputs)
        return twin

    # -- names ---------------------------------------------------------------------------------------------
    def _taken(self) -> set[str]:
        return (
            set(self.sizes)
            | {p for p, _ in self.init_args}
            | {i.name for i in self.inputs}
            | {"x", "self", "torch", "nn", "F", "math"}
        )

    def _fresh(self, hint: str) -> str:
        taken = self._taken()
        if hint not in taken:
            return hint
        n = 2
        while f"{hint}_{n}" in taken:
            n += 1
        return f"{hint}_{n}"

    def new_global(self, hint: str, role: Role, value: int) -> str:
        """A new module-level size global; its name is `hint` or `hint_2`, `hint_3`..."""
        name = self._fresh(hint)
        self.sizes[name] = value
        self.roles[name] = role
        return name

    def choose_global(self, hint: str, role: Role, choices: tuple[int, ...]) -> str:
        return self.new_global(hint, role, self.rng.choice(choices))

    def arg(self, expr: str, hint: str) -> str:
        """The __init__ parameter that carries size expression `expr` (get_init_inputs passes `expr`)."""
        for param, bound in self.init_args:
            if bound == expr:
                return param
        # A plain global keeps its own name as the parameter (the KernelBench look); an expression gets one.
        taken_params = {p for p, _ in self.init_args}
        param = expr if expr in self.sizes and expr not in taken_params else self._fresh(hint)
        self.init_args.append((param, expr))
        return param

    def size_global(self, hint: str, role: Role, value: int) -> str:
        """A hyper-parameter global (a kernel size): an existing one of the same name stem and value is reused."""
        for name, known in self.sizes.items():
            if self.roles[name] == role and known == value and (name == hint or name.startswith(f"{hint}_")):
                return name
        return self.new_global(hint, role, value)

    def attribute(self, hint: str) -> str:
        """A fresh `self.<name>` for a module or parameter."""
        name = hint
        n = 2
        while name in self.attributes:
            name = f"{hint}{n}"
            n += 1
        self.attributes.append(name)
        return name

    def extra_input(self, hint: str, creation: str, numel: str, *, itemsize: int | None = None) -> str:
        """A new forward argument made in get_inputs by `creation`."""
        name = self._fresh(hint)
        size = ITEMSIZE[self.dtype] if itemsize is None else itemsize
        self.inputs.append(ExtraInput(name=name, creation=creation, numel=numel, itemsize=size))
        return name

    # -- values and dtype ------------------------------------------------------------------------------
    def value(self, expr: str) -> int:
        return evaluate(expr, self.sizes)

    @property
    def dtype_kw(self) -> str:
        """The `, dtype=...` argument for a module or a tensor factory; none for float32 (the default)."""
        return "" if self.dtype == "float32" else f", dtype=torch.{self.dtype}"

    def fits(self, mag: float) -> bool:
        """Whether values of magnitude `mag` are still finite (and not absurd) in the program's dtype."""
        return math.isfinite(mag) and mag <= MAX_MAGNITUDE[self.dtype]
