"""The exception tree, sorted by who must act. Every `CudaAgentError` of the package is defined here.

    CudaAgentError
    ├── UsageError (also ValueError)      the caller's fault; raised before anything runs
    │   ├── TaskLoadError                 a task file or dataset row is malformed
    │   ├── NotFound                      no such thing (MCP resources answer it as the SDK's not-found)
    │   │   ├── TaskNotFound              no task has that id
    │   │   ├── SessionNotFound           no MCP session of this client has that id
    │   │   └── UnknownJob                no job of this client has that id
    │   ├── WorkspaceError                bad workspace path, protected file, file outside the root
    │   ├── LimitExceeded                 a session's quota or rate limit (the session lives on)
    │   └── PolicyError                   a policy preset that cannot be found, read or validated
    └── InfraError                        our fault or the machine's; never the candidate's
        ├── ToolchainMissing              nvcc, the host compiler or the torch headers are absent
        ├── FetchFailed                   KernelBench could not be downloaded (no network, a proxy, a bad URL)
        ├── ExecutorUnavailable           a process could not be started at all
        │   └── IsolationUnavailable      no sandbox view can be built here, and no opt-in to run without
        ├── GpuUnavailable                device 'cuda' was asked for where no GPU is visible
        ├── GpusDrained                   every GPU of the scheduler failed its health probe
        ├── JudgeFailed                   the judge or a harness step failed, hung or could not start (retryable)
        ├── TaskError                     the task's reference failed to run or be timed here
        └── EndpointError                 the policy's endpoint could not be reached or answered an error

A candidate's own failures (compile errors, wrong output, crashes, timeouts) are never
exceptions: they are return values, because the model learns from them.

A few exceptions are not in the tree because they never leave the code that raises them: the judge's
`FrameError`, `TransportError`, `WorkerLost`, `WorkerStartFailed` and `VerdictReached` become verdicts
or a `JudgeFailed` report, its `HarnessFault` and `TaskFault` a report's `infra_error` or `task_error`; the view's `SetupError` becomes its exit status; the agent's `InvalidCall`
becomes an observation; the episode core's `InfraFailure` (agent/failures.py) carries an `InfraError` to
the trainer.
"""

from __future__ import annotations

from pathlib import Path


class CudaAgentError(Exception):
    """Base of every error this package raises on purpose."""


class UsageError(CudaAgentError, ValueError):
    """The caller asked for something that cannot be done; nothing ran."""


class TaskLoadError(UsageError):
    """A reference program could not be loaded as a task.

    `location` names the file (and the row, for datasets); `problem` says what is wrong in
    words a user can act on. The message combines both.
    """

    def __init__(self, location: str | Path, problem: str, *, line: int | None = None) -> None:
        self.location = str(location)
        self.problem = problem
        self.line = line
        where = f"{self.location}:{line}" if line is not None else self.location
        super().__init__(f"{where}: {problem}")


class NotFound(UsageError):
    """The caller named something (a task, a session, a job) that does not exist; the message says what."""


class TaskNotFound(NotFound):
    """No task source knows the requested id."""

    def __init__(self, task_id: str, known_sources: list[str]) -> None:
        self.task_id = task_id
        self.known_sources = known_sources
        hint = ", ".join(known_sources) if known_sources else "none configured"
        super().__init__(f"unknown task {task_id!r} (task sources: {hint})")


class SessionNotFound(NotFound):
    """No MCP session of this client has the id (it ended, timed out, or belongs to another client)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"no session {session_id!r}: start one with start_session (list_sessions shows yours; "
            "sessions end with end_session or after being idle)"
        )


class UnknownJob(NotFound):
    """No such job for this client."""


class WorkspaceError(UsageError):
    """A workspace path or file operation was refused."""


class LimitExceeded(UsageError):
    """A session hit one of its quotas (workspace size, file size, files, processes, CPU time, calls per
    minute); the message names the limit and what to do. The session stays usable."""

    def __init__(self, limit: str, message: str) -> None:
        self.limit = limit
        super().__init__(message)


class PolicyError(UsageError):
    """A preset that cannot be found or does not validate."""


class InfraError(CudaAgentError):
    """The environment failed, not the candidate. `retryable` says whether trying again may help."""

    retryable: bool = False


class ToolchainMissing(InfraError):
    """A compiler or header set the build needs is not installed."""

    def __init__(self, what: str, hint: str) -> None:
        self.what = what
        self.hint = hint
        super().__init__(f"{what} not found: {hint}")


class FetchFailed(InfraError):
    """KernelBench could not be downloaded (no network, a proxy, a bad URL)."""


class ExecutorUnavailable(InfraError):
    """A process could not be started (missing binary, fork failure, resource exhaustion)."""

    retryable = True

    def __init__(self, argv0: str, reason: str) -> None:
        self.argv0 = argv0
        self.reason = reason
        super().__init__(f"could not start {argv0}: {reason}")


class GpuUnavailable(InfraError):
    """Device 'cuda' was asked for where this process can see no GPU: refused before any judge starts.
    Retrying on the same machine cannot help."""

    retryable = False

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(
            f"no GPU is visible here ({reason}): CUDA kernels need an NVIDIA GPU, so run on a GPU machine; "
            "device cpu (--device cpu) checks pure-PyTorch candidates only (a ModelNew with no kernel sources)"
        )


class IsolationUnavailable(ExecutorUnavailable):
    """The isolating executor cannot build a filesystem view on this machine and reduced isolation was
    not asked for: it refuses rather than run an agent's command unconfined."""

    retryable = False

    def __init__(self, missing: str, fix: str) -> None:
        self.missing = missing
        self.fix = fix
        super().__init__("the sandbox", f"{missing}; {fix}")


class GpusDrained(InfraError):
    """Every GPU of the scheduler is drained: nothing can run until an operator looks at them."""

    retryable = False


class JudgeFailed(InfraError):
    """The judge process itself failed, hung or could not start (not the candidate): nothing about the
    candidate can be concluded, and the result must not be scored."""

    retryable = True


class TaskError(InfraError):
    """The task's reference failed to run or to be timed here (it raised, cannot be compiled, needs more
    memory than the GPU has): no verdict on the candidate is possible, and retrying the same task will not
    help. Never scored."""

    retryable = False


class EndpointError(InfraError):
    """The endpoint could not be reached or answered with an error: not the policy's fault."""
