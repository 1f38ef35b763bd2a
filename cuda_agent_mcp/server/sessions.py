"""The sessions an MCP server holds: created from a task id, reference source text or a local directory.

The server owns the workspaces it creates, under a directory of its own (`<root>/<server id>/`, with the
owning process recorded): `end` removes a workspace (or moves it to the archive, when one is set), an
idle session (no call for `idle_timeout_s`, default 1 h) is ended the same way with its running jobs
cancelled, a stdio server ends its sessions at exit, and the next server on the same root removes (or
archives) what a killed server left. A local directory is opened in place and left alone; only the
local client (stdio) may open one. A session's history comes from the journal, so it survives the server.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.errors import LimitExceeded, SessionNotFound, UsageError
from cuda_agent_mcp.evaluation.rules_version import VERDICT_RULES_VERSION
from cuda_agent_mcp.executors.scheduler import GpuScheduler
from cuda_agent_mcp.isolation.quota import CallRate, SessionQuotas
from cuda_agent_mcp.results import KernelLanguage
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.tasks.model import TaskSource
from cuda_agent_mcp.tasks.single_file import task_from_source
from cuda_agent_mcp.tools import Session
from cuda_agent_mcp.tools.journal import JournalRecord
from cuda_agent_mcp.workspace import REFERENCE_FILE
from cuda_agent_mcp.workspace import files as workspace_files

_log = logging.getLogger(__name__)

LOCAL_CLIENT = "local"  # stdio and in-process clients: whoever started the server
_OWNER_FILE = "server.json"
_HOW_TO_END = (
    "end one with end_session (list_sessions shows yours; idle sessions end by themselves after {idle})"
)


class SessionInfo(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    task_id: str
    task_name: str
    workspace: str = Field(description="the workspace directory on the server's machine")
    files: list[str] = Field(description="workspace files the agent may edit, and the protected ones")
    protected: list[str] = Field(description="harness files: readable, never trusted if edited")
    language: KernelLanguage = Field(
        default="cuda", description="what this workspace's kernels are written in"
    )
    isolation: list[str] = Field(
        default_factory=list, description="what confines this session's commands and builds on this server"
    )
    quotas: SessionQuotas = Field(default_factory=SessionQuotas)


class SessionSummary(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    task_id: str
    workspace: str
    language: KernelLanguage = Field(default="cuda", description="what its kernels are written in")
    started_at: float
    idle_s: float = Field(description="seconds since the session's last call")
    ends_in_s: float | None = Field(description="seconds until it ends for being idle; None: never")


class SessionList(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    sessions: list[SessionSummary]
    max_sessions_per_client: int


class SessionStatus(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    session: SessionInfo
    best_reward: float | None = Field(
        default=None, description="the best evaluate reward so far under the current verdict rules"
    )
    best_speedup_vs_eager: float | None = Field(default=None, description="the same, of profiles")
    history: list[JournalRecord] = Field(
        description="this session's evaluations, newest first (each with the rules it ran under)"
    )
    skipped_records: int = Field(default=0, description="journal rows that could not be read (left out)")


class HistoryEntry(BaseModel):
    """One evaluation of the session, as `session_status` lists it (the journal's record, without the
    result it stored: `session://{id}/history` has that)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    status: str
    verdict: str | None
    finished_at: float | None
    reward: float | None = None
    speedup_vs_eager: float | None = None
    error: str | None = None
    current_rules: bool = Field(description="judged under the verdict rules this server runs")


