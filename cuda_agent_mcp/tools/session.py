"""A Session: one task, its workspace, and the executor and build cache its tools use."""

from __future__ import annotations

import hashlib
import os
import secrets
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent_mcp.build import (
    BuildCache,
    Builder,
    BuildFlags,
    BuildLimits,
    default_cache_dir,
    detect_arch,
    discover_toolchain,
)
from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.evaluation.job import WORKERS_ENV, WorkerBackend
from cuda_agent_mcp.evaluation.judge_client import Judges, judges_for
from cuda_agent_mcp.executors import (
    DockerExecutor,
    Executor,
    SandboxPolicy,
    default_executor,
    isolating_executor,
)
from cuda_agent_mcp.executors.local import child_python_path, scrubbed_env
from cuda_agent_mcp.executors.scheduler import GpuScheduler
from cuda_agent_mcp.isolation.containers import IMAGE_ENV, check_gpu_reachable
from cuda_agent_mcp.isolation.quota import SessionQuotas
from cuda_agent_mcp.isolation.worker_containers import gpu_worker_problem, judge_gpu
from cuda_agent_mcp.results import KernelLanguage
from cuda_agent_mcp.tasks import Task
from cuda_agent_mcp.tools.journal import Journal, default_journal_path, open_journal
from cuda_agent_mcp.workspace import Workspace


