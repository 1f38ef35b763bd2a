"""The isolating process executor: every command in fresh namespaces, a filesystem view, another uid, limits.

    namespaces (default):  python -I -S isolation/view_main.py SPEC   (see isolation/view.py)
    bubblewrap:            [setpriv --reuid U] bwrap --unshare-net --unshare-pid <view> -- prlimit ... -- CMD
    landlock:              python -I -S isolation/view_main.py SPEC   (no namespaces: Landlock and rlimits)

The first that works here is used (probed once; `$CUDA_AGENT_SANDBOX_VIEW` forces one, `none` forces the
refusal, for tests). What any of them gives:
- a filesystem view: the system directories and the paths the caller declares read-only, the working
  directory read-write, a private /tmp; not the server's files, tokens, journal, build cache or home,
  not other workspaces;
- a uid of its own when this process is root (`isolation/uids.py`): never root, never the server;
- no network, and a PID namespace: when the command ends everything it started dies with it;
- limits: a pids cgroup (a fork bomb stops at `max_processes`), CPU seconds, file size, open files;
- with a `quota` (the run tool's workspace): writes past the session's remaining bytes or files fail with
  ENOSPC while the command runs (an overlay whose upper layer is a tmpfs of that size), or, where no
  overlay can be mounted, the command is killed as soon as a poll sees the quota passed.

Where no view can be built the executor refuses (`IsolationUnavailable`, naming what is missing and the
fix) unless reduced isolation was asked for (`$CUDA_AGENT_ALLOW_REDUCED_ISOLATION=1`, `cuda-agent serve
--allow-reduced-isolation`): then it runs with what the machine allows and `isolation` says
`reduced-isolation`.
"""

from __future__ import annotations

import contextlib
import marshal
import math
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
import weakref
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.errors import IsolationUnavailable
from cuda_agent_mcp.executors.base import ProcessLimits, ProcessResult
from cuda_agent_mcp.executors.local import LocalExecutor, scrubbed_env
from cuda_agent_mcp.isolation import landlock
from cuda_agent_mcp.isolation.bubblewrap import ETC_ENTRIES, SYSTEM_DIRS, filesystem_view
from cuda_agent_mcp.isolation.cgroup import PidsCgroup
from cuda_agent_mcp.isolation.identity import identity_env
from cuda_agent_mcp.isolation.namespaces import NAMESPACE_OPTIONS, available_isolation
from cuda_agent_mcp.isolation.quota import QuotaOutcome, WorkspaceQuota
from cuda_agent_mcp.isolation.uids import allocate_session_uid, lend_tree, release_session_uid

REDUCED_ISOLATION_ENV = "CUDA_AGENT_ALLOW_REDUCED_ISOLATION"
VIEW_ENV = "CUDA_AGENT_SANDBOX_VIEW"
ViewBackend = Literal["namespaces", "bwrap", "landlock"]
_VIEW_SCRIPT = Path(__file__).resolve().parent.parent / "isolation" / "view_main.py"
_MERGE_GRACE_S = 30.0  # after the command's deadline: killing what is left and merging its writes


