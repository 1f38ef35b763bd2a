"""A run's report directory: its manifest (run.json) and its rows (rows.jsonl, one line per task, appended
and synced as each task finishes), so a killed run continues where it stopped and nothing measured is
lost. A directory holding another run is never written over: `overwrite` moves its files aside first.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuda_agent_mcp.bench.models import SuiteRequest, TaskRow
from cuda_agent_mcp.errors import UsageError

MANIFEST = "run.json"
ROWS = "rows.jsonl"


class RunManifest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    created_at: float
    request: dict[str, object] = Field(description="what identifies the run (SuiteRequest.identity)")
    tasks: list[str]


class RunDirectory:
    """The open report directory of one run."""

    def __init__(self, path: Path, manifest: RunManifest, rows: dict[str, TaskRow]) -> None:
        self.path = path
        self.manifest = manifest
        self.rows = rows
        self.resumed = len(rows)

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    @classmethod
    def open(
        cls, path: Path, request: SuiteRequest, tasks: list[str], *, overwrite: bool = False
    ) -> RunDirectory:
        """A new run in an empty (or new) directory; the same run again (resumed) where its manifest
        matches; a UsageError saying what to do in every other case."""
        identity = json.loads(json.dumps(request.identity()))
        manifest_path = path / MANIFEST
        if path.exists() and not path.is_dir():
            raise UsageError(f"{path} exists and is not a directory")
        if manifest_path.is_file():
            try:
                manifest = RunManifest.model_validate_json(manifest_path.read_text())
            except (ValidationError, ValueError):
                raise UsageError(
                    f"{manifest_path} is not a bench run manifest; choose another --out"
                ) from None
            if not overwrite and manifest.request == identity and manifest.tasks == tasks:
                return cls(path, manifest, _read_rows(path / ROWS))
            if not overwrite:
                differs = sorted(k for k in identity if manifest.request.get(k) != identity[k])
                what = ", ".join(differs) if differs else "the task list"
                raise UsageError(
                    f"{path} holds run {manifest.run_id} of another request (differs in {what}); pass "
                    "--overwrite to start a new run there (its files are kept in a previous-* folder, and "
                    "its measurements stay in the journal) or choose another --out"
                )
            _move_aside(path, manifest.run_id)
        elif path.is_dir() and any(p for p in path.iterdir() if not p.name.startswith("previous-")):
            if not overwrite:
                raise UsageError(
                    f"{path} exists and is not a bench report directory; choose another --out (or pass "
                    "--overwrite to move its contents into a previous-* folder)"
                )
            _move_aside(path, "unknown")
        path.mkdir(parents=True, exist_ok=True)
        manifest = RunManifest(
            run_id=uuid.uuid4().hex[:12], created_at=time.time(), request=identity, tasks=tasks
        )
        _write(manifest_path, manifest.model_dump_json(indent=1) + "\n")
        return cls(path, manifest, {})

    def append(self, row: TaskRow) -> None:
        """Record a finished task durably before anyone is told about it."""
        self.rows[row.task_id] = row
        with (self.path / ROWS).open("a", encoding="utf-8") as handle:
            handle.write(row.model_dump_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def ordered(self) -> list[TaskRow]:
        return [self.rows[t] for t in self.manifest.tasks if t in self.rows]


def read_run(path: Path) -> tuple[RunManifest, list[TaskRow]]:
    """A report directory's manifest and rows (in task order), for summaries of finished or live runs."""
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise UsageError(f"{path} is not a bench report directory (no {MANIFEST})")
    manifest = RunManifest.model_validate_json(manifest_path.read_text())
    rows = _read_rows(path / ROWS)
    return manifest, [rows[t] for t in manifest.tasks if t in rows]


def _read_rows(path: Path) -> dict[str, TaskRow]:
    """Rows by task id, the last line of a task winning; a torn last line (a kill mid-write) is skipped."""
    rows: dict[str, TaskRow] = {}
    if not path.is_file():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = TaskRow.model_validate_json(line)
        except ValidationError:
            continue
        rows[row.task_id] = row
    return rows


def _move_aside(path: Path, run_id: str) -> None:
    target = path / f"previous-{run_id}-{int(time.time())}"
    target.mkdir()
    for entry in list(path.iterdir()):
        if entry != target and not entry.name.startswith("previous-"):
            shutil.move(str(entry), target / entry.name)


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)
