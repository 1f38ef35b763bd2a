"""Which aten ops a candidate's forward() may dispatch: allocation, views, copies and metadata only."""

from __future__ import annotations

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