class SandboxPolicy(BaseModel):
    """Resource limits applied to every command (on top of the per-call time and output limits)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_file_bytes: int = Field(default=256 * 1024**2, gt=0, description="largest file a command may write")
    max_open_files: int = Field(default=4096, gt=16)
    cpu_seconds_margin: float = Field(
        default=5.0, ge=0, description="CPU-time limit = wall-clock limit + this"
    )
    max_processes: int = Field(default=256, gt=8, description="processes and threads at once (pids cgroup)")
    tmp_bytes: int = Field(default=1024**3, gt=0, description="size of the private /tmp and /dev/shm")
    max_cpu_seconds: float | None = Field(
        default=None, gt=0, description="CPU seconds per process; None: the wall-clock limit + the margin"
    )


def reduced_isolation_allowed() -> bool:
    return os.environ.get(REDUCED_ISOLATION_ENV) == "1"


@cache
def view_mountpoint() -> Path:
    """An empty directory the view's root is mounted on, inside each command's private mount namespace
    (so one directory serves every concurrent command). Ours, a directory, not a link."""
    path = Path(tempfile.gettempdir()) / f"cuda-agent-view-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o755)
    info = path.lstat()
    if not path.is_dir() or path.is_symlink() or info.st_uid != os.geteuid():
        raise IsolationUnavailable(f"{path} is not a directory of ours", "remove it and try again")
    return path


@cache
def view_problems() -> tuple[tuple[ViewBackend, str], ...]:
    """Why each backend cannot build a view here (empty for one that can), probed once."""
    forced = os.environ.get(VIEW_ENV)
    names: tuple[ViewBackend, ...] = ("namespaces", "bwrap", "landlock")
    problems = []
    for name in names:
        if forced and forced != name:
            problems.append((name, f"not chosen (${VIEW_ENV}={forced})"))
            continue
        problems.append((name, _probe(name)))
    return tuple(problems)


@cache
def view_backend() -> ViewBackend | None:
    """The first backend that builds a view here, or None."""
    return next((name for name, problem in view_problems() if not problem), None)


def _probe(backend: ViewBackend) -> str:
    """'' when `backend` runs a trivial command here, else why not (one short phrase)."""
    if backend == "bwrap":
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            return "bubblewrap is not installed"
        probe = [bwrap, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--die-with-parent", "true"]
        if os.geteuid() == 0:
            probe = ["setpriv", f"--reuid={_PROBE_UID}", f"--regid={_PROBE_UID}", "--clear-groups", *probe]
        return _probe_run(probe, "bubblewrap")
    if backend == "landlock":
        if os.geteuid() == 0:
            return "Landlock alone cannot run commands as another user"
        if landlock.abi_version() < 1:
            return "the kernel has no Landlock"
    executor = SandboxedExecutor.__new__(SandboxedExecutor)
    executor.policy = SandboxPolicy()
    executor.backend = backend
    executor.uid = _PROBE_UID if os.geteuid() == 0 else None
    with tempfile.TemporaryDirectory(prefix="cuda-agent-probe-") as directory:
        if executor.uid is not None:
            os.chown(directory, executor.uid, executor.uid)
        spec = executor.view_spec(["true"], Path(directory), ProcessLimits(timeout_s=10), (), (), None, "")
        argv = [sys.executable, "-I", "-S", str(_VIEW_SCRIPT), marshal.dumps(spec).hex()]
        return _probe_run(argv, "the namespace view" if backend == "namespaces" else "the Landlock view")


_PROBE_UID = 65534  # nobody: only for the probes


def _probe_run(argv: list[str], what: str) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=20, cwd="/")
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{what} could not start ({exc})"
    if done.returncode == 0:
        return ""
    lines = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
    return f"{what} failed ({lines[-1] if lines else f'exit status {done.returncode}'})"


def refusal() -> IsolationUnavailable:
    """The one-line refusal: what each way of building a view lacks here, and the fixes."""
    missing = "; ".join(f"{name}: {problem}" for name, problem in view_problems())
    return IsolationUnavailable(
        f"no filesystem view can be built here ({missing})",
        "allow user and mount namespaces (or run as root), or install bubblewrap; for single-user local "
        f"use only, {REDUCED_ISOLATION_ENV}=1 (or `cuda-agent serve --allow-reduced-isolation`) runs "
        "commands with reduced isolation",
    )


def isolation_report() -> list[str]:
    """What every isolating command gets on this machine, as `isolation` lists it (server start, results)."""
    executor = SandboxedExecutor.__new__(SandboxedExecutor)
    executor.policy = SandboxPolicy()
    executor.backend = view_backend()
    executor.uid = 0 if os.geteuid() == 0 else None
    return list(executor.isolation)


class SandboxedExecutor:
    """Runs commands like LocalExecutor, inside a view, as its own uid (see the module docstring)."""

    name = "sandbox"

    def __init__(self, policy: SandboxPolicy | None = None) -> None:
        self.policy = policy or SandboxPolicy()
        self.backend: ViewBackend | None = view_backend()
        if self.backend is None and not reduced_isolation_allowed():
            raise refusal()
        # One uid per executor (one executor per session); released when the executor is collected.
        self.uid: int | None = allocate_session_uid()
        if self.uid is not None:
            weakref.finalize(self, release_session_uid, self.uid)
        self._inner = LocalExecutor()

    @property
    def isolation(self) -> tuple[str, ...]:
        if self.backend is None:
            return ("reduced-isolation", *available_isolation())
        layers = ["filesystem", f"view:{self.backend}"]
        if self.backend != "landlock":
            layers = ["network", "pid", *layers]
        layers.append("user" if self.uid is not None else "user:same-as-server")
        if self.backend != "bwrap" and landlock.abi_version() > 0:
            layers.append("landlock")
        layers.append("rlimits")
        return tuple(layers)

    # -- the command line ---------------------------------------------------------------------------

    def view_spec(
        self,
        argv: Sequence[str],
        cwd: Path,
        limits: ProcessLimits,
        readable: Sequence[Path],
        protected: Sequence[Path],
        quota: WorkspaceQuota | None,
        status_path: str,
        cgroup: Path | None = None,
    ) -> dict[str, object]:
        """What view.py is told: a plain JSON object (it runs without this package)."""
        overlay = quota is not None and self.backend == "namespaces"
        # The directories of PATH too: a command is looked up there, inside the view.
        on_path = [Path(d) for d in os.environ.get("PATH", "").split(os.pathsep) if d and os.path.isabs(d)]
        wanted = [*readable, *on_path]
        readable_paths = sorted({str(p) for path in wanted for p in _both_names(Path(path))}, key=len)
        return {
            "mode": self.backend,
            "argv": [str(a) for a in argv],
            "cwd": str(cwd),
            "system": [p for p in SYSTEM_DIRS if os.path.lexists(p)],
            "etc": list(ETC_ENTRIES),
            "readable": readable_paths,
            "protected": [str(p) for p in protected],
            "scratch": [],
            "tmp_bytes": self.policy.tmp_bytes,
            "uid": self.uid,
            "gid": self.uid,
            "rlimits": self._rlimits(limits),
            "cgroup": str(cgroup) if cgroup else None,
            "quota": quota.model_dump() if overlay and quota else None,
            "watch": quota.model_dump() if quota is not None and not overlay else None,
            "deadline_s": limits.timeout_s,
            "mountpoint": str(view_mountpoint()) if self.backend == "namespaces" else "",
            "status_path": status_path,
            "userns": os.geteuid() != 0,
        }

    def _rlimits(self, limits: ProcessLimits) -> dict[str, int]:
        rlimits = {
            "cpu": math.ceil(min(limits.timeout_s + self.policy.cpu_seconds_margin, self._cpu_cap())),
            "fsize": self.policy.max_file_bytes,
            "nofile": self.policy.max_open_files,
            "core": 0,
        }
        if self.uid is not None:  # a uid of its own: its process count is this command's alone
            # A little above the cgroup's cap, which (where there is one) is reached first and counted.
            rlimits["nproc"] = self.policy.max_processes + 16
        return rlimits

    def _cpu_cap(self) -> float:
        return self.policy.max_cpu_seconds if self.policy.max_cpu_seconds is not None else math.inf

    def wrap(
        self, argv: Sequence[str], limits: ProcessLimits, cwd: Path, readable: Sequence[Path] = ()
    ) -> list[str]:
        """The bubblewrap (or reduced) command line: namespaces and the view outside, limits inside."""
        command: list[str] = []
        if self.backend == "bwrap":
            if self.uid is not None:
                command += ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups"]
            command += ["bwrap", "--unshare-net", "--unshare-pid", "--die-with-parent"]
            command += [*filesystem_view(cwd, readable), "--"]
        elif isolation := available_isolation():
            command += ["unshare"]
            for name in isolation:
                command += NAMESPACE_OPTIONS[name]
            command += ["--"]
        if shutil.which("prlimit"):
            command += ["prlimit", *(f"--{k}={v}" for k, v in self._rlimits(limits).items() if k != "nproc")]
            command += ["--"]
        return [*command, *map(str, argv)]

    # -- running --------------------------------------------------------------------------------------

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        limits: ProcessLimits,
        env: Mapping[str, str] | None = None,
        readable: Sequence[Path] = (),
        protected: Sequence[Path] = (),
        quota: WorkspaceQuota | None = None,
    ) -> ProcessResult:
        """Run `argv` in `cwd`. `protected` files stay read-only in the view; `quota` bounds what the
        command may add to `cwd` (`run_with_outcome` also says whether it was reached)."""
        result, _ = await self.run_with_outcome(
            argv, cwd=cwd, limits=limits, env=env, readable=readable, protected=protected, quota=quota
        )
        return result

    async def run_with_outcome(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        limits: ProcessLimits,
        env: Mapping[str, str] | None = None,
        readable: Sequence[Path] = (),
        protected: Sequence[Path] = (),
        quota: WorkspaceQuota | None = None,
    ) -> tuple[ProcessResult, QuotaOutcome]:
        """`run`, plus what the view reported: the deadline, a quota passed, a failed merge."""
        env = self._with_identity(env)
        if self.uid is not None:
            await anyio.to_thread.run_sync(lend_tree, cwd, self.uid, tuple(protected))
        cgroup = PidsCgroup.create(f"worker-run-{uuid.uuid4().hex[:12]}", max_pids=self.policy.max_processes)
        try:
            if self.backend in ("namespaces", "landlock"):
                result, outcome = await self._run_view(
                    argv, cwd, limits, env, readable, protected, quota, cgroup
                )
            else:
                command = self.wrap(argv, limits, cwd, readable)
                if cgroup is not None:
                    # The shell joins the cgroup and becomes the command, so everything it starts is counted.
                    command = [
                        "sh",
                        "-c",
                        'echo $$ > "$0/cgroup.procs" && exec "$@"',
                        str(cgroup.path),
                        *command,
                    ]
                result = await self._inner.run(command, cwd=cwd, limits=limits, env=env)
                result, outcome = result.model_copy(update={"argv": [str(a) for a in argv]}), QuotaOutcome()
            if cgroup is not None and (refused := cgroup.forks_refused()):
                outcome = outcome.model_copy(update={"forks_refused": refused})
            return result, outcome
        finally:
            if cgroup is not None:
                await anyio.to_thread.run_sync(cgroup.remove)

    def _with_identity(self, env: Mapping[str, str] | None) -> dict[str, str]:
        """`env` (by default the scrubbed one) with the identity of the uid the command runs as, its HOME
        kept: no login gives USER or LOGNAME, the session uids have no passwd entry, and
        `getpass.getuser()` (torch 2.11's inductor asks it) fails without them (issue 23)."""
        base = dict(env) if env is not None else scrubbed_env()
        uid = self.uid if self.uid is not None else os.getuid()
        return {**base, **identity_env(uid, base.get("HOME", "/tmp"))}

    async def _run_view(
        self,
        argv: Sequence[str],
        cwd: Path,
        limits: ProcessLimits,
        env: Mapping[str, str] | None,
        readable: Sequence[Path],
        protected: Sequence[Path],
        quota: WorkspaceQuota | None,
        cgroup: PidsCgroup | None,
    ) -> tuple[ProcessResult, QuotaOutcome]:
        with tempfile.TemporaryDirectory(prefix="cuda-agent-run-") as private:
            status_path = Path(private) / "status"
            status_path.touch(mode=0o600)
            spec = self.view_spec(
                argv,
                cwd,
                limits,
                readable,
                protected,
                quota,
                str(status_path),
                cgroup.path if cgroup else None,
            )
            environment = dict(env) if env is not None else None
            if (
                self.backend == "landlock"
            ):  # no private /tmp without a mount namespace: a directory of its own
                scratch = Path(private) / "tmp"
                scratch.mkdir()
                spec["scratch"] = [str(scratch)]
                environment = {**(environment or {}), "TMPDIR": str(scratch)}
            command = [sys.executable, "-I", "-S", str(_VIEW_SCRIPT), marshal.dumps(spec).hex()]
            outer = limits.model_copy(update={"timeout_s": limits.timeout_s + _MERGE_GRACE_S})
            result = await self._inner.run(command, cwd=cwd, limits=outer, env=environment)
            status = status_path.read_bytes()
        # The view's own report (written by the trusted helper, never by the command: it is outside the view).
        outcome = QuotaOutcome.model_validate(marshal.loads(status)) if status else QuotaOutcome()
        update: dict[str, object] = {"argv": [str(a) for a in argv]}
        if outcome.timed_out:
            update |= {"timed_out": True, "returncode": None}
        return result.model_copy(update=update), outcome


def _both_names(path: Path) -> set[Path]:
    """A path and, when it goes through a link, where it leads (a toolchain may use either spelling)."""
    names = {Path(os.path.abspath(path))}
    with contextlib.suppress(OSError):
        names.add(path.resolve())
    return names