class SessionBrief(BaseModel):
    """`session_status`'s answer: the session, its bests, and its latest evaluations."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session: SessionInfo
    best_reward: float | None = None
    best_speedup_vs_eager: float | None = None
    history: list[HistoryEntry] = Field(description="newest first")
    older: int = Field(default=0, description="evaluations left out (session://{id}/history has them)")
    skipped_records: int = 0


BRIEF_HISTORY = 20  # evaluations `session_status` lists


def _number(result: dict[str, Any] | None, key: str) -> float | None:
    value = (result or {}).get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def brief(status: SessionStatus) -> SessionBrief:
    """A session's status as an LLM reads it: the latest evaluations, one line each."""
    entries = [
        HistoryEntry(
            kind=r.kind,
            status=r.status,
            verdict=r.verdict,
            finished_at=r.finished_at,
            reward=_number(r.result, "reward") if r.kind == "evaluate" else None,
            speedup_vs_eager=_number(r.result, "speedup_vs_eager") if r.kind == "profile" else None,
            error=r.error[-300:] if r.error else None,
            current_rules=r.rules_version == VERDICT_RULES_VERSION,
        )
        for r in status.history[:BRIEF_HISTORY]
    ]
    return SessionBrief(
        session=status.session,
        best_reward=status.best_reward,
        best_speedup_vs_eager=status.best_speedup_vs_eager,
        history=entries,
        older=max(0, len(status.history) - BRIEF_HISTORY),
        skipped_records=status.skipped_records,
    )


class _Entry:
    def __init__(self, session: Session, client: str, owned: bool) -> None:
        self.session = session
        self.client = client
        self.owned = owned
        self.started = time.time()
        self.last_used = time.monotonic()
        # The full result of the latest call of each long tool: MCP answers with views (server/views.py).
        self.latest: dict[str, BaseModel] = {}


