"""Load a dataset of reference programs, one per row, from JSONL or Parquet (the CUDA-Agent-Ops-6K layout)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from cuda_agent_mcp.errors import TaskLoadError
from cuda_agent_mcp.tasks.model import Task, TaskSource
from cuda_agent_mcp.tasks.single_file import task_from_source


class DatasetColumns(BaseModel):
    """Which columns hold what. Defaults fit CUDA-Agent-Ops-6K (`code`, `ops`, `data_source`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str = "code"
    id: str | None = None
    name: str | None = None
    tags: tuple[str, ...] = ("ops", "data_source")


def load_dataset(
    path: str | Path,
    *,
    columns: DatasetColumns | None = None,
    prefix: str | None = None,
) -> list[Task]:
    """Every row as a Task with id `<prefix>/<row id or index>`; the prefix defaults to the file's stem."""
    path = Path(path)
    columns = columns or DatasetColumns()
    prefix = prefix or path.stem
    if not path.is_file():
        raise TaskLoadError(path, "no such dataset file")
    rows = _read_rows(path)
    tasks: list[Task] = []
    for index, row in rows:
        location = f"{path} row {index}"
        code = row.get(columns.code)
        if code is None:
            raise TaskLoadError(location, f"has no {columns.code!r} column (columns: {sorted(row)})")
        if not isinstance(code, str):
            raise TaskLoadError(location, f"column {columns.code!r} must hold source text")
        row_id = str(row[columns.id]) if columns.id and row.get(columns.id) is not None else str(index)
        name = str(row[columns.name]) if columns.name and row.get(columns.name) is not None else _name_of(row)
        tasks.append(
            task_from_source(
                code,
                task_id=f"{prefix}/{row_id}",
                name=name or f"row {index}",
                source=TaskSource(kind="dataset", path=str(path.resolve()), row=index),
                location=location,
                tags={k: _tag_text(row[k]) for k in columns.tags if row.get(k) is not None},
            )
        )
    return tasks


def _name_of(row: dict[str, Any]) -> str:
    ops = row.get("ops")
    if isinstance(ops, list | tuple) and ops:
        return "+".join(str(op).rsplit(".", 1)[-1] for op in ops)
    return ""


def _tag_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(_plain(value))


def _plain(value: Any) -> Any:
    """numpy arrays (from Parquet list columns) become lists so they serialise."""
    return value.tolist() if hasattr(value, "tolist") else value


def _read_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    suffix = "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix
    if suffix in (".jsonl", ".ndjson"):
        return list(_jsonl_rows(path))
    if suffix == ".parquet":
        return list(_parquet_rows(path))
    raise TaskLoadError(path, "unsupported dataset format (use .jsonl or .parquet)")


def _jsonl_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    index = 0
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TaskLoadError(path, f"invalid JSON: {exc.msg}", line=line_number) from None
            if not isinstance(row, dict):
                raise TaskLoadError(path, "each line must be a JSON object", line=line_number)
            yield index, row
            index += 1


def _parquet_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TaskLoadError(
            path, "reading Parquet needs pyarrow: pip install 'cuda-agent-mcp[parquet]'"
        ) from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise TaskLoadError(path, f"not a readable Parquet file: {exc}") from None
    yield from enumerate(table.to_pylist())
