"""The wire: the only code both the judge and the untrusted worker import, and the names processes are
started by.

`protocol.py` (length-prefixed JSON frames and the request and reply models), `refs.py` (tensors as plain
references: CUDA IPC handles or shared-memory files; no torch), `transport.py` (tensors to and from those
references; torch), `lifetime.py` (a worker dies with its judge), `paused_gc.py` (no collection inside a
clock). The tool layer imports `protocol` and `refs` (torch-free) to speak to judge servers.

The judge never imports worker code: it starts workers by the module names below (a fork server preloads
`PRELOAD_MODULE`, a forked worker imports `WORKER_MODULE` in the child, a container runs `python -m
WORKER_PACKAGE`), and the tool layer starts judge servers as `python -m JUDGE_MODULE`. No other code names
these modules (tests/unit/test_process_entries.py checks it).
"""

from __future__ import annotations

from pathlib import Path

JUDGE_MODULE = "cuda_agent_mcp.judge"  # `python -m`: judge/__main__.py, the judge server
WORKER_PACKAGE = "cuda_agent_mcp.worker"  # `python -m`: worker/__main__.py, a worker on a socket
WORKER_MODULE = f"{WORKER_PACKAGE}.__main__"  # the worker's entry: `main`, and `run_forked` for a fork
PRELOAD_MODULE = f"{WORKER_PACKAGE}.preload"  # what the judge's fork server imports ahead of any fork
SANITIZE_TARGET_MODULE = f"{WORKER_PACKAGE}.sanitize_target"  # `python -m` under compute-sanitizer
NCU_TARGET_MODULE = f"{WORKER_PACKAGE}.ncu_target"  # a script run by its path (copied) under Nsight Compute


def module_file(module: str) -> Path:
    """The source file of one of the modules above, found without importing it (or its package)."""
    parts = module.split(".")
    if parts[0] != "cuda_agent_mcp" or len(parts) < 2:
        raise ValueError(f"{module} is not a module of this package")
    return Path(__file__).resolve().parent.parent.joinpath(*parts[1:]).with_suffix(".py")
