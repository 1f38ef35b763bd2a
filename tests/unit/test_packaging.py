"""The wheel carries every bundled example source (pyproject lists them one by one, so build outputs in
examples/ stay out): a new example file that is not listed fails here. examples/mcp (client
configurations, not tasks) is not bundled."""

from __future__ import annotations

import subprocess
import tomllib

from tests.conftest import EXAMPLES, REPO


def test_every_example_source_is_in_the_wheel_and_nothing_else() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    included = config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    listed = {path for path in included if path.startswith("examples/")}
    sources = {
        path.relative_to(REPO).as_posix()
        for path in EXAMPLES.rglob("*")
        if path.is_file()
        and (EXAMPLES / path.relative_to(EXAMPLES).parts[0] / "model.py").exists()  # task examples only
        and path.suffix in (".py", ".cu", ".cpp", ".h", ".cuh", ".md")
        and "__pycache__" not in path.parts
    }
    assert listed == sources


def test_the_bundled_policies_travel_where_the_loader_looks_for_them() -> None:
    from cuda_agent_mcp.agent.policy import BUNDLED_DIRS

    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    target = config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]["policies"]
    assert (REPO / "cuda_agent_mcp").parent / target in BUNDLED_DIRS


def test_the_package_says_it_is_typed_and_the_wheel_carries_the_marker() -> None:
    """PEP 561: `py.typed` in the package tells type checkers of projects that import us to read our
    annotations. The wheel takes the package directory whole (hatch's `packages`), less what git ignores."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "cuda_agent_mcp" in config["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    assert (REPO / "cuda_agent_mcp" / "py.typed").is_file()
    ignored = subprocess.run(["git", "check-ignore", "-q", "cuda_agent_mcp/py.typed"], cwd=REPO, check=False)
    assert ignored.returncode == 1  # 1: not ignored (0 would mean ignored, 128 an error)
