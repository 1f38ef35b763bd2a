"""The RL examples are valid Python that imports only names that exist."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import REPO

EXAMPLES = sorted((REPO / "examples" / "rl").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_an_rl_example_parses_and_its_cuda_agent_imports_resolve(path) -> None:
    import importlib

    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cuda_agent_mcp"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{path.name}: {node.module}.{alias.name} does not exist"
