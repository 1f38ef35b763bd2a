"""Static audit of the candidate's Python (model_new.py and every module beside it), on meaning.

Names are resolved through the module's own imports and assignments (`import torch as T`, `from torch
import relu`, `G = torch.nn.functional`), so an alias computes as its target does. Refused: PyTorch
compute in any function other than `__init__` (torch functions, `F.*`, tensor methods, operators on
tensors, held layers called), references to compute functions anywhere (`self.act = torch.relu`),
attribute lookups with computed names (`getattr(torch, name)`, `globals()[...]`, `vars(torch)`,
`__import__`, `importlib`, `operator.attrgetter`, `sys.modules`), code built at run time (`eval`, `exec`,
`compile`, `pickle`, `marshal`), and native code loaded past the build (`ctypes`, `cffi`,
`torch.ops.load_library`, `torch.utils.cpp_extension`, `torch.cuda.jiterator`, other GPU compilers).
Allocation, views, copies and shape glue stay allowed.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from cuda_agent_mcp.evaluator.ops import computes
from cuda_agent_mcp.results import AuditFinding

ALLOWED_TORCH_CALLS = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "tensor", "as_tensor", "arange", "device", "dtype", "Size", "is_tensor", "no_grad", "inference_mode",
    "get_default_dtype", "promote_types", "result_type", "finfo", "iinfo",
}  # fmt: skip
ALLOWED_TENSOR_METHODS = {
    "contiguous", "view", "reshape", "size", "dim", "numel", "stride", "is_contiguous", "data_ptr",
    "element_size", "to", "cuda", "cpu", "float", "half", "bfloat16", "double", "int", "long", "bool",
    "type", "new_empty", "new_zeros", "new_ones", "new_full", "unsqueeze", "squeeze", "expand", "flatten",
    "permute", "transpose", "t", "narrow", "select", "split", "chunk", "unbind", "item", "tolist",
    "storage_offset", "get_device", "requires_grad_", "detach", "clone", "copy_", "zero_", "fill_",
    "view_as", "reshape_as", "expand_as", "unflatten", "movedim", "is_floating_point",
}  # fmt: skip
# Method names Python's own types share with ATen ops (list.index, dict.copy, str.split, ...).
_BUILTIN_METHODS = {
    "index", "count", "copy", "sort", "pop", "insert", "remove", "append", "extend", "clear", "get", "keys",
    "values", "items", "join", "format", "replace", "lower", "upper", "strip", "update", "discard", "real",
    "imag", "data",
}  # fmt: skip
_TORCH_COMPUTE_MODULES = (
    "nn",
    "ops",
    "_C",
    "compile",
    "special",
    "linalg",
    "fft",
    "jit",
    "func",
    "_ops",
    "_refs",
    "_prims",
    "sparse",
    "library",
)
# Containers and parameters may hold the reference's weights (so its state_dict loads); calling a
# layer in forward() runs PyTorch's implementation.
_HOLDERS = {"Parameter", "ParameterList", "ParameterDict", "ModuleList", "ModuleDict", "Buffer", "Module"}

# Lookups by computed names (setattr and delattr write, so they are not lookups).
_COMPUTED_NAME_CALLS = {"getattr", "globals", "locals", "vars", "__import__"}
_DYNAMIC_CODE_CALLS = {"eval", "exec", "compile"}
# module: (rule, why), refused wherever it is imported or used
_FORBIDDEN_MODULES = {
    "importlib": ("computed_name", "imports modules by computed names"),
    "builtins": ("computed_name", "reaches builtins by name"),
    "operator": ("computed_name", "attrgetter/methodcaller look attributes up by computed names"),
    "pickle": ("dynamic_code", "unpickling builds calls at run time"),
    "marshal": ("dynamic_code", "loads code at run time"),
    "dill": ("dynamic_code", "unpickling builds calls at run time"),
    "cloudpickle": ("dynamic_code", "unpickling builds calls at run time"),
    "types": ("dynamic_code", "builds functions and code objects at run time"),
    "ctypes": ("forbidden_library", "loads native libraries past the build"),
    "cffi": ("forbidden_library", "loads native libraries past the build"),
    "triton": ("forbidden_library", "compiles kernels that are not your workspace's"),
    "cupy": ("forbidden_library", "computes outside your kernels"),
    "numba": ("forbidden_library", "compiles kernels that are not your workspace's"),
    "pycuda": ("forbidden_library", "compiles and loads kernels that are not your workspace's"),
    "cuda": ("forbidden_library", "loads modules and libraries past the build"),
    "numpy": ("forbidden_library", "computes outside your kernels"),
    "scipy": ("forbidden_library", "computes outside your kernels"),
    "jax": ("forbidden_library", "computes outside your kernels"),
    "tensorflow": ("forbidden_library", "computes outside your kernels"),
    "torch.utils.cpp_extension": ("forbidden_library", "compiles and loads code past the build"),
    "torch.cuda.jiterator": ("forbidden_library", "compiles kernels at run time"),
    "torch.ops.load_library": ("forbidden_library", "loads native libraries past the build"),
    "torch.library": ("forbidden_library", "registers operators past the build"),
    "sys.modules": ("computed_name", "reaches modules by computed names"),
}
_DUNDERS = {"__dict__", "__getattribute__", "__builtins__", "__globals__", "__code__", "__closure__"}

# What the usual names mean where the module does not bind them itself.
_CONVENTIONAL = {"torch": "torch", "F": "torch.nn.functional", "nn": "torch.nn"}

Add = Callable[[ast.AST | None, str, str], None]


def audit_python(source: str, file: str, *, candidate: bool) -> list[AuditFinding]:
    """Findings in one Python module; `candidate`: it is model_new.py (ModelNew's rules apply too)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # the worker reports the syntax error with its traceback
    found: dict[tuple[int | None, str], AuditFinding] = {}

    def add(node: ast.AST | None, rule: str, message: str) -> None:
        line = getattr(node, "lineno", None)
        found.setdefault((line, message), AuditFinding(file=file, line=line, rule=rule, message=message))

    names = _Names(tree)
    _check_imports(tree, names, add)
    _check_dynamic(tree, names, add)
    checked = _checked_functions(tree)
    for function in checked:
        _check_function(function, names, add)
    _check_references(tree, names, {id(n) for f in checked for n in ast.walk(f)}, add)
    if candidate:
        _check_model_new(tree, names, add)
    return sorted(found.values(), key=lambda f: (f.line or 0, f.message))


class _Names:
    """What the module's names stand for: local name -> dotted target (`F` -> `torch.nn.functional`)."""

    def __init__(self, tree: ast.Module) -> None:
        self.targets: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".")[0]
                    self.targets[local] = alias.name if alias.asname else local
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.targets[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for _ in range(3):  # `T = torch`, then `G = T.nn.functional`
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Assign)
                    and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                ):
                    resolved = self.resolve(node.value)
                    if resolved is not None and resolved.split(".")[0] in ("torch", *_FORBIDDEN_MODULES):
                        self.targets[node.targets[0].id] = resolved

    def resolve(self, node: ast.AST) -> str | None:
        """`T.nn.functional.relu` -> `torch.nn.functional.relu`, through the module's aliases; a
        constant getattr is an attribute (`getattr(torch, "relu")` -> `torch.relu`)."""
        parts: list[str] = []
        while True:
            if isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                parts.append(node.args[1].value)
                node = node.args[0]
            else:
                break
        if not isinstance(node, ast.Name):
            return None
        head = self.targets.get(node.id, _CONVENTIONAL.get(node.id))
        return ".".join([head, *reversed(parts)]) if head else None


