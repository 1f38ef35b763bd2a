"""Lint, layering and types are tests: ruff over the repo, import-linter's layer contracts and mypy over the
package, each configured in pyproject.toml."""

from __future__ import annotations

import ast
import shutil
import subprocess

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize(
    "command",
    [["ruff", "check", "."], ["ruff", "format", "--check", "."], ["lint-imports"], ["mypy"]],
    ids=["ruff-check", "ruff-format", "import-layers", "types"],
)
def test_the_code_passes(command: list[str]) -> None:
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} is not installed (it comes with the [test] extra)")
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_pydantic_field_defaults_are_keywords() -> None:
    """`Field(default=3, ...)`, never `Field(3, ...)`: type checkers and editors read the keyword form
    only (pyright reports the positional one as a missing argument)."""
    positional = []
    for path in sorted((REPO / "cuda_agent_mcp").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and node.args:
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if name == "Field":
                    positional.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not positional, "positional Field defaults: " + ", ".join(positional)
