"""A synthesis run's directory: what it was asked, what was composed, what each candidate got.

Everything is appended a line at a time and flushed, so an interrupted run loses at most the candidates
being checked; the next run in the same directory with the same settings carries on from there.

    run.json          the settings and their digest
    candidates.jsonl  every composed candidate (an LLM's answers are never asked for twice)
    outcomes.jsonl    every candidate's filter outcomes, as each is decided
    tasks.jsonl       the accepted tasks, in the CUDA-Agent-Ops-6K layout (+ tasks.parquet)
    rejected.jsonl    the dropped candidates and why
    report.json       counts per filter, yield and times
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.synth.candidate import Candidate
from cuda_agent_mcp.synth.filters import FilterOutcome
from cuda_agent_mcp.synth.settings import SynthesisSettings

M = TypeVar("M", bound=BaseModel)


class CandidateOutcome(BaseModel):
    """One candidate decided: its outcomes in filter order and the wall time its checks took."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    accepted: bool
    outcomes: list[FilterOutcome]
    ran_at_sizes: dict[str, int] = {}
    seconds: float = 0.0


class RunDirectory:
    def __init__(self, root: Path) -> None:
        self.root = root

    def open(self, settings: SynthesisSettings) -> None:
        """Start a run here, or check that the run here was asked the same."""
        self.root.mkdir(parents=True, exist_ok=True)
        manifest = self.root / "run.json"
        if manifest.exists():
            try:
                kept = json.loads(manifest.read_text())
            except (OSError, ValueError):
                raise UsageError(f"{manifest} is unreadable: remove it, or use another --out") from None
            if kept.get("digest") != settings.digest():
                raise UsageError(
                    f"{self.root} holds a run with other settings ({_differences(kept.get('settings', {}), settings)}): "
                    "use another --out, or repeat that run's options to resume it"
                )
            return
        manifest.write_text(
            json.dumps({"digest": settings.digest(), "settings": settings.model_dump(mode="json")}, indent=2)
        )

    # -- candidates -----------------------------------------------------------------------------

    def candidates(self) -> dict[int, Candidate]:
        return {c.index: c for c in _read_lines(self.root / "candidates.jsonl", Candidate)}

    def add_candidate(self, candidate: Candidate) -> None:
        _append(self.root / "candidates.jsonl", candidate.model_dump_json())

    # -- outcomes -------------------------------------------------------------------------------

    def outcomes(self) -> dict[int, CandidateOutcome]:
        return {o.index: o for o in _read_lines(self.root / "outcomes.jsonl", CandidateOutcome)}

    def add_outcome(self, outcome: CandidateOutcome) -> None:
        _append(self.root / "outcomes.jsonl", outcome.model_dump_json())

    def write_json(self, name: str, data: object) -> Path:
        path = self.root / name
        partial = path.with_suffix(path.suffix + ".partial")
        partial.write_text(json.dumps(data, indent=2, default=str))
        partial.replace(path)
        return path


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _read_lines(path: Path, model: type[M]) -> list[M]:
    """Every whole, valid line (the last may be cut by an interrupted run: it is skipped and redone)."""
    if not path.exists():
        return []
    items = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            items.append(model.model_validate_json(line))
        except ValidationError:
            continue
    return items


def _differences(kept: dict[str, object], settings: SynthesisSettings) -> str:
    now = settings.model_dump(mode="json")
    for side in (kept, now):
        if isinstance(side.get("llm"), dict):
            side["llm"] = {k: v for k, v in side["llm"].items() if k not in ("base_url", "api_key_env")}  # type: ignore[union-attr]
    names = [k for k in sorted(set(kept) | set(now)) if kept.get(k) != now.get(k)]
    return (
        ", ".join(f"{k}: {kept.get(k)!r} there, {now.get(k)!r} now" for k in names[:3]) or "another version"
    )
