"""The sessions an MCP server holds: created from a task id, reference source text or a local directory.

The server owns the workspaces it creates (under its root, removed by `end`); a local directory is opened
in place and left alone. A session's history comes from the journal, so it survives the server.
"""

from __future__ import annotations

import shutil
import threading
import uuid
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.executors.scheduler import GpuScheduler
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.tasks.model import TaskSource
from cuda_agent_mcp.tasks.single_file import task_from_source
from cuda_agent_mcp.tools import Session
from cuda_agent_mcp.tools.journal import JournalRecord
from cuda_agent_mcp.workspace import PROTECTED_FILES
from cuda_agent_mcp.workspace import files as workspace_files

LOCAL_CLIENT = "local"  # stdio and in-process clients: whoever started the server


class SessionNotFound(UsageError):
    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"no session {session_id!r}: start one with start_session (sessions end with end_session)"
        )


class SessionInfo(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    task_id: str
    task_name: str
    workspace: str = Field(description="the workspace directory on the server's machine")
    files: list[str] = Field(description="workspace files the agent may edit, and the protected ones")
    protected: list[str] = Field(description="harness files: readable, never trusted if edited")


class SessionStatus(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    session: SessionInfo
    best_reward: float | None = Field(None, description="the best evaluate reward so far")
    best_speedup_vs_eager: float | None = None
    history: list[JournalRecord] = Field(description="this session's evaluations, newest first")


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
    ) -> None:
        self.root = root
        # Shared by every session: timed work holds a GPU alone, and callers see their place in line.
        self.scheduler = scheduler
        self.catalog = catalog
        self.max_sessions = max_sessions
        self.max_sessions_per_client = max_sessions_per_client
        self.cache_dir = cache_dir
        self._sessions: dict[str, Session] = {}
        self._clients: dict[str, str] = {}  # session id -> the client that started it
        self._owned: set[str] = set()  # sessions whose workspace the server created
        self._lock = threading.Lock()

    def start(
        self,
        *,
        client: str = LOCAL_CLIENT,
        task_id: str | None = None,
        reference_source: str | None = None,
        directory: str | None = None,
    ) -> Session:
        given = [value for value in (task_id, reference_source, directory) if value]
        if len(given) != 1:
            raise UsageError("give exactly one of task_id, reference_source or directory")
        with self._lock:
            if len(self._sessions) >= self.max_sessions:
                raise UsageError(f"this server holds at most {self.max_sessions} sessions: end one first")
            if sum(1 for c in self._clients.values() if c == client) >= self.max_sessions_per_client:
                raise UsageError(
                    f"a client may hold at most {self.max_sessions_per_client} sessions: end one first"
                )
        options: dict[str, object] = {"cache_dir": self.cache_dir} if self.cache_dir else {}
        options["scheduler"] = self.scheduler
        session_id = uuid.uuid4().hex[:12]
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
            session = Session.create(task, self.root / session_id, id=session_id, **options)
        with self._lock:
            self._sessions[session.id] = session
            self._clients[session.id] = client
            if not directory:
                self._owned.add(session.id)
        return session

    def get(self, session_id: str, client: str = LOCAL_CLIENT) -> Session:
        """The session, if `client` started it: another client's session does not exist for it."""
        with self._lock:
            session = self._sessions.get(session_id)
            mine = self._clients.get(session_id) == client
        if session is None or not mine:
            raise SessionNotFound(session_id)
        return session

    def end(self, session_id: str, client: str = LOCAL_CLIENT) -> None:
        session = self.get(session_id, client)
        with self._lock:
            self._sessions.pop(session_id, None)
            self._clients.pop(session_id, None)
            owned = session_id in self._owned
            self._owned.discard(session_id)
        if owned:
            shutil.rmtree(session.workspace.root, ignore_errors=True)

    def info(self, session: Session) -> SessionInfo:
        return SessionInfo(
            session_id=session.id,
            task_id=session.task.id,
            task_name=session.task.name,
            workspace=str(session.workspace.root),
            files=workspace_files.list_paths(session.workspace.root, "**/*"),
            protected=sorted(PROTECTED_FILES),
        )

    def status(self, session_id: str, client: str = LOCAL_CLIENT) -> SessionStatus:
        session = self.get(session_id, client)
        history = session.journal.records(session_id=session.id, limit=200)
        rewards = [
            r.result["reward"] for r in history if r.kind == "evaluate" and r.result and "reward" in r.result
        ]
        speedups = [
            r.result["speedup_vs_eager"]
            for r in history
            if r.kind == "profile" and r.result and r.result.get("speedup_vs_eager") is not None
        ]
        return SessionStatus(
            session=self.info(session),
            best_reward=max(rewards) if rewards else None,
            best_speedup_vs_eager=max(speedups) if speedups else None,
            history=history,
        )
