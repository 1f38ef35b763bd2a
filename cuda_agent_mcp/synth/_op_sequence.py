"""Model.forward's canonical operator sequence, in evaluation order; module calls resolve through __init__.

A call of `self.conv(x)` is the class __init__ built (nn.Conv2d -> conv2d), nn.Sequential and ModuleList expand
to their members, and calls of Model's other methods, of module-level helper functions and of helper module
classes are followed (a few levels). Standard library only: the source is read, never run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from cuda_agent_mcp.synth._op_names import BINOPS, CMPOPS, UNARYOPS, op_name, path_op
from cuda_agent_mcp.synth._program_ast import INPUT_FUNCTIONS, dotted, is_docstring

_MAX_INLINE_DEPTH = 4

# What a module attribute or local holds, as far as calling it goes: ops to emit, or helper classes to inline.
Unit = tuple[str, str]  # ("op", "conv2d") | ("class", "Block")


@dataclass
class _ClassInfo:
    node: ast.ClassDef
    methods: dict[str, ast.FunctionDef]
    attrs: dict[str, list[Unit]] = field(default_factory=dict)


class OpExtractor:
    """Walks forward in evaluation order, naming each torch operation; module calls resolve through __init__."""

    def __init__(self, tree: ast.Module, aliases: dict[str, str]) -> None:
        self.aliases = aliases
        self.functions = {
            stmt.name: stmt
            for stmt in tree.body
            if isinstance(stmt, ast.FunctionDef) and stmt.name not in INPUT_FUNCTIONS
        }
        self.classes: dict[str, _ClassInfo] = {}
        for stmt in tree.body:
            if isinstance(stmt, ast.ClassDef):
                methods = {m.name: m for m in stmt.body if isinstance(m, ast.FunctionDef)}
                self.classes[stmt.name] = _ClassInfo(stmt, methods)
        for info in self.classes.values():
            init = info.methods.get("__init__")
            if init is not None:
                self._read_init(init.body, info.attrs, {})

    # __init__: what each attribute holds

    def _module_value(self, node: ast.expr | None, local: dict[str, list[Unit]]) -> list[Unit] | None:
        if node is None:
            return None
        if isinstance(node, ast.Name):
            if node.id in local:
                return list(local[node.id])
            path = dotted(node, self.aliases)
            op = path_op(path) if path else None
            return [("op", op)] if op else None
        if isinstance(node, ast.Attribute):
            path = dotted(node, self.aliases)
            op = path_op(path) if path else None
            return [("op", op)] if op else None  # a function kept to call later: self.act = F.gelu
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            units: list[Unit] = []
            for element in node.elts:
                units += self._module_value(element, local) or []
            return units
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            return self._module_value(node.elt, local)
        if isinstance(node, ast.Starred):
            return self._module_value(node.value, local)
        if isinstance(node, ast.Dict):
            units = []
            for value in node.values:
                units += self._module_value(value, local) or []
            return units
        if isinstance(node, ast.IfExp):
            return self._module_value(node.body, local)
        if not isinstance(node, ast.Call):
            return None
        if isinstance(node.func, ast.Name) and node.func.id in self.classes:
            return [("class", node.func.id)]
        if isinstance(node.func, ast.Name) and node.func.id in ("dict", "OrderedDict", "list", "tuple"):
            units = []
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                units += self._module_value(arg, local) or []
            return units
        path = dotted(node.func, self.aliases)
        if path is None:
            return None
        last = path.rsplit(".", 1)[-1]
        if last in ("Sequential", "ModuleList", "ModuleDict", "OrderedDict"):
            units = []
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                units += self._module_value(arg, local) or []
            return units
        if path.startswith("torch.nn.") and last[:1].isupper():
            op = path_op(path)
            return [("op", op)] if op else []
        return None

    def _read_init(
        self, body: list[ast.stmt], attrs: dict[str, list[Unit]], local: dict[str, list[Unit]]
    ) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Assign):
                value = self._module_value(stmt.value, local)
                for target in stmt.targets:
                    self._bind(target, value, attrs, local)
            elif isinstance(stmt, ast.AnnAssign):
                self._bind(stmt.target, self._module_value(stmt.value, local), attrs, local)
            elif isinstance(stmt, ast.AugAssign):
                self._extend(stmt.target, self._module_value(stmt.value, local), attrs, local)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                call = stmt.value
                if isinstance(call.func, ast.Attribute) and call.func.attr in (
                    "append",
                    "extend",
                    "add_module",
                ):
                    arg = call.args[-1] if call.args else None
                    self._extend(call.func.value, self._module_value(arg, local), attrs, local)
            else:
                for child in (getattr(stmt, name, None) for name in ("body", "orelse")):
                    if isinstance(child, list):
                        self._read_init([s for s in child if isinstance(s, ast.stmt)], attrs, local)

    @staticmethod
    def _slot(target: ast.expr) -> tuple[str, str] | None:
        if isinstance(target, ast.Name):
            return ("local", target.id)
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            return ("attr", target.attr)
        return None

    def _bind(
        self, target: ast.expr, value: list[Unit] | None, attrs: dict[str, list[Unit]], local: dict
    ) -> None:
        slot = self._slot(target)
        if slot is None or value is None:
            return
        (attrs if slot[0] == "attr" else local)[slot[1]] = value

    def _extend(
        self, target: ast.expr, value: list[Unit] | None, attrs: dict[str, list[Unit]], local: dict
    ) -> None:
        slot = self._slot(target)
        if slot is None or not value:
            return
        store = attrs if slot[0] == "attr" else local
        store[slot[1]] = [*store.get(slot[1], []), *value]

    # forward: the ops in evaluation order

    def ops(self, class_name: str = "Model") -> list[str]:
        """Model.forward's op sequence (empty when there is no such class or method)."""
        info = self.classes.get(class_name)
        if info is None or "forward" not in info.methods:
            return []
        out: list[str] = []
        self._method(info, info.methods["forward"], out, depth=0)
        return out

    def _method(self, info: _ClassInfo | None, fn: ast.FunctionDef, out: list[str], depth: int) -> None:
        _Walker(self, info, out, depth).statements(fn.body)

    def expand(self, units: list[Unit], out: list[str], depth: int) -> None:
        for kind, name in units:
            if kind == "op":
                out.append(name)
            elif depth < _MAX_INLINE_DEPTH:
                info = self.classes[name]
                if "forward" in info.methods:
                    self._method(info, info.methods["forward"], out, depth + 1)