def _torch_compute(dotted: str, *, called: bool) -> bool:
    """Whether the torch name computes (a call of it, or handing it around)."""
    parts = dotted.split(".")
    if parts[0] != "torch" or len(parts) < 2:
        return False
    if parts[1] == "nn":
        if len(parts) >= 3 and parts[2] == "functional":
            return len(parts) > 3
        return called and len(parts) >= 3 and parts[-1] not in _HOLDERS and parts[-1] not in ("init",)
    if parts[1] in _TORCH_COMPUTE_MODULES:
        return len(parts) > 2 or parts[1] == "compile"
    if parts[1] == "Tensor" and len(parts) == 3:
        return computes(parts[2])
    if len(parts) == 2:
        if called:
            return (parts[1] not in ALLOWED_TORCH_CALLS and computes(parts[1])) or parts[1] in (
                "compile",
                "vmap",
            )
        return computes(parts[1])
    return False


def _spelled(node: ast.AST, dotted: str) -> str:
    """The name as written, with what it resolves to where that differs (`F.gelu (torch.nn.functional.gelu)`)."""
    written = ast.unparse(node)
    return written if written == dotted else f"{written} ({dotted})"


def _check_imports(tree: ast.Module, names: _Names, add: Add) -> None:
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for alias in node.names:
                if _torch_compute(f"{node.module}.{alias.name}", called=False):
                    add(
                        node,
                        "torch_compute",
                        f"imports the PyTorch compute function {node.module}.{alias.name}: only your kernels may compute",
                    )
        for module in modules:
            if (rule := _forbidden(module)) is not None:
                add(
                    node,
                    rule[0],
                    f"imports {module}, which {rule[1]}: forward() may only call cuda_extension",
                )


