"""Lint, layering and types are tests: ruff over the repo, import-linter's layer contracts and mypy over the
package, each configured in pyproject.toml."""

from __future__ import annotations

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