@dataclass
class Session:
    """Everything a tool call needs; front-ends hold one per agent conversation or episode."""

    task: Task
    workspace: Workspace
    # Builds run here (default: $CUDA_AGENT_EXECUTOR, the sandbox unless asked otherwise, with the
    # session's file-size and process quotas).
    executor: Executor = None  # type: ignore[assignment]  # None: chosen in __post_init__
    cache_dir: Path = field(default_factory=default_cache_dir)
    build_limits: BuildLimits = field(default_factory=BuildLimits)
    # One scheduler per process, shared by all its sessions; None (a CLI run) means no leasing.
    scheduler: GpuScheduler | None = None
    # Warm judge servers: the user's judge service where one runs (or the CLI starts one), else one pool
    # per process, shared by all its sessions (evaluation/judge_client.py).
    judges: Judges = field(default_factory=lambda: judges_for(default_cache_dir()))
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    # Every evaluation result, written before it is returned (default: the user's own journal, in their
    # state directory: never the cache, which may be shared).
    journal: Journal = None  # type: ignore[assignment]  # None: opened in __post_init__
    # None: every evaluation draws secret random seeds. An integer (set by an RL environment or a
    # trainer, never by the agent under test): evaluations draw a fixed sequence derived from it, so an
    # episode's verify inputs can be replayed. Timings stay measurements.
    seed: int | None = None
    quotas: SessionQuotas = field(default_factory=SessionQuotas)
    # Whether this session laid out its workspace (then its files are lent to the session's uid for good);
    # a directory opened in place gets its owner back after every command.
    workspace_owned: bool = False
    # Set when the reference came from a client the server does not trust with other clients' work (an
    # MCP client's own reference_source): its judges are its own, never shared with other clients'.
    judge_tenant: str | None = None
    _builder: Builder | None = field(default=None, init=False, repr=False)
    _run_executor: Executor | None = field(default=None, init=False, repr=False)
    _seeds_drawn: int = field(default=0, init=False, repr=False)
    _gpus_reachable: set[str] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.executor is None:
            self.executor = default_executor(self.sandbox_policy)
        if self.journal is None:
            self.journal = open_journal(default_journal_path())

    @property
    def sandbox_policy(self) -> SandboxPolicy:
        return SandboxPolicy(
            max_file_bytes=self.quotas.command_file_bytes,
            max_processes=self.quotas.processes,
            max_cpu_seconds=self.quotas.cpu_seconds,
        )

    @property
    def run_executor(self) -> Executor:
        """Where the agent's own commands run: always an isolating executor (the session's when it
        isolates), one per session so they keep one uid."""
        if self._run_executor is None:
            self._run_executor = isolating_executor(self.executor, self.sandbox_policy)
        return self._run_executor

    @classmethod
    def create(
        cls,
        task: Task,
        directory: str | Path,
        *,
        overwrite: bool = False,
        language: KernelLanguage = "cuda",
        **options: Any,
    ) -> Session:
        """Lay out a new workspace for `task`, its kernels in `language`, and open a session on it."""
        workspace = Workspace.create(task, directory, overwrite=overwrite, language=language)
        return cls(task, workspace, workspace_owned=True, **options)

    @classmethod
    def open(cls, directory: str | Path, **options: Any) -> Session:
        """Open a session on an existing workspace directory; its model.py is the reference."""
        workspace = Workspace.open(directory)
        return cls(workspace.task(), workspace, **options)

    def draw_seed(self) -> int:
        """The next input seed of an evaluation (62 bits): secret and random, or from `seed`'s sequence."""
        if self.seed is None:
            return secrets.randbits(62)
        self._seeds_drawn += 1
        digest = hashlib.sha256(f"{self.seed}:{self._seeds_drawn}".encode()).digest()
        return int.from_bytes(digest[:8], "big") >> 2

    def build_flags(self, arch: str | None = None) -> BuildFlags:
        return BuildFlags(
            arch=arch or detect_arch(self.cache_dir),
            use_fast_math=self.task.policy.use_fast_math,
            vendor_libraries=self.task.vendor_libraries,
            torch_headers=self.task.policy.torch_headers_in_cuda,
        )

    def prewarm_judge(self) -> bool:
        """Start a judge server in the background where evaluations will need one: this machine has a
        GPU and no scheduler picks it per call. Called when a build starts, so the judge's start (about
        2 s) overlaps the build instead of the next verify. True when a start began."""
        if self.scheduler is not None or not _HAS_GPU_DEVICE.exists():
            return False
        return self.judges.prewarm(judge_env(None, self.worker_backend, self.judge_tenant))

    @property
    def worker_backend(self) -> WorkerBackend:
        """Where evaluation workers run: in containers when the session's executor is Docker."""
        return "docker" if isinstance(self.executor, DockerExecutor) else "fork"

    def check_worker_backend(self, env: dict[str, str]) -> None:
        """Before a judge with container workers starts (it would fail in its log otherwise): the engine
        and the image answer, and on a GPU the judge is not root and a container can be given the GPU.
        ExecutorUnavailable says why not."""
        if isinstance(self.executor, DockerExecutor):
            client = self.executor.client()
            gpu = judge_gpu(env)
            if (problem := gpu_worker_problem(gpu)) is not None:
                raise ExecutorUnavailable("docker", problem)
            if gpu is not None and gpu not in self._gpus_reachable:  # once: this runs before each evaluation
                check_gpu_reachable(client, self.executor.settings.model_copy(update={"gpu": gpu}))
                self._gpus_reachable.add(gpu)

    @property
    def builder(self) -> Builder:
        """Created on first use, so sessions that never compile need no toolchain."""
        if self._builder is None:
            self._builder = Builder(
                discover_toolchain(self.cache_dir),
                BuildCache(self.cache_dir),
                self.executor,
                self.build_limits,
            )
        return self._builder


_HAS_GPU_DEVICE = Path("/dev/nvidiactl")


JUDGE_TENANT_ENV = "CUDA_AGENT_JUDGE_TENANT"


def judge_env(
    leased_gpu: int | None, workers: WorkerBackend = "fork", tenant: str | None = None
) -> dict[str, str]:
    """The environment judge servers (and their workers) run with: scrubbed, plus the GPU selection
    (the leased GPU, else the caller's own CUDA_VISIBLE_DEVICES), where workers run (forked, or in
    containers: then also the engine and image) and the tenant whose own references the judge imports
    (so judges never mix clients' references). Pool keys are built from it."""
    if leased_gpu is not None:
        selection = {"CUDA_VISIBLE_DEVICES": str(leased_gpu)}
    else:
        selection = {k: v for k in ("CUDA_VISIBLE_DEVICES",) if (v := os.environ.get(k)) is not None}
    backend: dict[str, str] = {WORKERS_ENV: workers}
    if workers == "docker":
        backend |= {k: v for k in ("DOCKER_HOST", IMAGE_ENV) if (v := os.environ.get(k)) is not None}
    owner = {JUDGE_TENANT_ENV: tenant} if tenant else {}
    return scrubbed_env({"PYTHONPATH": child_python_path(), **selection, **backend, **owner})
