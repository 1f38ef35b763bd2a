"""Shared fixtures: where the KernelBench problems are, which toolchains exist, a private build cache,
and private state for the whole run (a test never writes into the user's own journal or cache)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
KERNELBENCH = REPO.parent / "shared" / "benchmarks" / "kernelbench"


# What the package reads to find its state: the cache (build/flags.py: default_cache_dir) holds the build
# cache, judge logs, baselines and session workspaces; the state directory (tools/journal.py:
# default_state_dir) the user's own journal.
STATE_VARIABLES = {
    "CUDA_AGENT_CACHE": "cuda-agent-cache",
    "XDG_CACHE_HOME": "xdg-cache",
    "CUDA_AGENT_STATE": "cuda-agent-state",
    "XDG_STATE_HOME": "xdg-state",
}
SERVICE_VARIABLE = "CUDA_AGENT_JUDGE_SERVICE"
_saved_state: dict[str, str | None] = {}
_state_dir: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    """Point every state variable at a directory of this run, before collection imports anything; test
    subprocesses (the CLI, servers, judges) inherit it. Whatever the user's own variables say."""
    root = Path(tempfile.mkdtemp(prefix="cuda-agent-test-state-"))
    _state_dir.append(root)
    for name, sub in STATE_VARIABLES.items():
        _saved_state[name] = os.environ.get(name)
        os.environ[name] = str(root / sub)
    # No judge service outlives the run: judges are each test process's own, unless a test asks for the
    # service (tests/evaluator/test_judge_daemon_cpu.py) and stops it.
    _saved_state[SERVICE_VARIABLE] = os.environ.get(SERVICE_VARIABLE)
    os.environ[SERVICE_VARIABLE] = "off"


def pytest_unconfigure(config: pytest.Config) -> None:
    for name, value in _saved_state.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    for root in _state_dir:
        shutil.rmtree(root, ignore_errors=True)


def _toolchain_problem() -> str | None:
    from cuda_agent_mcp.build import discover_toolchain
    from cuda_agent_mcp.errors import ToolchainMissing

    try:
        discover_toolchain()
    except ToolchainMissing as exc:
        return str(exc)
    return None


def _gpu_problem() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return "no nvidia-smi"
    import torch

    return None if torch.cuda.is_available() else "torch sees no CUDA device"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    toolchain = gpu = None
    for item in items:
        if "nvcc" in item.keywords:
            toolchain = toolchain or _toolchain_problem() or ""
            if toolchain:
                item.add_marker(pytest.mark.skip(reason=f"needs nvcc and CUDA torch headers: {toolchain}"))
        if "gpu" in item.keywords:
            gpu = gpu if gpu is not None else (_gpu_problem() or "")
            if gpu:
                item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {gpu}"))


@pytest.fixture(scope="session")
def kernelbench() -> Path:
    if not (KERNELBENCH / "level1").is_dir():
        pytest.skip(f"KernelBench problems not found at {KERNELBENCH}")
    return KERNELBENCH


@pytest.fixture(scope="session")
def shared_build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build cache for the whole run: torch-header compiles are paid once, as in real use."""
    return tmp_path_factory.mktemp("build-cache")


@pytest.fixture(autouse=True, scope="module")
def _no_judge_servers_outlive_their_module():
    """Sessions share one judge pool per process; its warm servers would otherwise stay up for the rest
    of the run (and look like leaks to tests that count a process's judges)."""
    yield
    from cuda_agent_mcp.evaluation.judge_service import close_shared_judge_pool

    close_shared_judge_pool()