class SessionRegistry:
    """Sessions by id, each belonging to the client that started it; thread-safe."""

    def __init__(
        self,
        root: Path,
        catalog: TaskCatalog,
        *,
        max_sessions: int = 256,
        max_sessions_per_client: int = 64,
        cache_dir: Path | None = None,
        scheduler: GpuScheduler | None = None,
        idle_timeout_s: float | None = 3600.0,
        archive_dir: Path | None = None,
        quotas: SessionQuotas | None = None,
    ) -> None:
        self.catalog = catalog
        # Shared by every session: timed work holds a GPU alone, and callers see their place in line.
        self.scheduler = scheduler
        self.max_sessions = max_sessions
        self.max_sessions_per_client = max_sessions_per_client
        self.cache_dir = cache_dir
        self.idle_timeout_s = idle_timeout_s
        self.archive_dir = archive_dir
        self.quotas = quotas or SessionQuotas()
        self.rate = CallRate(self.quotas.calls_per_minute)
        # Called with a session id when it ends, before its workspace goes (the server cancels its jobs).
        self.on_end: Callable[[str], object] = lambda _session_id: None
        self._sessions: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None
        self._closed = threading.Event()
        self.base = root
        self.root = root / uuid.uuid4().hex[:12]  # this server's own: others' are swept, never ours
        self.root.mkdir(parents=True, mode=0o700)
        (self.root / _OWNER_FILE).write_text(
            json.dumps({"pid": os.getpid(), "start": _process_start(os.getpid())})
        )
        self.swept = self._sweep_abandoned()

    # -- starting, finding, ending -------------------------------------------------------------

    def start(
        self,
        *,
        client: str = LOCAL_CLIENT,
        task_id: str | None = None,
        reference_source: str | None = None,
        directory: str | None = None,
        language: KernelLanguage = "cuda",
    ) -> Session:
        given = [value for value in (task_id, reference_source, directory) if value]
        if len(given) != 1:
            raise UsageError("give exactly one of task_id, reference_source or directory")
        if directory and client != LOCAL_CLIENT:
            raise UsageError(
                "only the local client (stdio) may open a directory of the server's machine: "
                "give task_id or reference_source"
            )
        self._check_room(client)
        options: dict[str, Any] = {"cache_dir": self.cache_dir} if self.cache_dir else {}
        options |= {"scheduler": self.scheduler, "quotas": self.quotas}
        session_id = uuid.uuid4().hex[:12]
        if reference_source and client != LOCAL_CLIENT:
            # Its reference runs in the judge: judges of its own, not those of other clients.
            options["judge_tenant"] = f"client:{client}"
        if directory:
            session = Session.open(directory, id=session_id, **options)
        else:
            task = (
                self.catalog.get(task_id)
                if task_id
                else task_from_source(
                    reference_source or "",
                    task_id=f"inline/{session_id}",
                    name="inline",
                    source=TaskSource(kind="inline"),
                    location="reference_source",
                )
            )
            session = Session.create(
                task, self.root / session_id, id=session_id, language=language, **options
            )
        with self._lock:
            self._sessions[session.id] = _Entry(session, client, owned=not directory)
        self._start_reaper()
        return session

    def _check_room(self, client: str) -> None:
        idle = f"{self.idle_timeout_s:g} s" if self.idle_timeout_s else "never"
        how = _HOW_TO_END.format(idle=idle)
        with self._lock:
            if len(self._sessions) >= self.max_sessions:
                raise LimitExceeded(
                    "sessions", f"this server holds at most {self.max_sessions} sessions: {how}"
                )
            if sum(1 for e in self._sessions.values() if e.client == client) >= self.max_sessions_per_client:
                raise LimitExceeded(
                    "sessions_per_client",
                    f"a client may hold at most {self.max_sessions_per_client} sessions: {how}",
                )

    def get(self, session_id: str, client: str = LOCAL_CLIENT) -> Session:
        """The session, if `client` started it: another client's session does not exist for it."""
        with self._lock:
            entry = self._sessions.get(session_id)
        if entry is None or entry.client != client:
            raise SessionNotFound(session_id)
        return entry.session

    def use(self, session_id: str, client: str = LOCAL_CLIENT) -> Session:
        """`get` for a tool call: counted against the session's calls per minute, and it is not idle."""
        session = self.get(session_id, client)
        self.rate.check(session_id)
        self.touch(session_id)
        return session

    def touch(self, session_id: str) -> None:
        with self._lock:
            if (entry := self._sessions.get(session_id)) is not None:
                entry.last_used = time.monotonic()

    def keep_result(self, session_id: str, kind: str, result: BaseModel) -> None:
        """Keep a long tool's full result for `latest_result` (until the session ends)."""
        with self._lock:
            if (entry := self._sessions.get(session_id)) is not None:
                entry.latest[kind] = result

    def latest_result(self, session_id: str, kind: str, client: str = LOCAL_CLIENT) -> BaseModel:
        """The full result of the session's latest `kind` call, if `client` started the session."""
        self.get(session_id, client)
        with self._lock:
            entry = self._sessions.get(session_id)
            result = entry.latest.get(kind) if entry is not None else None
        if result is None:
            raise UsageError(f"session {session_id} has no {kind} result yet: call {kind} first")
        return result

    def end(self, session_id: str, client: str = LOCAL_CLIENT) -> None:
        self.get(session_id, client)
        self._end(session_id, "ended")

    def _end(self, session_id: str, why: str) -> None:
        with self._lock:
            entry = self._sessions.pop(session_id, None)
        if entry is None:
            return
        self.rate.forget(session_id)
        with contextlib.suppress(Exception):  # a job that will not stop must not keep the workspace
            self.on_end(session_id)
        if entry.owned:
            self._dispose(entry.session.workspace.root, f"{session_id}-{why}")

    def _dispose(self, workspace: Path, name: str) -> None:
        """Remove a workspace the server made, or move it into the archive."""
        if self.archive_dir is not None and workspace.exists():
            self.archive_dir.mkdir(parents=True, exist_ok=True)
            try:
                shutil.move(str(workspace), str(self.archive_dir / name))
                return
            except OSError as exc:
                _log.warning("could not archive %s (%s); removing it", workspace, exc)
        shutil.rmtree(workspace, ignore_errors=True)

    def close(self, *, keep_workspaces: bool = False) -> None:
        """End every session (a stdio server at exit); its workspaces go unless `keep_workspaces`."""
        self._closed.set()
        with self._lock:
            ids = list(self._sessions)
        for session_id in ids:
            if keep_workspaces:
                with self._lock:
                    entry = self._sessions.pop(session_id, None)
                if entry is not None:
                    with contextlib.suppress(Exception):
                        self.on_end(session_id)
            else:
                self._end(session_id, "closed")
        if not keep_workspaces:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- idle sessions ---------------------------------------------------------------------------

    def reap_idle(self) -> list[str]:
        """End the sessions idle for longer than the time-out; their ids."""
        if not self.idle_timeout_s:
            return []
        now = time.monotonic()
        with self._lock:
            idle = [sid for sid, e in self._sessions.items() if now - e.last_used > self.idle_timeout_s]
        for session_id in idle:
            _log.info("session %s was idle for %g s: ended", session_id, self.idle_timeout_s)
            self._end(session_id, "idle")
        return idle

    def _start_reaper(self) -> None:
        if not self.idle_timeout_s or self._reaper is not None:
            return
        period = min(60.0, max(0.5, self.idle_timeout_s / 4))

        def reap() -> None:
            while not self._closed.wait(period):
                with contextlib.suppress(Exception):
                    self.reap_idle()

        with self._lock:
            if self._reaper is None:
                self._reaper = threading.Thread(target=reap, name="cuda-agent-session-reaper", daemon=True)
                self._reaper.start()

    def _sweep_abandoned(self) -> int:
        """Workspaces of servers that are gone (killed before they could end their sessions)."""
        swept = 0
        for directory in self.base.iterdir():
            owner = directory / _OWNER_FILE
            if directory == self.root or not owner.is_file():
                continue
            try:
                recorded = json.loads(owner.read_text())
                alive = _process_start(int(recorded["pid"])) == recorded["start"] != ""
            except (OSError, ValueError, KeyError, TypeError):
                alive = False
            if alive:
                continue
            for workspace in directory.iterdir():
                if workspace.is_dir():
                    self._dispose(workspace, f"{workspace.name}-abandoned")
                    swept += 1
            shutil.rmtree(directory, ignore_errors=True)
        return swept

    # -- what clients see ------------------------------------------------------------------------

    def list(self, client: str = LOCAL_CLIENT) -> SessionList:
        now = time.monotonic()
        with self._lock:
            mine = [(sid, e) for sid, e in self._sessions.items() if e.client == client]
        summaries = [
            SessionSummary(
                session_id=sid,
                task_id=e.session.task.id,
                workspace=str(e.session.workspace.root),
                language=e.session.workspace.language,
                started_at=e.started,
                idle_s=round(now - e.last_used, 1),
                ends_in_s=round(max(0.0, self.idle_timeout_s - (now - e.last_used)), 1)
                if self.idle_timeout_s
                else None,
            )
            for sid, e in sorted(mine, key=lambda item: item[1].started)
        ]
        return SessionList(sessions=summaries, max_sessions_per_client=self.max_sessions_per_client)

    def ids(self, client: str = LOCAL_CLIENT) -> builtins.list[str]:  # `list` is a method here
        with self._lock:
            return [sid for sid, e in self._sessions.items() if e.client == client]

    def info(self, session: Session) -> SessionInfo:
        return SessionInfo(
            session_id=session.id,
            task_id=session.task.id,
            task_name=session.task.name,
            workspace=str(session.workspace.root),
            files=workspace_files.list_paths(session.workspace.root, "**/*"),
            protected=sorted({REFERENCE_FILE, *session.workspace.harness_files}),
            language=session.workspace.language,
            isolation=list(getattr(session.run_executor, "isolation", ())),
            quotas=session.quotas,
        )

    def status(self, session_id: str, client: str = LOCAL_CLIENT) -> SessionStatus:
        session = self.get(session_id, client)
        listing = session.journal.listing(session_id=session.id, limit=200)
        history = listing.records
        # A session resumed after an upgrade keeps older records; their rewards are not comparable.
        current = [r for r in history if r.rules_version == VERDICT_RULES_VERSION]
        rewards = [
            r.result["reward"]
            for r in current
            if r.kind == "evaluate" and r.result and isinstance(r.result.get("reward"), int | float)
        ]
        speedups = [
            r.result["speedup_vs_eager"]
            for r in current
            if r.kind == "profile" and r.result and isinstance(r.result.get("speedup_vs_eager"), int | float)
        ]
        return SessionStatus(
            session=self.info(session),
            best_reward=max(rewards) if rewards else None,
            best_speedup_vs_eager=max(speedups) if speedups else None,
            history=history,
            skipped_records=listing.skipped,
        )


def _process_start(pid: int) -> str:
    """The kernel's start time of `pid` ('' if gone), so a reused pid is not mistaken for the owner."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""