class _Walker:
    """One method body's walk; `local` tracks names bound to modules (`for layer in self.layers`)."""

    def __init__(self, owner: OpExtractor, info: _ClassInfo | None, out: list[str], depth: int) -> None:
        self.owner = owner
        self.info = info
        self.out = out
        self.depth = depth
        self.local: dict[str, list[Unit]] = {}

    def statements(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or is_docstring(stmt):
            return
        if isinstance(stmt, ast.Assign):
            self.expr(stmt.value)
            units = self.units_of(stmt.value)
            for target in stmt.targets:
                if isinstance(target, ast.Name) and units is not None:
                    self.local[target.id] = units
        elif isinstance(stmt, ast.AugAssign):
            self.expr(stmt.value)
            self.out.append(BINOPS.get(type(stmt.op), "binop"))
        elif isinstance(stmt, ast.For):
            self.expr(stmt.iter)
            iterated = stmt.iter
            if (
                isinstance(iterated, ast.Call)
                and isinstance(iterated.func, ast.Name)
                and iterated.func.id
                in (
                    "enumerate",
                    "zip",
                    "reversed",
                )
            ):
                iterated = iterated.args[-1] if iterated.args else iterated
            units = self.units_of(iterated)
            if units is not None:
                for name in ast.walk(stmt.target):
                    if isinstance(name, ast.Name):
                        self.local[name.id] = units
            self.statements(stmt.body)
            self.statements(stmt.orelse)
        else:
            for node in ast.iter_child_nodes(stmt):
                if isinstance(node, ast.expr):
                    self.expr(node)
                elif isinstance(node, ast.stmt):
                    self.statement(node)
                elif isinstance(node, (ast.excepthandler, ast.match_case, ast.withitem)):
                    for child in ast.iter_child_nodes(node):
                        if isinstance(child, ast.stmt):
                            self.statement(child)
                        elif isinstance(child, ast.expr):
                            self.expr(child)

    def units_of(self, node: ast.expr) -> list[Unit] | None:
        """What calling `node` runs, when it names a module: self.attr, a local bound to one, self.attrs[i]."""
        if isinstance(node, ast.Subscript):
            node = node.value
        if isinstance(node, ast.Name):
            return self.local.get(node.id)
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and self.info is not None
        ):
            return self.info.attrs.get(node.attr)
        return None  # m.c_fc, self.mlp.act: an entry of a ModuleDict, not followed

    def expr(self, node: ast.expr) -> None:
        if isinstance(node, ast.Call):
            self.call(node)
        elif isinstance(node, (ast.BinOp, ast.UnaryOp)) and self.is_static(node):
            return  # arithmetic on constants (-1, 1.0 / math.sqrt(2)): not a tensor op
        elif isinstance(node, ast.BinOp):
            self.expr(node.left)
            self.expr(node.right)
            self.out.append(BINOPS.get(type(node.op), "binop"))
        elif isinstance(node, ast.UnaryOp):
            self.expr(node.operand)
            if type(node.op) in UNARYOPS:
                self.out.append(UNARYOPS[type(node.op)])
        elif isinstance(node, ast.Compare):
            self.expr(node.left)
            for op, right in zip(node.ops, node.comparators, strict=True):
                self.expr(right)
                if type(op) in CMPOPS:
                    self.out.append(CMPOPS[type(op)])
        elif isinstance(node, ast.Attribute):
            self.expr(node.value)
            if node.attr in ("T", "mT") and dotted(node, self.owner.aliases) is None:
                self.out.append("transpose")
        elif isinstance(node, ast.Lambda):
            return
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child)
                elif isinstance(child, ast.comprehension):
                    self.expr(child.iter)
                    for condition in child.ifs:
                        self.expr(condition)

    def is_static(self, node: ast.expr) -> bool:
        """Only constants and imported names (math.pi) in it: computed once, not an op of the program."""
        return all(
            not isinstance(child, ast.Name) or child.id in self.owner.aliases for child in ast.walk(node)
        ) and not any(isinstance(child, ast.Call) for child in ast.walk(node))

    def _arguments(self, node: ast.Call) -> None:
        for arg in node.args:
            self.expr(arg)
        for keyword in node.keywords:
            self.expr(keyword.value)

    def call(self, node: ast.Call) -> None:
        func = node.func
        owner = self.owner
        path = dotted(func, owner.aliases)
        if path is not None:
            self._arguments(node)
            op = path_op(path)
            if op:
                self.out.append(op)
            return
        units = self.units_of(func)
        if units is not None:
            self._arguments(node)
            owner.expand(units, self.out, self.depth)
            return
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            self._arguments(node)
            method = self.info.methods.get(func.attr) if self.info else None
            if method is not None and self.depth < _MAX_INLINE_DEPTH:
                _Walker(owner, self.info, self.out, self.depth + 1).statements(method.body)
            return
        if isinstance(func, ast.Name):
            self._arguments(node)
            helper = owner.functions.get(func.id)
            if helper is not None and self.depth < _MAX_INLINE_DEPTH:
                _Walker(owner, None, self.out, self.depth + 1).statements(helper.body)
            return
        if isinstance(func, ast.Attribute):  # a tensor method: x.sum(dim=1), y.relu_()
            if (
                isinstance(func.value, ast.Call)
                and isinstance(func.value.func, ast.Name)
                and func.value.func.id == "super"
            ):
                self._arguments(node)
                return
            self.expr(func.value)
            self._arguments(node)
            op = op_name(func.attr)
            if op:
                self.out.append(op)
            return
        self.expr(func)
        self._arguments(node)
