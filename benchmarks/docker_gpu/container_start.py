"""Container start to first kernel: a GPU container made as the evaluation workers' are
(`isolation/containers.py`, the GPU path chosen as for them), running torch's first CUDA kernel.

    python benchmarks/docker_gpu/container_start.py --repeats 3 --out start.json

Prints and writes, per start: engine create+start to Python running, the torch import, the first
kernel, and the total; with the GPU path used. Times come from the host's and the container's clocks,
which are one clock (same kernel).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from cuda_agent_mcp.isolation.containers import (
    DockerSettings,
    container_options,
    engine,
    remove_container,
    start_container,
    with_gpu_path,
)
from cuda_agent_mcp.isolation.worker_containers import worker_settings

PROBE = (
    "import time; t1 = time.time(); import torch; t2 = time.time(); "
    "torch.ones(1, device='cuda').add_(1); torch.cuda.synchronize(); t3 = time.time(); "
    "print('TIMES', t1, t2, t3, torch.cuda.get_device_name())"
)


def one_start(client, settings: DockerSettings, workdir: Path) -> dict[str, object]:
    options = container_options(
        settings,
        [sys.executable, "-c", PROBE],
        workdir=workdir,
        readable=[Path(sys.prefix), Path(sys.base_prefix)],
        env={"HOME": "/tmp", "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        user=f"{os.getuid()}:{os.getgid()}",
    )
    t0 = time.time()
    container = start_container(client, options, "start probe")
    try:
        status = container.wait(timeout=120).get("StatusCode")
        logs = container.logs().decode("utf-8", errors="replace")
    finally:
        remove_container(container)
    line = next((x for x in logs.splitlines() if x.startswith("TIMES ")), None)
    if status != 0 or line is None:
        return {"ok": False, "status": status, "log": logs[-2000:]}
    t1, t2, t3 = (float(v) for v in line.split()[1:4])
    return {
        "ok": True,
        "engine_to_python_s": round(t1 - t0, 3),
        "torch_import_s": round(t2 - t1, 3),
        "first_kernel_s": round(t3 - t2, 3),
        "total_s": round(t3 - t0, 3),
        "device": " ".join(line.split()[4:]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    base = DockerSettings.from_env()
    client = engine(base.image)
    settings = with_gpu_path(client, worker_settings(base, os.environ.get("CUDA_VISIBLE_DEVICES", "0")))
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"start-probe-{os.getpid()}"
    workdir.mkdir(parents=True, exist_ok=True)
    runs = [one_start(client, settings, workdir) for _ in range(args.repeats)]
    result = {
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "gpu_path": settings.gpu_path,
        "image": settings.image,
        "runs": runs,
    }
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
