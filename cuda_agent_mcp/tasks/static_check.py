"""Check a reference program's shape without running it: syntax, `Model`, `get_inputs`, `get_init_inputs`."""

from __future__ import annotations

import ast
import re

from cuda_agent_mcp.errors import TaskLoadError
from cuda_agent_mcp.tasks.model import DType

REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")

_DTYPE_PATTERNS: list[tuple[DType, re.Pattern[str]]] = [
    ("bfloat16", re.compile(r"torch\.bfloat16|\.bfloat16\(\)")),
    ("float16", re.compile(r"torch\.(float16|half)\b|\.half\(\)")),
    ("float64", re.compile(r"torch\.(float64|double)\b|\.double\(\)")),
]


def check_reference_source(code: str, location: str) -> ast.Module:
    """Parse `code` and check it defines the KernelBench entry points; raise TaskLoadError if not."""
    if not code.strip():
        raise TaskLoadError(location, "the file is empty")
    try:
        tree = ast.parse(code, filename=location)
    except SyntaxError as exc:
        raise TaskLoadError(location, f"syntax error: {exc.msg}", line=exc.lineno) from None

    top_level = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef | ast.FunctionDef)}
    model = top_level.get("Model")
    if not isinstance(model, ast.ClassDef):
        raise TaskLoadError(location, "no top-level `class Model(nn.Module)` is defined")
    if not any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in model.body):
        raise TaskLoadError(location, "class Model has no forward() method", line=model.lineno)
    for name in REQUIRED_FUNCTIONS:
        if not isinstance(top_level.get(name), ast.FunctionDef):
            raise TaskLoadError(location, f"no top-level function {name}() is defined")
    return tree


def guess_dtype(tree: ast.Module) -> DType:
    """The dtype get_inputs() asks for explicitly, float32 when it names none (the dynamic probe confirms)."""
    get_inputs = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs")
    body = ast.unparse(get_inputs)
    for dtype, pattern in _DTYPE_PATTERNS:
        if pattern.search(body):
            return dtype
    return "float32"


def model_init_signature(tree: ast.Module) -> str:
    """The parameter list of Model.__init__ without `self`, as source text (for the ModelNew skeleton)."""
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    init = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return ""
    args = init.args
    args.posonlyargs = [a for a in args.posonlyargs if a.arg != "self"]
    args.args = [a for a in args.args if a.arg != "self"]
    return ast.unparse(args)
