"""What the judge's fork server imports before it forks any worker (multiprocessing's forkserver
preload): torch, the worker's own modules, the op audit's first use, and CuPy and Triton where they are
installed (a CuPy workspace's generated cuda_extension launches through CuPy: 0.4 s a worker otherwise;
a Triton workspace imports Triton: 0.46 s; both measured on the H200), so a forked worker starts in milliseconds instead of paying seconds of imports. Nothing here
touches CUDA: each worker creates its own context after the fork."""

import contextlib

from cuda_agent_mcp.worker.__main__ import run_forked
from cuda_agent_mcp.worker.runner import warm_up

warm_up()
with contextlib.suppress(ImportError):
    import cupy  # noqa: F401
with contextlib.suppress(ImportError):
    import triton
    import triton.language  # noqa: F401

__all__ = ["run_forked"]
