"""The exception tree is one module: every `CudaAgentError` is defined in errors.py, drawn in its
docstring as the classes really inherit, and importable from the package root."""

from __future__ import annotations

import ast
import inspect
import re

import cuda_agent_mcp
from cuda_agent_mcp import errors
from tests.conftest import REPO

PACKAGE = REPO / "cuda_agent_mcp"


def _error_classes() -> dict[str, type]:
    return {
        name: value
        for name, value in vars(errors).items()
        if inspect.isclass(value)
        and issubclass(value, errors.CudaAgentError)
        and value.__module__ == errors.__name__
    }


def _drawn_tree() -> dict[str, str | None]:
    """class name -> the parent the docstring draws it under (None for the root)."""
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in (errors.__doc__ or "").splitlines():
        found = re.match(r"^(\s*)(?:[│ ]*[├└]── )?([A-Z]\w+)\b", line)
        if found is None or not (line.startswith("    CudaAgentError") or "── " in line):
            continue
        name = found.group(2)
        depth = line.index(name)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[name] = stack[-1][1] if stack else None
        stack.append((depth, name))
    return parents


def test_the_docstring_draws_every_error_class_under_its_real_base() -> None:
    classes = _error_classes()
    drawn = _drawn_tree()
    assert set(drawn) == set(classes)
    for name, parent in drawn.items():
        bases = [base.__name__ for base in classes[name].__bases__ if issubclass(base, errors.CudaAgentError)]
        assert bases == ([parent] if parent else []), name


def test_every_error_class_is_exported_at_the_package_root() -> None:
    assert set(_error_classes()) <= set(cuda_agent_mcp.__all__)
    for name, cls in _error_classes().items():
        assert getattr(cuda_agent_mcp, name) is cls


def test_no_module_outside_errors_py_defines_an_error_of_the_tree() -> None:
    """A subclass elsewhere would be missing from the tree (and could reuse a name, as two
    `GpuUnavailable`s once did)."""
    names = set(_error_classes())
    defined_elsewhere = []
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                if node.name in names:
                    defined_elsewhere.append(
                        f"{path.relative_to(REPO)}: {node.name} (a second class of that name)"
                    )
                for base in node.bases:
                    base_name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
                    if base_name in names:
                        defined_elsewhere.append(f"{path.relative_to(REPO)}: {node.name}({base_name})")
    assert defined_elsewhere == []
