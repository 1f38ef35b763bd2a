"""The evaluation journal: every verify/profile/evaluate result, written to SQLite before it is returned.

A record is opened (`running`) when the judge is about to start and closed with the result (`done`) or the
infrastructure error (`failed`). A process killed in between leaves `running` rows; whoever opens the
journal next marks those whose owner process is gone as `interrupted`, so history survives a kill -9 and
unfinished work is visible as such, never as a result. WAL mode: readers never block the writer.

One journal per user, never shared: it lives in the user's own state directory (`default_journal_path`:
$CUDA_AGENT_STATE, else $XDG_STATE_HOME/cuda-agent-mcp, else ~/.local/state/cuda-agent-mcp), not in the
build cache, which a deployment may share between users. Only the trusted side (the tool layer) touches
the file: it is private to its owner (0600, in a 0700 directory) and no sandbox view shows it. A row that cannot be read back (hand-edited, from another version) is skipped
and counted (`JournalListing.skipped`), never a failure of the caller.

Every record carries the verdict rules version it ran under (`rules_version`); a journal made before the
column existed gains it when opened, its old rows reading as None (unknown rules).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuda_agent_mcp.evaluation.rules_version import VERDICT_RULES_VERSION

_log = logging.getLogger(__name__)

RecordStatus = Literal["running", "done", "failed", "interrupted"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS evaluations (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    session_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    task_hash TEXT NOT NULL,
    source_hash TEXT NOT NULL,
    status TEXT NOT NULL,
    verdict TEXT,
    started_at REAL NOT NULL,
    finished_at REAL,
    owner_pid INTEGER NOT NULL,
    owner_start TEXT NOT NULL,
    environment TEXT NOT NULL,
    result TEXT,
    error TEXT,
    rules_version TEXT
);
CREATE INDEX IF NOT EXISTS evaluations_started ON evaluations (started_at);
"""


class JournalRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    kind: str
    session_id: str
    task_id: str
    task_hash: str
    source_hash: str
    status: RecordStatus
    verdict: str | None
    started_at: float
    finished_at: float | None
    environment: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None
    rules_version: str | None = Field(
        default=None,
        description="the verdict rules the record ran under; None: written before versions were recorded",
    )


class JournalListing(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    records: list[JournalRecord]
    skipped: int = Field(default=0, description="rows that could not be read back, left out")
    shared_path: str | None = Field(
        default=None, description="an older journal in the build cache (perhaps shared), when asked for"
    )
    shared_records: list[JournalRecord] = Field(
        default_factory=list, description="its records, after this user's own: whose they are is unknown"
    )


def _process_start(pid: int) -> str:
    """The kernel's start time of `pid` (so a reused pid is not mistaken for the owner); '' if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def host_environment() -> dict[str, str]:
    """What the tool process knows of where it runs; the judge adds the GPU and torch it saw."""
    return {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


STATE_ENV = "CUDA_AGENT_STATE"
JOURNAL_FILE = "journal.sqlite"


def default_state_dir() -> Path:
    """This user's own state directory: $CUDA_AGENT_STATE, else $XDG_STATE_HOME/cuda-agent-mcp (a relative
    one is ignored, as the XDG specification says), else ~/.local/state/cuda-agent-mcp."""
    if value := os.environ.get(STATE_ENV):
        return Path(value).expanduser().absolute()
    base = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):
        base = str(Path.home() / ".local" / "state")
    return Path(base) / "cuda-agent-mcp"


def default_journal_path() -> Path:
    """This user's journal, in a state directory made private (0700) to them."""
    directory = default_state_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = directory.stat()
    if info.st_uid == os.geteuid() and info.st_mode & 0o077:
        directory.chmod(0o700)  # made by an older version, or by hand: nobody else reads the journal
    return directory / JOURNAL_FILE


def legacy_journal_path(cache_dir: Path) -> Path:
    """Where versions before issue 26 kept the journal: in the build cache, which may be shared."""
    return cache_dir / JOURNAL_FILE


