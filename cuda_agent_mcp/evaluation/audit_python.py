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
from collections.abc import Callable, Collection

from cuda_agent_mcp.evaluation.ops import computes
from cuda_agent_mcp.evaluation.python_names import (
    HOLDERS,
    ModuleNames,
    forbidden,
    spelled,
    torch_compute,
)
from cuda_agent_mcp.evaluation.triton_rules import ENVIRONMENT_NAMES, is_jit, kernel_references
from cuda_agent_mcp.results import AuditFinding, KernelLanguage

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
# Lookups by computed names (setattr and delattr write, so they are not lookups).
_COMPUTED_NAME_CALLS = {"getattr", "globals", "locals", "vars", "__import__"}
_DYNAMIC_CODE_CALLS = {"eval", "exec", "compile"}
_DUNDERS = {
    "__dict__", "__getattribute__", "__builtins__", "__globals__", "__code__", "__closure__", "__class__",
    "__mro__", "__bases__", "__base__", "__subclasses__", "__self__", "__func__", "__wrapped__",
}  # fmt: skip

Add = Callable[[ast.AST | None, str, str], None]


def audit_python(
    source: str,
    file: str,
    *,
    candidate: bool,
    extension_kernels: Collection[str] | None = None,
    language: KernelLanguage = "cuda",
    triton_kernels: Collection[str] = (),
) -> list[AuditFinding]:
    """Findings in one Python module; `candidate`: it is model_new.py (ModelNew's rules apply too);
    `extension_kernels`: a CuPy workspace's built kernels, the only names of `cuda_extension` it may
    use (None: a torch extension, whose functions the build does not list); `language`: the
    workspace's, which decides what it may import (a Triton workspace: `triton_rules.py`);
    `triton_kernels`: a Triton workspace's kernel names, in all its modules."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # the worker reports the syntax error with its traceback
    found: dict[tuple[int | None, str], AuditFinding] = {}

    def add(node: ast.AST | None, rule: str, message: str) -> None:
        line = getattr(node, "lineno", None)
        found.setdefault((line, message), AuditFinding(file=file, line=line, rule=rule, message=message))

    names = ModuleNames(tree)
    _check_imports(tree, names, add, language)
    _check_dynamic(tree, names, add, extension_kernels, language)
    if language == "triton":
        _check_triton(tree, names, add, frozenset(triton_kernels))
    checked = _checked_functions(tree)
    for function in checked:
        # A Triton kernel's body is Triton's language, compiled by Triton: its operators and methods act
        # on Triton's values, never on torch tensors (PyTorch calls in it are still refused).
        _check_function(
            function, names, add, kernel_body=language == "triton" and is_jit(function, names.resolve)
        )
    _check_references(tree, names, {id(n) for f in checked for n in ast.walk(f)}, add)
    if candidate:
        _check_model_new(tree, names, add)
    return sorted(found.values(), key=lambda f: (f.line or 0, f.message))


def _launch_rule(language: KernelLanguage) -> str:
    return (
        "forward() may only launch your @triton.jit kernels"
        if language == "triton"
        else ("forward() may only call cuda_extension")
    )


def _check_triton(tree: ast.Module, names: ModuleNames, add: Add, kernels: frozenset[str]) -> None:
    """A Triton workspace's own rules: kernels only launched, Triton's settings left alone."""
    for reference in kernel_references(tree, kernels):
        name = ast.unparse(reference)
        add(
            reference,
            "kernel_reference",
            f"uses the Triton kernel {name} other than by launching it: write {name}[grid](...) (or call it "
            "from another kernel); a kernel is not stored, passed or reached into",
        )
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute | ast.Name) and (names.resolve(node) or "") in ENVIRONMENT_NAMES:
            add(
                node,
                "environment",
                f"{ast.unparse(node)}: the environment holds Triton's settings (the interpreter, caches), "
                "which are the evaluator's",
            )
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("TRITON_")
        ):
            add(node, "environment", f"{node.value!r}: Triton's settings are the evaluator's")


def _check_imports(tree: ast.Module, names: ModuleNames, add: Add, language: KernelLanguage) -> None:
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for alias in node.names:
                if torch_compute(f"{node.module}.{alias.name}", called=False):
                    add(
                        node,
                        "torch_compute",
                        f"imports the PyTorch compute function {node.module}.{alias.name}: only your kernels may compute",
                    )
        for module in modules:
            if (rule := forbidden(module, language)) is not None:
                add(node, rule[0], f"imports {module}, which {rule[1]}: {_launch_rule(language)}")


def _check_dynamic(
    tree: ast.Module,
    names: ModuleNames,
    add: Add,
    extension_kernels: Collection[str] | None,
    language: KernelLanguage,
) -> None:
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
                # A torch extension's functions may be picked by a computed name; a CuPy workspace's
                # cuda_extension is a Python object, whose kernels are named in full.
                if target != "cuda_extension" or extension_kernels is not None:
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
        if (
            isinstance(node, ast.Attribute | ast.Call)  # a constant getattr() is an attribute
            and (dotted := names.resolve(node)) is not None
            and dotted.startswith("cuda_extension.")
            and any(part.startswith("_") for part in dotted.split(".")[1:])
        ):
            # A CuPy workspace's cuda_extension is a Python object: only its kernels are the candidate's.
            add(
                node,
                "private_attribute",
                f"{ast.unparse(node)} reaches inside cuda_extension: call its kernels or functions only",
            )
        if (
            extension_kernels is not None
            and isinstance(node, ast.Attribute | ast.Call)
            and (dotted := names.resolve(node)) is not None
            and dotted.startswith("cuda_extension.")
        ):
            kernel, *inside = dotted.split(".")[1:]
            if kernel not in extension_kernels:
                made = ", ".join(sorted(extension_kernels)) or "none"
                add(
                    node,
                    "unknown_kernel",
                    f"{ast.unparse(node)}: cuda_extension has no kernel {kernel!r} (built: {made})",
                )
            elif inside:
                add(
                    node,
                    "private_attribute",
                    f"{ast.unparse(node)} reaches inside the kernel {kernel}: launch it, nothing else",
                )
        if isinstance(node, ast.Name) and node.id in ("__builtins__", "__import__"):
            add(node, "computed_name", f"{node.id} reaches names by computed strings: spell the name out")
        if (
            # a constant getattr() is an attribute; an attribute written (`triton.knobs.x.hook = f`) is used
            isinstance(node, ast.Attribute | ast.Name | ast.Call)
            and id(node) not in inner
            and not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store))
            and (dotted := names.resolve(node)) is not None
            and (rule := forbidden(dotted, language)) is not None
        ):
            add(node, rule[0], f"{dotted} {rule[1]}: {_launch_rule(language)}")


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


def _check_function(function: ast.AST, names: ModuleNames, add: Add, *, kernel_body: bool = False) -> None:
    where = (
        f"{function.name}()" if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) else "a lambda"
    )
    tensors = _tensor_names(function, names)
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            dotted = names.resolve(node.func)
            if dotted is not None:
                written = spelled(node.func, dotted)
                if torch_compute(dotted, called=True):
                    add(node, "torch_compute", f"{where} calls {written}: only your kernels may compute")
                elif dotted.startswith("operator."):
                    add(
                        node,
                        "torch_compute",
                        f"{where} calls {written}: arithmetic on tensors computes with PyTorch",
                    )
            elif isinstance(node.func, ast.Attribute) and not kernel_body:
                _check_method(node, node.func, names, where, add)
        elif kernel_body:
            continue
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


def _check_method(call: ast.Call, func: ast.Attribute, names: ModuleNames, where: str, add: Add) -> None:
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


def _tensor_names(function: ast.AST, names: ModuleNames) -> set[str]:
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


def _check_references(tree: ast.Module, names: ModuleNames, inside_checked: set[int], add: Add) -> None:
    """A compute function handed around (stored, passed, aliased) computes wherever it is called."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in called:
            continue
        if isinstance(node.ctx, ast.Store):
            continue
        dotted = names.resolve(node)
        if dotted is not None and torch_compute(dotted, called=False):
            add(
                node,
                "torch_compute",
                f"refers to {spelled(node, dotted)}: a PyTorch compute function stored or passed computes when called; only your kernels may compute",
            )
    for name, target in names.targets.items():
        if torch_compute(target, called=False):
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Name)
                    and node.id == name
                    and isinstance(node.ctx, ast.Load)
                    and id(node) in inside_checked
                ):
                    add(node, "torch_compute", f"{name} is {target}: only your kernels may compute")


def _check_model_new(tree: ast.Module, names: ModuleNames, add: Add) -> None:
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


def _torch_layers(init: ast.FunctionDef | None, names: ModuleNames) -> dict[str, str]:
    """`self.x` names that __init__ binds to an nn layer, mapped to the layer's name."""
    layers: dict[str, str] = {}
    if init is None:
        return layers
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            constructor = names.resolve(node.value.func) or ast.unparse(node.value.func)
            parts = constructor.split(".")
            if parts[0] in ("nn", "torch") and parts[-1] not in HOLDERS and parts[-1][:1].isupper():
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
