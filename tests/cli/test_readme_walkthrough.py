"""The README's first hour on a machine without a GPU, as benchmarks/newcomer_walkthrough.py walks it:
a fresh clone, a fresh home, every command under a pseudo-terminal. No step may print a traceback, stay
silent for a minute or exit other than the README says; the MCP tool list stays within 30 KB. (The
walk-through's 2-second first-word rule is a timing, recorded with its results, not asserted here.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.nvcc


def test_a_newcomer_follows_the_readme_without_a_traceback_or_a_silent_minute(
    tmp_path: Path, kernelbench: Path
) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("the walk-through is the no-GPU path: here verify and eval would run on the GPU")
    out = tmp_path / "walk.json"
    run = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "newcomer_walkthrough.py"), "--kernelbench", str(kernelbench),
         "--out", str(out)],
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert out.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(out.read_text())
    for step in result["steps"]:
        where = (step["name"], step["head"])
        assert not step["traceback"], where
        assert step["rc"] in step["expect_rc"], where
        assert step["longest_silence_s"] < 60, where
    assert result["mcp_tool_list"]["bytes"] <= 30_000
