"""A relative $CUDA_AGENT_CACHE names one absolute directory for the whole process, taken from where it
started, and the processes it starts inherit that absolute directory (a judge or a sandboxed build works
in another directory)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

PROBE = """
import os, subprocess, sys
from cuda_agent_mcp.build import default_cache_dir
print(default_cache_dir())
os.chdir(sys.argv[1])
print(default_cache_dir())
child = "import os; from cuda_agent_mcp.build import default_cache_dir; print(os.environ['CUDA_AGENT_CACHE']); print(default_cache_dir())"
print(subprocess.run([sys.executable, "-c", child], cwd=sys.argv[1], capture_output=True, text=True, check=True).stdout, end="")
"""


def test_a_relative_cache_is_resolved_once_from_the_start_directory_and_passed_on_absolute(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "CUDA_AGENT_CACHE": "relative/dir", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(elsewhere)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    expected = str(tmp_path / "relative" / "dir")
    # at start, after a chdir, and in a child started in another directory (its env and its own view)
    assert done.stdout.splitlines() == [expected] * 4


def test_a_relative_xdg_cache_home_is_ignored_as_the_specification_says(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_AGENT_CACHE"}
    env |= {"XDG_CACHE_HOME": "rel", "HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    probe = "from cuda_agent_mcp.build import default_cache_dir; print(default_cache_dir())"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.stdout.strip() == str(tmp_path / "home" / ".cache" / "cuda-agent-mcp"), done.stderr