def _forbidden(dotted: str) -> tuple[str, str] | None:
    for module, rule in _FORBIDDEN_MODULES.items():
        if dotted == module or dotted.startswith(module + "."):
            return rule
    return None


def _check_dynamic(tree: ast.Module, names: _Names, add: Add) -> None:
    """Computed names, run-time code and native loading, anywhere in the module."""
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}  # report `a.b.c` once
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = node.func.id
            constant_name = len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
            if name in _DYNAMIC_CODE_CALLS:
                add(node, "dynamic_code", f"{name}() runs code built at run time: write it out in the file")
            elif name == "getattr" and not constant_name:
                target = names.resolve(node.args[0]) if node.args else None
                if target != "cuda_extension":
                    add(
                        node,
                        "computed_name",
                        "getattr() with a computed attribute name: spell the attribute out",
                    )
            elif name in _COMPUTED_NAME_CALLS - {"getattr"}:
                add(node, "computed_name", f"{name}() reaches names by computed strings: spell the name out")
        if isinstance(node, ast.Attribute) and node.attr in _DUNDERS:
            add(
                node,
                "computed_name",
                f".{node.attr} reaches attributes by computed names: spell the attribute out",
            )
        if isinstance(node, ast.Name) and node.id in ("__builtins__", "__import__"):
            add(node, "computed_name", f"{node.id} reaches names by computed strings: spell the name out")
        if (
            isinstance(node, ast.Attribute | ast.Name)
            and id(node) not in inner
            and not isinstance(node.ctx, ast.Store)
            and (dotted := names.resolve(node)) is not None
            and (rule := _forbidden(dotted)) is not None
        ):
            add(node, rule[0], f"{dotted} {rule[1]}: forward() may only call cuda_extension")


def _checked_functions(tree: ast.Module) -> list[ast.AST]:
    """Every function and lambda whose body runs per call: all but the classes' __init__."""
    excluded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    excluded.update(id(n) for n in ast.walk(item))
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and id(node) not in excluded
    ]


def _check_function(function: ast.AST, names: _Names, add: Add) -> None:
    where = (
        f"{function.name}()" if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) else "a lambda"
    )
    tensors = _tensor_names(function, names)
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            dotted = names.resolve(node.func)
            if dotted is not None:
                spelled = _spelled(node.func, dotted)
                if _torch_compute(dotted, called=True):
                    add(node, "torch_compute", f"{where} calls {spelled}: only your kernels may compute")
                elif dotted.startswith("operator."):
                    add(
                        node,
                        "torch_compute",
                        f"{where} calls {spelled}: arithmetic on tensors computes with PyTorch",
                    )
            elif isinstance(node.func, ast.Attribute):
                _check_method(node, node.func, names, where, add)
        elif isinstance(node, ast.BinOp) and (isinstance(node.op, ast.MatMult) or _touches(node, tensors)):
            symbol = _SYMBOLS.get(type(node.op), "an operator")
            add(
                node,
                "torch_compute",
                f"{where} applies {symbol} to tensors: arithmetic on tensors runs PyTorch kernels; do it in your kernel",
            )
        elif (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub | ast.Invert)
            and _touches(node, tensors)
        ):
            add(
                node,
                "torch_compute",
                f"{where} negates a tensor: arithmetic on tensors runs PyTorch kernels; do it in your kernel",
            )
        elif (
            isinstance(node, ast.Compare)
            and _touches(node, tensors)
            and not all(isinstance(op, ast.Is | ast.IsNot | ast.In | ast.NotIn) for op in node.ops)
        ):
            add(
                node,
                "torch_compute",
                f"{where} compares tensors: comparisons on tensors run PyTorch kernels; do it in your kernel",
            )
        elif isinstance(node, ast.AugAssign) and _touches(node, tensors):
            add(
                node,
                "torch_compute",
                f"{where} updates a tensor in place with an operator: do it in your kernel",
            )


