"""Canonical operator names: one name per torch operation however it is spelled (F.relu, nn.ReLU, x.relu_()).

Standard library only; the tables are read from source text, torch is never imported.
"""

from __future__ import annotations

import ast
import re

# Calls that compute nothing worth naming: shape queries, layout and bookkeeping.
_NOT_OPS = frozenset(
    [
        "size",
        "dim",
        "numel",
        "contiguous",
        "item",
        "tolist",
        "is_contiguous",
        "stride",
        "data_ptr",
        "element_size",
        "get_device",
        "parameters",
        "named_parameters",
        "manual_seed",
        "no_grad",
        "register_buffer",
        "register_parameter",
        "add_module",
        "Identity",
        "Parameter",
        "Module",
        "Tensor",
        "tensor",
        "device",
        "dtype",
    ]
)
# One canonical name per operation however it is spelled (after in-place `_` and module-class conversion).
_OP_ALIASES = {
    "mm": "matmul",
    "bmm": "matmul",
    "true_divide": "div",
    "divide": "div",
    "multiply": "mul",
    "subtract": "sub",
    "negative": "neg",
    "absolute": "abs",
    "clip": "clamp",
    "view": "reshape",
    "view_as": "reshape",
    "reshape_as": "reshape",
    "flatten": "reshape",
    "t": "transpose",
    "swapaxes": "transpose",
    "swapdims": "transpose",
    "greater": "gt",
    "less": "lt",
    "greater_equal": "ge",
    "less_equal": "le",
    "not_equal": "ne",
    "upsample": "interpolate",
    "concat": "cat",
    "concatenate": "cat",
}
# nn module classes whose CamelCase does not convert mechanically to the functional name.
_MODULE_CLASS_OPS = {
    "ReLU": "relu",
    "ReLU6": "relu6",
    "LeakyReLU": "leaky_relu",
    "PReLU": "prelu",
    "RReLU": "rrelu",
    "SELU": "selu",
    "CELU": "celu",
    "GELU": "gelu",
    "SiLU": "silu",
    "ELU": "elu",
    "GLU": "glu",
    "Hardtanh": "hardtanh",
    "Hardswish": "hardswish",
    "Hardsigmoid": "hardsigmoid",
    "Hardshrink": "hardshrink",
    "Softshrink": "softshrink",
    "Tanhshrink": "tanhshrink",
    "LogSigmoid": "logsigmoid",
    "Softmax2d": "softmax",
    "MultiheadAttention": "multi_head_attention",
    "CrossEntropyLoss": "cross_entropy",
    "KLDivLoss": "kl_div",
    "BCELoss": "binary_cross_entropy",
    "BCEWithLogitsLoss": "binary_cross_entropy_with_logits",
    "LSTM": "lstm",
    "GRU": "gru",
    "RNN": "rnn",
    "LSTMCell": "lstm_cell",
    "GRUCell": "gru_cell",
    "RNNCell": "rnn_cell",
    "Flatten": "reshape",
    "Unflatten": "reshape",
}
BINOPS: dict[type[ast.operator], str] = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.Pow: "pow",
    ast.MatMult: "matmul",
    ast.FloorDiv: "floor_divide",
    ast.Mod: "remainder",
    ast.BitAnd: "bitwise_and",
    ast.BitOr: "bitwise_or",
    ast.BitXor: "bitwise_xor",
    ast.LShift: "bitwise_left_shift",
    ast.RShift: "bitwise_right_shift",
}
CMPOPS: dict[type[ast.cmpop], str] = {
    ast.Gt: "gt",
    ast.Lt: "lt",
    ast.GtE: "ge",
    ast.LtE: "le",
    ast.Eq: "eq",
    ast.NotEq: "ne",
}
UNARYOPS: dict[type[ast.unaryop], str] = {ast.USub: "neg", ast.Invert: "bitwise_not"}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NORM_DIMS = re.compile(r"^(batch_norm|instance_norm|lazy_batch_norm|lazy_instance_norm)[123]d$")


def op_name(name: str, *, module_class: bool = False) -> str | None:
    """The canonical operator a function, tensor method or nn module class name stands for; None for non-ops."""
    if name in _NOT_OPS:
        return None
    if module_class:
        op = _MODULE_CLASS_OPS.get(name) or _CAMEL.sub("_", name).lower()
        op = _NORM_DIMS.sub(r"\1", op)
    else:
        op = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    return _OP_ALIASES.get(op, op)


def path_op(path: str) -> str | None:
    """The operator a dotted torch path names (torch.nn.ReLU, torch.relu_, torch.nn.functional.relu -> relu)."""
    if not path.startswith("torch."):
        return None
    last = path.rsplit(".", 1)[-1]
    if path.startswith("torch.nn.") and not path.startswith("torch.nn.functional.") and last[:1].isupper():
        return op_name(last, module_class=True)
    return op_name(last)
