"""What the judge's fork server imports before it forks any worker (multiprocessing's forkserver
preload): torch, the worker's own modules, the op audit's first use, and CuPy where it is installed (a
CuPy workspace's generated cuda_extension launches through it: 0.4 s a worker otherwise, measured on the
H200), so a forked worker starts in milliseconds instead of paying seconds of imports. Nothing here
touches CUDA: each worker creates its own context after the fork."""

import contextlib

from cuda_agent_mcp.worker.__main__ import run_forked
from cuda_agent_mcp.worker.runner import warm_up

warm_up()
with contextlib.suppress(ImportError):
    import cupy  # noqa: F401

__all__ = ["run_forked"]
