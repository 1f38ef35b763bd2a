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
the reference cannot run at the new sizes, the judge uses the task's own (see `Judge.trial_inputs`).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from types import CodeType, ModuleType

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
