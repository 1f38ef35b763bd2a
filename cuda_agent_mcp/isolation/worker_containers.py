"""Worker-container primitives: the settings of an evaluation's container, which GPU it gets and under
which user, and the label that ties it to its judge process (so orphans can be found and removed).

The tool layer uses them before a judge starts (`gpu_worker_problem`) and after one is killed
(`remove_workers_of`); the judge's `judge/container_worker.py` starts the containers.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from cuda_agent_mcp.isolation.containers import DockerSettings, engine, remove_container

WORKER_LABEL = "cuda-agent-mcp.worker-of"  # value: JudgeIdentity.label()
MAX_WORKER_PIDS = 1024  # as for forked workers: torch's threads and a compile baseline's workers fit
WORKER_MEMORY_BYTES = 32 * 1024**3
_HAS_GPU_DEVICE = Path("/dev/nvidiactl")


def worker_settings(base: DockerSettings, gpu: str | None) -> DockerSettings:
    """The executor's settings with room for an evaluation: more processes (torch's threads), memory
    for real inputs, CPUs for a compile baseline, and the judge's GPU."""
    return base.model_copy(
        update={
            "pids_limit": MAX_WORKER_PIDS,
            "memory_bytes": WORKER_MEMORY_BYTES,
            "cpus": float(min(os.cpu_count() or 1, 8)),
            "gpu": gpu,
        }
    )


def judge_gpu(env: Mapping[str, str]) -> str | None:
    """The physical GPU the judge uses (its cuda:0), or None on a machine without one."""
    if not _HAS_GPU_DEVICE.exists():
        return None
    return env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or None


def gpu_worker_problem(gpu: str | None) -> str | None:
    """Why GPU workers cannot run in containers for this judge, or None. CUDA IPC (the judge's inputs,
    the worker's outputs) opens a handle only in a process of the exporter's user (measured on the H200:
    another uid gets `cudaErrorMapBufferObjectFailed`; across PID namespaces it opens, both ways, also
    measured there). So the worker runs as the judge's user, and a container never runs as root."""
    if gpu is not None and os.getuid() == 0:
        return (
            "GPU evaluation workers in containers run as the judge's user (CUDA IPC does not cross users) "
            "and containers never run as root: run the server as a non-root user, or use "
            "CUDA_AGENT_EXECUTOR=sandbox"
        )
    return None


class JudgeIdentity(NamedTuple):
    """Which judge process a worker container belongs to, as its label says: host, pid, and the pid's
    start time (so a reused pid is not mistaken for the judge). An engine may serve several hosts, so
    only containers of this host are ever judged orphans here."""

    host: str
    pid: int
    started: str

    @classmethod
    def of(cls, pid: int) -> JudgeIdentity:
        return cls(socket.gethostname(), pid, _start_time(pid))

    @classmethod
    def parse(cls, label: str) -> JudgeIdentity | None:
        parts = label.rsplit(":", 2)
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        return cls(parts[0], int(parts[1]), parts[2])

    def label(self) -> str:
        return f"{self.host}:{self.pid}:{self.started}"

    @property
    def here(self) -> bool:
        return self.host == socket.gethostname()

    @property
    def gone(self) -> bool:
        return self.here and _start_time(self.pid) != self.started


def judge_label() -> str:
    return JudgeIdentity.of(os.getpid()).label()


def _start_time(pid: int) -> str:
    """A process's start time in clock ticks since boot: with the pid, names one process for good."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def _worker_containers(client: Any) -> list[tuple[Any, JudgeIdentity | None]]:
    found = client.containers.list(all=True, filters={"label": WORKER_LABEL})
    return [(c, JudgeIdentity.parse(c.labels.get(WORKER_LABEL, ""))) for c in found]


def remove_orphans(client: Any) -> int:
    """Remove this host's worker containers whose judge process is gone (killed outright, say).
    Returns how many."""
    orphans = [
        container for container, judge in _worker_containers(client) if judge is not None and judge.gone
    ]
    for container in orphans:
        remove_container(container)
    return len(orphans)


def remove_workers_of(judge_pid: int) -> None:
    """Remove every worker container of a judge process of this host that was just killed (best effort:
    a worker whose judge is gone also exits by itself, and the next pool removes orphans)."""
    with contextlib.suppress(Exception):
        for container, judge in _worker_containers(engine(DockerSettings.from_env().image)):
            if judge is not None and judge.here and judge.pid == judge_pid:
                remove_container(container)
