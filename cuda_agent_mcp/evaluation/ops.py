"""Which aten ops a candidate's forward() may dispatch (allocation, views, copies, metadata), and which
names are ATen operators at all (the static audit's vocabulary, read from the installed torch's headers)."""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path

ALLOWED_ATEN_OPS = frozenset(
    f"aten::{name}"
    for name in (
        "empty.memory_format", "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
        "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full",
        "scalar_tensor", "arange", "view", "_unsafe_view", "reshape", "expand", "permute", "transpose", "t",
        "squeeze", "unsqueeze", "select", "slice", "narrow", "split", "split_with_sizes", "chunk", "unbind",
        "as_strided", "alias", "detach", "clone", "contiguous", "copy_", "zero_", "fill_", "_to_copy", "to",
        "lift_fresh", "lift_fresh_copy", "_local_scalar_dense", "flatten", "unflatten", "movedim",
        "resize_", "set_", "is_same_size", "view_as", "reshape_as", "expand_as", "_reshape_alias",
    )
)  # fmt: skip


def forbidden_ops(ops: list[str]) -> list[str]:
    """The reported ops that compute (overload suffixes such as `.Tensor` are ignored)."""
    return sorted(
        {op for op in ops if op not in ALLOWED_ATEN_OPS and op.split(".")[0] not in ALLOWED_ATEN_OPS}
    )


# Names that are ATen ops but only allocate, view, copy or describe: what the static audit lets a
# candidate call, beside the runtime allowlist above.
METADATA_OPS = frozenset(
    {
        "size", "sizes", "stride", "strides", "numel", "dim", "ndimension", "item", "data", "data_ptr",
        "is_contiguous", "is_floating_point", "is_complex", "is_nonzero", "is_same", "is_set_to", "storage_offset",
        "element_size", "nbytes", "itemsize", "to", "cpu", "cuda", "type", "type_as", "real", "imag", "conj",
        "numpy_T", "output_nr", "_version", "requires_grad_", "retain_grad", "is_leaf", "new_empty_strided",
        "empty_like", "empty_strided", "full", "full_like", "zeros", "zeros_like", "ones", "ones_like",
        "scalar_tensor", "arange", "tensor", "as_tensor", "from_blob", "result_type", "promote_types",
        "can_cast", "is_pinned", "pin_memory", "record_stream", "fill", "align_as", "get_device",
    }
)  # fmt: skip

# Used where torch's headers cannot be found (the op list is read from them, never by importing torch).
_FALLBACK_OPS = frozenset(
    {
        "abs", "add", "addmm", "amax", "amin", "argmax", "argmin", "baddbmm", "bmm", "cat", "clamp", "clamp_min",
        "clamp_max", "conv1d", "conv2d", "conv3d", "cos", "cumsum", "div", "dot", "einsum", "erf", "exp", "gather",
        "gelu", "index_select", "layer_norm", "linear", "log", "log_softmax", "logsumexp", "masked_fill", "matmul",
        "max", "mean", "min", "mm", "mul", "norm", "pow", "prod", "relu", "scatter", "sigmoid", "silu", "sin",
        "softmax", "sort", "sqrt", "stack", "std", "sub", "sum", "tanh", "topk", "var", "where",
    }
)  # fmt: skip


@cache
def aten_op_names() -> frozenset[str]:
    """Every ATen operator of the installed torch, read from its headers (ATen/ops/<name>_ops.h), so
    the audit knows `matmul` and `addcmul` alike without importing torch. A fallback list elsewhere."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return _FALLBACK_OPS
    ops = Path(next(iter(spec.submodule_search_locations))) / "include" / "ATen" / "ops"
    names = frozenset(p.name.removesuffix("_ops.h") for p in ops.glob("*_ops.h"))
    return names or _FALLBACK_OPS


@cache
def allowed_op_names() -> frozenset[str]:
    """Op names a candidate may call: the runtime allowlist's, and metadata."""
    runtime = {op.removeprefix("aten::").split(".")[0] for op in ALLOWED_ATEN_OPS}
    return frozenset(runtime | METADATA_OPS)


def computes(name: str) -> bool:
    """Whether calling `name` (a torch function or tensor method; `add_` counts as `add`) runs an ATen
    operator that computes."""
    base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    if base.startswith(("is_", "sym_")):
        return False  # is_contiguous, is_nonzero, sym_size, ...: questions about a tensor
    return (base in aten_op_names() or name in aten_op_names()) and not (
        base in allowed_op_names() or name in allowed_op_names()
    )
