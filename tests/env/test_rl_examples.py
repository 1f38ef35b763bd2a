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
            try:
                module = importlib.import_module(node.module)
            except ModuleNotFoundError as exc:  # an adapter whose framework lives in its own environment
                if exc.name and exc.name.split(".")[0] != "cuda_agent_mcp":
                    pytest.skip(f"{path.name} needs {exc.name}, not installed here")
                raise
            for alias in node.names:
                assert hasattr(module, alias.name), f"{path.name}: {node.module}.{alias.name} does not exist"