class Journal:
    """One SQLite file; safe to share between the threads and sessions of a process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))  # private before the first byte
        elif (info := path.stat()).st_uid == os.geteuid() and info.st_mode & 0o077:
            path.chmod(0o600)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._add_rules_version()
        self._pid = os.getpid()
        self._start = _process_start(self._pid)
        self.interrupted_on_open = self.mark_interrupted()

    def _add_rules_version(self) -> None:
        """Migrate a journal from before `rules_version` in place (its rows keep NULL: unknown rules). In
        one write transaction, so two processes opening an old journal at once add the column once."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                columns = {row[1] for row in self._db.execute("PRAGMA table_info(evaluations)")}
                if "rules_version" not in columns:
                    self._db.execute("ALTER TABLE evaluations ADD COLUMN rules_version TEXT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def mark_interrupted(self) -> int:
        """Rows left `running` by a process that no longer exists become `interrupted`."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, owner_pid, owner_start FROM evaluations WHERE status = 'running'"
            ).fetchall()
            orphaned = [row[0] for row in rows if _process_start(row[1]) != row[2] or not row[2]]
            for record_id in orphaned:
                self._db.execute(
                    "UPDATE evaluations SET status = 'interrupted', finished_at = ? WHERE id = ? AND status = 'running'",
                    (time.time(), record_id),
                )
        return len(orphaned)

    def begin(
        self, *, kind: str, session_id: str, task_id: str, task_hash: str, source_hash: str = ""
    ) -> str:
        record_id = uuid.uuid4().hex
        with self._lock:
            self._db.execute(
                "INSERT INTO evaluations (id, kind, session_id, task_id, task_hash, source_hash, status, "
                "started_at, owner_pid, owner_start, environment, rules_version) "
                "VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?)",
                (
                    record_id,
                    kind,
                    session_id,
                    task_id,
                    task_hash,
                    source_hash,
                    time.time(),
                    self._pid,
                    self._start,
                    json.dumps(host_environment()),
                    VERDICT_RULES_VERSION,
                ),
            )
        return record_id

    def finish(
        self,
        record_id: str,
        result: BaseModel,
        *,
        verdict: str,
        source_hash: str,
        environment: dict[str, str],
    ) -> None:
        """Close a record with its result; called before the result is returned to anyone."""
        with self._lock:
            self._db.execute("UPDATE evaluations SET source_hash = ? WHERE id = ?", (source_hash, record_id))
        self._close(
            record_id, "done", verdict=verdict, result=result.model_dump_json(), environment=environment
        )

    def fail(self, record_id: str, error: str) -> None:
        self._close(record_id, "failed", error=error[-4000:])

    def _close(
        self,
        record_id: str,
        status: RecordStatus,
        *,
        verdict: str | None = None,
        result: str | None = None,
        error: str | None = None,
        environment: dict[str, str] | None = None,
    ) -> None:
        with self._lock:
            if environment:
                (current,) = self._db.execute(
                    "SELECT environment FROM evaluations WHERE id = ?", (record_id,)
                ).fetchone()
                merged = json.dumps({**json.loads(current), **environment})
                self._db.execute("UPDATE evaluations SET environment = ? WHERE id = ?", (merged, record_id))
            self._db.execute(
                "UPDATE evaluations SET status = ?, verdict = ?, result = ?, error = ?, finished_at = ? WHERE id = ?",
                (status, verdict, result, error, time.time(), record_id),
            )

    def records(
        self, *, limit: int = 50, session_id: str | None = None, rules_version: str | None = None
    ) -> list[JournalRecord]:
        """The newest records first (rows that cannot be read are left out)."""
        return self.listing(limit=limit, session_id=session_id, rules_version=rules_version).records

    def listing(
        self, *, limit: int = 50, session_id: str | None = None, rules_version: str | None = None
    ) -> JournalListing:
        """The newest records first, and how many rows were skipped because they could not be read;
        `session_id` and `rules_version` keep only the records of that session and those rules."""
        query = (
            "SELECT id, kind, session_id, task_id, task_hash, source_hash, status, verdict, started_at, "
            "finished_at, environment, result, error, rules_version FROM evaluations"
        )
        filters = {"session_id": session_id, "rules_version": rules_version}
        wanted = {column: value for column, value in filters.items() if value is not None}
        if wanted:
            query += " WHERE " + " AND ".join(f"{column} = ?" for column in wanted)
        params: tuple[Any, ...] = tuple(wanted.values())
        query += " ORDER BY started_at DESC LIMIT ?"
        with self._lock:
            rows = self._db.execute(query, (*params, limit)).fetchall()
        records, skipped = [], 0
        for row in rows:
            try:
                records.append(_record(row))
            except (ValueError, TypeError, ValidationError) as exc:
                skipped += 1
                _log.warning("journal %s: row %r skipped, it cannot be read (%s)", self.path, row[0], exc)
        return JournalListing(path=str(self.path), records=records, skipped=skipped)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _record(r: tuple[Any, ...]) -> JournalRecord:
    environment, result = json.loads(r[10]), json.loads(r[11]) if r[11] else None
    if not isinstance(environment, dict) or not (result is None or isinstance(result, dict)):
        raise ValueError("environment and result must be JSON objects")
    return JournalRecord(
        id=r[0],
        kind=r[1],
        session_id=r[2],
        task_id=r[3],
        task_hash=r[4],
        source_hash=r[5],
        status=r[6],
        verdict=r[7],
        started_at=r[8],
        finished_at=r[9],
        environment=environment,
        result=result,
        error=r[12],
        rules_version=r[13],
    )


_open: dict[Path, Journal] = {}
_open_lock = threading.Lock()


def open_journal(path: Path) -> Journal:
    """The process's Journal for `path` (one connection per file)."""
    key = path.resolve()
    with _open_lock:
        if key not in _open:
            _open[key] = Journal(key)
        return _open[key]
