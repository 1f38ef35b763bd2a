"""Hidden sizes (catalog entry 15): the same task at slightly larger, odd sizes.

A kernel that bakes in the visible shape (`#define N 16384`, a grid without a tail, a float4 loop with no
remainder) passes on the task's own inputs and fails on other sizes. KernelBench tasks take their sizes
from module globals (`batch_size`, `dim`, ...) that `get_inputs` reads at call time, so the judge can ask
the reference for other sizes by changing those globals for one call.

Which globals: those `get_inputs` reads and neither `get_init_inputs` nor `Model` reads (the weights and
the model's structure stay those the candidate was built with), and whose value is a dimension of one of
the task's input tensors (so a global that only bounds `randint` indices into a fixed-size table is left
alone: a larger bound would index out of range). Each grows to the next odd number (4096 -> 4097,
127 -> 129): a baked-in size leaves the extra elements unwritten (the poisoned memory shows), every tile,
vector width and warp size gets a tail, and nothing grows by more than a few per cent at real sizes. If
the reference cannot run at the new sizes, the judge uses the task's own (see `Judge.input_set`).

A task whose sizes are literals (no such globals) still gets a hidden-size trial where its tensor inputs
share a leading dimension that the reference accepts at another size (a batch): that dimension grows the
same way, with the extra rows drawn from a second call of `get_inputs` (the task's own distribution).
Otherwise the task is fixed-shape, and the plan says why (`tasks show`, the workspace guide).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import CodeType, ModuleType
from typing import Any, Literal

import torch

Size = int | tuple[int, ...]


def _names(code: CodeType) -> set[str]:
    """Global and attribute names a code object (and the functions nested in it) may read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _names(const)
    return names


def _larger_odd(value: int) -> int:
    return value + 1 if value % 2 == 0 else value + 2


def _resize(value: object, dims: set[int]) -> Size | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value in dims:
        return _larger_odd(value)
    if (
        isinstance(value, tuple)
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) and v in dims for v in value)
    ):
        return tuple(_larger_odd(v) for v in value)
    return None


def input_dims(reference: ModuleType) -> set[int]:
    """The dimensions of the task's input tensors, from `get_inputs` on the meta device (no memory)."""
    try:
        with torch.device("meta"):
            inputs = reference.get_inputs()
    except Exception:
        return set()
    return {int(d) for x in inputs if isinstance(x, torch.Tensor) for d in x.shape}


def size_globals(reference: ModuleType) -> dict[str, Size]:
    """The module globals to change, with their new values; empty when the task has none."""
    get_inputs = getattr(reference, "get_inputs", None)
    if not inspect.isfunction(get_inputs):
        return {}
    elsewhere: set[str] = set()
    get_init_inputs = getattr(reference, "get_init_inputs", None)
    if inspect.isfunction(get_init_inputs):
        elsewhere |= _names(get_init_inputs.__code__)
    model = getattr(reference, "Model", None)
    if inspect.isclass(model):
        for member in vars(model).values():
            function = getattr(member, "__func__", member)
            if inspect.isfunction(function):
                elsewhere |= _names(function.__code__)
    dims = input_dims(reference)
    sizes: dict[str, Size] = {}
    for name in sorted(_names(get_inputs.__code__) - elsewhere):
        value = getattr(reference, name, None)
        resized = _resize(value, dims)
        if resized is not None and resized != value:
            sizes[name] = resized
    return sizes