def _check_method(call: ast.Call, func: ast.Attribute, names: _Names, where: str, add: Add) -> None:
    receiver = names.resolve(func.value)
    if receiver is not None:  # a module: cuda_extension, math, ... (torch is handled as a function)
        return
    if isinstance(func.value, ast.Name) and func.value.id == "self":
        return  # the module's own methods (audited themselves) and held layers (see ModelNew's rules)
    name = func.attr
    if name in _BUILTIN_METHODS or name in ALLOWED_TENSOR_METHODS:
        return
    if computes(name):
        add(
            call, "torch_compute", f"{where} calls the tensor method .{name}(): only your kernels may compute"
        )


_SYMBOLS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
    ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
}  # fmt: skip


def _tensor_names(function: ast.AST, names: _Names) -> set[str]:
    """Names that hold tensors in this function: parameters annotated as tensors, and names bound to
    the extension's results or to new tensors."""
    tensors: set[str] = set()
    arguments = (
        function.args if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) else None
    )
    if arguments is not None:
        for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            annotation = ast.unparse(argument.annotation) if argument.annotation is not None else ""
            if annotation.split(".")[-1] == "Tensor":
                tensors.add(argument.arg)
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            source = names.resolve(node.value.func) or ""
            if source.startswith(("cuda_extension.", "torch.")) or (
                isinstance(node.value.func, ast.Attribute)
                and node.value.func.attr in ("new_empty", "new_zeros", "empty_like")
            ):
                tensors.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return tensors


def _touches(node: ast.AST, tensors: set[str]) -> bool:
    """An operand of this operator node is one of the tensor names itself (not `x.shape[0]`)."""
    if isinstance(node, ast.BinOp):
        operands = [node.left, node.right]
    elif isinstance(node, ast.UnaryOp):
        operands = [node.operand]
    elif isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
    elif isinstance(node, ast.AugAssign):
        operands = [node.target, node.value]
    else:
        return False
    return any(isinstance(o, ast.Name) and o.id in tensors for o in operands)


def _check_references(tree: ast.Module, names: _Names, inside_checked: set[int], add: Add) -> None:
    """A compute function handed around (stored, passed, aliased) computes wherever it is called."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in called:
            continue
        if isinstance(node.ctx, ast.Store):
            continue
        dotted = names.resolve(node)
        if dotted is not None and _torch_compute(dotted, called=False):
            add(
                node,
                "torch_compute",
                f"refers to {_spelled(node, dotted)}: a PyTorch compute function stored or passed computes when called; only your kernels may compute",
            )
    for name, target in names.targets.items():
        if _torch_compute(target, called=False):
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Name)
                    and node.id == name
                    and isinstance(node.ctx, ast.Load)
                    and id(node) in inside_checked
                ):
                    add(node, "torch_compute", f"{name} is {target}: only your kernels may compute")


def _check_model_new(tree: ast.Module, names: _Names, add: Add) -> None:
    for node in ast.walk(tree):
        if (isinstance(node, ast.ImportFrom) and node.module == "model") or (
            isinstance(node, ast.Import) and any(alias.name == "model" for alias in node.names)
        ):
            add(node, "imports_reference", "model_new.py imports the reference module `model`")
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            for base in node.bases:
                resolved = names.resolve(base) or ast.unparse(base)
                if resolved not in ("torch.nn.Module", "nn.Module", "Module"):
                    add(
                        node,
                        "inherits",
                        f"ModelNew must subclass nn.Module directly, not {ast.unparse(base)}",
                    )
    layers = _torch_layers(_method(tree, "ModelNew", "__init__"), names)
    forward = _method(tree, "ModelNew", "forward")
    if forward is None:
        return
    for node in ast.walk(forward):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in layers:
            name = ast.unparse(node.func)
            add(node, "torch_compute", f"forward() calls the PyTorch layer {name} ({layers[name]})")
        if isinstance(node, ast.Try):
            add(node, "fallback", "try/except in forward(): a fallback path could hide a failing kernel")


def _torch_layers(init: ast.FunctionDef | None, names: _Names) -> dict[str, str]:
    """`self.x` names that __init__ binds to an nn layer, mapped to the layer's name."""
    layers: dict[str, str] = {}
    if init is None:
        return layers
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            constructor = names.resolve(node.value.func) or ast.unparse(node.value.func)
            parts = constructor.split(".")
            if parts[0] in ("nn", "torch") and parts[-1] not in _HOLDERS and parts[-1][:1].isupper():
                for target in node.targets:
                    layers[ast.unparse(target)] = constructor
    return layers


def _method(tree: ast.Module, class_name: str, name: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item
    return None
