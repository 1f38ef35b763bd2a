"""Reading a KernelBench-format program's AST for similarity: import aliases, normalized statements, forward's ops.

Standard library only (no torch import): it reads the source, it never runs it. Everything here is
deterministic: walks follow the AST's own field order, and no set or dict order reaches an output.
"""

from __future__ import annotations

import ast
import builtins
import copy
from collections.abc import Iterator, Sequence

PLACEHOLDER_NAME = "_v"
PLACEHOLDER_CONST = "_c"
# Module-level functions that build inputs, not the computation: sizes and input construction vary freely.
INPUT_FUNCTIONS = frozenset({"get_inputs", "get_init_inputs"})
# Method names that say something about the program's shape, kept as they are (other method names are local).
KEPT_METHOD_NAMES = frozenset({"__init__", "forward"})
_BUILTINS = frozenset(dir(builtins))


def is_docstring(stmt: ast.stmt) -> bool:
    """A bare string expression statement: documentation, not computation."""
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def drop_docstrings(tree: ast.AST) -> None:
    """Remove every bare string statement in place (a body left empty gets `pass`, so it still unparses)."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                kept = [stmt for stmt in body if not is_docstring(stmt)]
                setattr(node, name, kept or ([ast.Pass()] if name == "body" else []))


def import_aliases(tree: ast.Module) -> dict[str, str]:
    """Each name a top-level import binds, to the full dotted path it stands for (`F` -> torch.nn.functional)."""
    aliases: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    aliases[root] = root
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
            for alias in stmt.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
    return aliases


def dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """The full import path an attribute chain names (`F.relu` -> torch.nn.functional.relu), or None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id], *reversed(parts)])
    return None


# --- normalized statements -------------------------------------------------------------------------------


class _Normalizer(ast.NodeTransformer):
    """Names and self attributes to one placeholder, constants to another, import paths spelled in full."""

    def __init__(self, aliases: dict[str, str], bound: frozenset[str]) -> None:
        self.aliases = aliases
        self.bound = bound

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        path = dotted(node, self.aliases)
        if path is not None:
            return ast.Name(id=path, ctx=node.ctx)
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return ast.Name(id=PLACEHOLDER_NAME, ctx=node.ctx)
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in self.aliases:
            return ast.Name(id=self.aliases[node.id], ctx=node.ctx)
        if node.id in _BUILTINS and node.id not in self.bound:
            return node
        return ast.Name(id=PLACEHOLDER_NAME, ctx=node.ctx)

    def visit_Constant(self, node: ast.Constant) -> ast.expr:
        if isinstance(node.value, (bool, type(None), type(...))):
            return node
        return ast.Name(id=PLACEHOLDER_CONST, ctx=ast.Load())

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.expr:
        return ast.Name(id=PLACEHOLDER_CONST, ctx=ast.Load())  # an f-string is a string constant too

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = PLACEHOLDER_NAME
        self.generic_visit(node)
        return node

    def visit_keyword(self, node: ast.keyword) -> ast.keyword:
        self.generic_visit(node)  # the keyword's own name is an API name (dim=, bias=): kept
        return node


def _bound_names(tree: ast.Module) -> frozenset[str]:
    """Names the program binds itself (arguments, assignments, defs): local, whatever builtin they shadow."""
    bound: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.append(node.id)
        elif isinstance(node, ast.arg):
            bound.append(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.append(node.name)
    return frozenset(bound)


_CHILD_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def _header(stmt: ast.stmt) -> ast.stmt:
    """A compound statement without its child statements (they are fingerprinted on their own)."""
    head = copy.copy(stmt)
    for name in _CHILD_BODIES:
        if isinstance(getattr(head, name, None), list):
            setattr(head, name, [ast.Pass()] if name == "body" else [])
    if isinstance(head, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        head.decorator_list = list(stmt.decorator_list)  # type: ignore[attr-defined]
        if head.name not in KEPT_METHOD_NAMES:
            head.name = PLACEHOLDER_NAME
    return head


def _child_statements(stmt: ast.stmt) -> Iterator[ast.stmt]:
    for name in _CHILD_BODIES:
        children = getattr(stmt, name, None)
        if not isinstance(children, list):
            continue
        for child in children:
            if isinstance(child, ast.stmt):
                yield child
            elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
                yield from child.body


def _statement_nodes(stmts: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    for stmt in stmts:
        if is_docstring(stmt):
            continue
        yield stmt
        yield from _statement_nodes(list(_child_statements(stmt)))


def program_parts(tree: ast.Module) -> list[ast.stmt]:
    """The module-level classes and functions that make the computation (Model and its helpers, not get_inputs)."""
    return [
        stmt
        for stmt in tree.body
        if isinstance(stmt, ast.ClassDef)
        or (isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name not in INPUT_FUNCTIONS)
    ]


_STRUCTURAL_NAMES = frozenset(
    {PLACEHOLDER_NAME, PLACEHOLDER_CONST, "super", "range", "len", "enumerate", "zip"}
)
_OPERATION_NODES = (
    ast.Attribute,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.BoolOp,
    ast.Subscript,
    ast.AugAssign,
)


def _names_an_operation(head: ast.stmt) -> bool:
    """Whether a normalized statement says what is computed: an API name, a method, an operator, an index.

    Left out: def and class headers, super().__init__(), `x = self.f(x)`, `return x`: every program has them
    (as placeholders), so counting them would make programs of one template near whatever their ops.
    """
    if isinstance(head, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    for node in ast.walk(head):
        if isinstance(node, _OPERATION_NODES):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call):
                func = node.value.func
                if isinstance(func, ast.Name) and func.id == "super":
                    continue  # super().__init__()
            return True
        if isinstance(node, ast.Name) and node.id not in _STRUCTURAL_NAMES:
            return True
    return False


def normalized_statements(tree: ast.Module, aliases: dict[str, str]) -> list[str]:
    """One normalized line per statement of the program's classes and helper functions that names an operation.

    Compound statements count by their header (`for _v in torch.chunk(_v, _c)`); their bodies count statement
    by statement.
    """
    normalizer = _Normalizer(aliases, _bound_names(tree))
    lines: list[str] = []
    for stmt in _statement_nodes(program_parts(tree)):
        head = normalizer.visit(copy.deepcopy(_header(stmt)))
        if _names_an_operation(head):
            lines.append(ast.unparse(head).split("\n", 1)[0].rstrip(":"))
    return lines
