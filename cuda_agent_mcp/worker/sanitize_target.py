"""The candidate under compute-sanitizer: `compute-sanitizer --tool T python -m
cuda_agent_mcp.worker.sanitize_target`, started ahead by the judge (judge/sanitize.py).

Untrusted side. It pays the interpreter start and the torch import while it waits (the judge keeps one
started ahead, judge/sanitize.py), then reads one request line on stdin: the candidate's directory and a
file of plain tensors the judge wrote
(the weights, the constructor's arguments, one call's inputs at the smallest size the task allows). It
enters the worker's Landlock view, builds ModelNew, copies the inputs into memory it allocates itself
(the sanitizer checks accesses against this process's own allocations), calls forward once and
synchronises. The sanitizer's report, not this process, says what happened: a candidate that notices
the sanitizer can only make it find nothing, which proves nothing (the gate rejects, never vouches).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> None:
    import torch

    from cuda_agent_mcp.isolation.landlock import confine, python_paths
    from cuda_agent_mcp.worker.__main__ import limit_resources

    limit_resources()
    line = sys.stdin.readline()
    if not line:  # the judge ended before it needed us
        os._exit(0)
    request = json.loads(line)
    # A context only now: a target waiting ahead holds none, so NVML shows nothing on the GPU for it.
    torch.cuda.init()
    torch.empty(1, device="cuda")  # the context exists before the view (cuInit fails inside it)
    directory, payload = Path(request["directory"]), Path(request["payload"])
    # Abstract sockets stay open to the sanitizer's front end, which is outside this domain and talks to
    # its injected part in here; signals to it (and to the judge) stay scoped.
    confine(readable=[directory, payload.parent, *python_paths()], writable=[Path.cwd()], scope_sockets=False)
    data = torch.load(payload, weights_only=True)
    sys.path.insert(0, str(directory))
    from model_new import ModelNew  # type: ignore[import-not-found]  # the candidate, on sys.path only here

    with torch.no_grad():
        model = ModelNew(*data["init_args"]).cuda().eval()
        if data["state"]:
            model.load_state_dict(data["state"], strict=True)
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in data["inputs"]]
        model(*inputs)
        torch.cuda.synchronize()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
