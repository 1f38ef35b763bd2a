"""What the judge's fork server imports before it forks any worker (multiprocessing's forkserver
preload): torch, the worker's own modules, and the op audit's first use, so a forked worker starts in
milliseconds instead of paying about 4 s of imports. Nothing here touches CUDA: each worker creates
its own context after the fork."""

from cuda_agent_mcp.worker.__main__ import run_forked
from cuda_agent_mcp.worker.runner import warm_up

warm_up()

__all__ = ["run_forked"]
