"""What a Triton workspace may use of Triton, and which of its functions are kernels.

A Triton workspace's kernels are `@triton.jit` functions; its Python may use the kernel language
(`triton.language`, libdevice included) and the launch decorators (`jit`, `autotune`, `Config`,
`heuristics`) with the grid helpers (`cdiv`, `next_power_of_2`). Everything else of Triton is refused
by name: `triton.runtime` (the driver: binaries loaded past the build, the JIT's caches),
`triton.compiler` and `triton.compile`, `triton.knobs` (launch and compile hooks, the interpreter
switch), `triton.testing` (its own timing loops), `triton.tools`, `triton.ops` (library kernels),
`triton.backends`, `triton.experimental`, private names, and `extern_elementwise` (device libraries
linked from a path). A kernel is launched as `kernel[grid](...)`: any attribute of a kernel
(`.run`, `.fn`, `.cache`, `.warmup`, ...) reaches past the launch and is refused.
"""

from __future__ import annotations

import ast

TRITON_ALLOWED = frozenset(
    {
        "triton",
        "triton.jit",
        "triton.autotune",
        "triton.Config",
        "triton.heuristics",
        "triton.cdiv",
        "triton.next_power_of_2",
        "triton.language",
    }
)
JIT_DECORATOR = "triton.jit"
_REFUSED_IN_LANGUAGE = ("extern_elementwise", "extern", "dispatch")
# Triton reads its settings (TRITON_INTERPRET, TRITON_CACHE_DIR, ...) from the environment when a
# kernel is decorated or compiled: the evaluator's, never the candidate's.
ENVIRONMENT_NAMES = ("os.environ", "os.putenv", "os.unsetenv")


def triton_rule(dotted: str) -> tuple[str, str] | None:
    """(rule, why) for a Triton name a Triton workspace may not use, else None."""
    parts = dotted.split(".")
    if any(part.startswith("_") for part in parts[1:]):
        return ("private_attribute", "reaches inside Triton")
    if dotted in TRITON_ALLOWED:
        return None
    if parts[:2] == ["triton", "language"]:
        if any(part in _REFUSED_IN_LANGUAGE for part in parts[2:]):
            return ("forbidden_library", "links device code from outside the workspace")
        return None
    return (
        "forbidden_library",
        "is not the Triton a workspace may use (jit, autotune, Config, heuristics, cdiv, next_power_of_2, "
        "triton.language)",
    )


def is_jit(function: ast.AST, resolve: object) -> bool:
    """Whether the function is decorated with `triton.jit` (called or not), through the module's names;
    `resolve` is `ModuleNames.resolve`."""
    if not isinstance(function, ast.FunctionDef):
        return False
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if callable(resolve) and resolve(target) == JIT_DECORATOR:
            return True
    return False


def kernel_names(tree: ast.Module, resolve: object) -> dict[str, int]:
    """Kernel name -> line of its def, for the module's top-level `@triton.jit` functions."""
    return {
        node.name: node.lineno
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and is_jit(node, resolve)
    }


def kernel_references(tree: ast.Module, kernels: frozenset[str]) -> list[ast.expr]:
    """Uses of a kernel other than launching it (`k[grid](...)`) or calling it from another kernel
    (a device function): a kernel stored, passed, aliased or reached into (`k.run`, `k.fn`). `kernels`
    are the workspace's kernel names; a name imported under another (`import relu_kernel as k`) and
    an attribute of a module (`my_kernels.relu_kernel`) are references too."""
    local = set(kernels)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            local.update(a.asname for a in node.names if a.asname and a.name in kernels)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    in_kernel = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name in kernels
        for inner in ast.walk(node)
    }
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name | ast.Attribute):
            continue
        is_reference = (isinstance(node, ast.Name) and node.id in local) or (
            isinstance(node, ast.Attribute) and node.attr in kernels and isinstance(node.value, ast.Name)
        )
        if not is_reference or isinstance(getattr(node, "ctx", None), ast.Store):
            continue
        parent = parents.get(id(node))
        grandparent = parents.get(id(parent)) if parent is not None else None
        launched = (
            isinstance(parent, ast.Subscript)
            and parent.value is node
            and isinstance(grandparent, ast.Call)
            and grandparent.func is parent
        )
        device_call = isinstance(parent, ast.Call) and parent.func is node and id(node) in in_kernel
        if not (launched or device_call):
            found.append(node)
    return found