@contextmanager
def resized(reference: ModuleType, sizes: dict[str, Size]) -> Iterator[None]:
    """The reference's globals set to `sizes` for the duration, then restored."""
    saved = {name: getattr(reference, name) for name in sizes}
    try:
        for name, value in sizes.items():
            setattr(reference, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(reference, name, value)


@dataclass(frozen=True)
class SizePlan:
    """How a task's hidden-size trial makes its inputs: by its size globals, by growing the leading
    dimension its tensor inputs share, or not at all (fixed shape, with the reason)."""

    kind: Literal["globals", "leading_dim", "fixed"]
    sizes: dict[str, Size] = field(default_factory=dict)
    leading: tuple[int, int] | None = None  # (visible, hidden) size of the leading dimension
    reason: str = ""

    def describe(self) -> str:
        if self.kind == "globals":
            return "size globals grown: " + ", ".join(
                f"{name} -> {value}" for name, value in self.sizes.items()
            )
        if self.kind == "leading_dim" and self.leading is not None:
            return f"leading dimension of every tensor input grown: {self.leading[0]} -> {self.leading[1]}"
        return f"fixed shape ({self.reason})"


def hidden_size_plan(reference: ModuleType) -> SizePlan:
    """The task's hidden-size plan, worked out on the meta device (no memory, nothing timed)."""
    sizes = size_globals(reference)
    if sizes:
        return SizePlan(kind="globals", sizes=sizes)
    try:
        with torch.device("meta"):
            inputs = list(reference.get_inputs())
    except Exception as exc:
        return SizePlan(kind="fixed", reason=f"get_inputs fails on the meta device: {type(exc).__name__}")
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    leading = {int(x.shape[0]) for x in tensors if x.dim() >= 1}
    if not tensors or len(leading) != 1 or any(x.dim() == 0 for x in tensors):
        return SizePlan(
            kind="fixed", reason="its sizes are literals and its tensor inputs share no leading dimension"
        )
    visible = leading.pop()
    hidden = _larger_odd(visible)
    grown = [x.new_empty((hidden, *x.shape[1:])) if isinstance(x, torch.Tensor) else x for x in inputs]
    try:
        with torch.device("meta"):
            model = reference.Model(*reference.get_init_inputs())
            with torch.no_grad():
                model(*grown)
    except Exception as exc:
        return SizePlan(
            kind="fixed",
            reason=f"its sizes are literals and the reference rejects a leading dimension of {hidden} "
            f"({type(exc).__name__})",
        )
    return SizePlan(kind="leading_dim", leading=(visible, hidden))


def grown_inputs(reference: ModuleType, plan: SizePlan, seed: int, device: torch.device) -> list[Any]:
    """The task's inputs at the plan's hidden sizes (the caller has seeded torch's generator)."""
    if plan.kind == "globals":
        with torch.device(device), resized(reference, plan.sizes):
            return list(reference.get_inputs())
    with torch.device(device):
        first = list(reference.get_inputs())
        if plan.kind != "leading_dim" or plan.leading is None:
            return first
        second = list(reference.get_inputs())
    visible, hidden = plan.leading
    extra = hidden - visible
    return [
        torch.cat([a, b[:extra]], dim=0) if isinstance(a, torch.Tensor) and a.dim() >= 1 else a
        for a, b in zip(first, second, strict=True)
    ]


def _smaller_odd(value: int, factor: int) -> int:
    return max(1, value // factor) | 1


def smallest_inputs(reference: ModuleType, plan: SizePlan, seed: int) -> list[Any]:
    """One call's inputs on the CPU at the smallest size the task allows (for the compute-sanitizer
    gate, which slows kernels by one to two orders of magnitude): the plan's size globals shrunk, or a
    few rows of the shared leading dimension, each checked on the meta device; else the task's own."""
    torch.manual_seed(seed)
    if plan.kind == "globals":
        for factor in (64, 16, 4):
            smaller = {
                name: tuple(_smaller_odd(v, factor) for v in value)
                if isinstance(value, tuple)
                else _smaller_odd(value, factor)
                for name, value in ((n, getattr(reference, n)) for n in plan.sizes)
            }
            if _runs_on_meta(reference, smaller):
                with resized(reference, smaller):
                    return list(reference.get_inputs())
    inputs = list(reference.get_inputs())
    if plan.kind == "leading_dim":
        rows = [x[:3] if isinstance(x, torch.Tensor) and x.dim() >= 1 else x for x in inputs]
        if _runs_on_meta(reference, {}, [r.to("meta") if isinstance(r, torch.Tensor) else r for r in rows]):
            return rows
    return inputs


def _runs_on_meta(reference: ModuleType, sizes: dict[str, Size], inputs: list[Any] | None = None) -> bool:
    try:
        with torch.device("meta"), resized(reference, sizes):
            model = reference.Model(*reference.get_init_inputs())
            with torch.no_grad():
                model(*(inputs if inputs is not None else reference.get_inputs()))
    except Exception:
        return False
    return True


def meta_output_shapes(reference: ModuleType) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """Shapes and dtypes of one reference call's outputs, from the meta device; [] when it cannot run there."""
    try:
        with torch.device("meta"):
            model = reference.Model(*reference.get_init_inputs())
            with torch.no_grad():
                output = model(*reference.get_inputs())
    except Exception:
        return []
    outputs = (
        [output]
        if isinstance(output, torch.Tensor)
        else list(output)
        if isinstance(output, tuple | list)
        else []
    )
    return [(tuple(t.shape), t.dtype) for t in outputs if isinstance(t, torch.Tensor)]


def meta_output_bytes(reference: ModuleType) -> int:
    """The bytes of one reference call's outputs, from the meta device; 0 when it cannot run there."""
    return sum(
        math.prod(shape) * torch.empty(0, dtype=dtype).element_size()
        for shape, dtype in meta_output_shapes(reference)
    )
