"""Where the caches live (`$CUDA_AGENT_CACHE`, else the XDG cache directory): one answer for every layer
that keeps something there (builds, baselines, task probes, a fetched KernelBench), so it lives below
them all."""

from __future__ import annotations

import os
from pathlib import Path

from cuda_agent_mcp.errors import UsageError

CACHE_ENV = "CUDA_AGENT_CACHE"


def _start_directory() -> Path | None:
    try:
        return Path.cwd()
    except OSError:  # started in a directory since deleted: a relative setting cannot be resolved
        return None


# Where this process started: a relative $CUDA_AGENT_CACHE means the same directory all its life, whatever
# directory a later step (the build's sandbox, a judge) works in.
_STARTED_IN = _start_directory()


def default_cache_dir() -> Path:
    """$CUDA_AGENT_CACHE, else $XDG_CACHE_HOME/cuda-agent-mcp, else ~/.cache/cuda-agent-mcp; always
    absolute. A relative $CUDA_AGENT_CACHE is taken from the directory the process started in and written
    back resolved, so the processes it starts (which may run elsewhere) inherit the same directory. A
    relative $XDG_CACHE_HOME is ignored, as the XDG specification says."""
    if value := os.environ.get(CACHE_ENV):
        path = Path(value).expanduser()
        if not path.is_absolute():
            if _STARTED_IN is None:
                raise UsageError(
                    f"{CACHE_ENV}={value} is relative and the directory this process started in is gone: "
                    "set it to an absolute path"
                )
            path = _STARTED_IN / path
            os.environ[CACHE_ENV] = str(path)
        return path
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = str(Path.home() / ".cache")
    return Path(base) / "cuda-agent-mcp"
