"""`synthesize` end to end on the CPU: a dataset the existing loaders read, provenance per row, every
refusal with its reason, a run that goes on past bad candidates, and a run that resumes."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.synth import pipeline
from cuda_agent_mcp.synth.candidate import Candidate
from cuda_agent_mcp.synth.pipeline import SynthesisReport, synthesize
from cuda_agent_mcp.synth.rundir import RunDirectory
from cuda_agent_mcp.synth.settings import SynthesisSettings
from cuda_agent_mcp.tasks import TaskCatalog, load_dataset
from tests.synth import programs


def _settings(kernelbench: Path | None, **changes: object) -> SynthesisSettings:
    base: dict[str, object] = {
        "count": 10, "seed": 7, "device": "cpu", "runtime": True, "compile": False,
        "against": (str(kernelbench),) if kernelbench else (), "timeout_s": 60,
    }  # fmt: skip
    return SynthesisSettings.model_validate({**base, **changes})


def _run(settings: SynthesisSettings, out: Path, **options: object) -> SynthesisReport:
    async def work() -> SynthesisReport:
        return await synthesize(settings, out, workers=2, **options)  # type: ignore[arg-type]

    return anyio.run(work)


def test_a_run_writes_a_dataset_the_loaders_read_with_provenance_per_row(
    tmp_path: Path, kernelbench: Path
) -> None:
    seen: list[str] = []
    report = _run(_settings(kernelbench), tmp_path / "run", progress=lambda p: seen.append(p.phase))
    rows = [json.loads(line) for line in (tmp_path / "run" / "tasks.jsonl").read_text().splitlines()]
    rejected = [json.loads(line) for line in (tmp_path / "run" / "rejected.jsonl").read_text().splitlines()]
    assert report.candidates == 10 and report.accepted == len(rows) > 0
    assert len(rows) + len(rejected) == 10
    assert {"compose", "static", "check", "write"} <= set(seen)

    tasks = load_dataset(tmp_path / "run" / "tasks.jsonl")  # the Ops-6K loader, unchanged
    assert [t.code for t in tasks] == [r["code"] for r in rows]
    assert all(t.tags["data_source"] == f"torch#{len(r['ops'])}" for t, r in zip(tasks, rows, strict=True))
    assert len(TaskCatalog([tmp_path / "run" / "tasks.jsonl"], include_bundled=False).list()) == len(rows)

    for row in rows:
        filters = {f["name"]: f for f in row["provenance"]["filters"]}
        assert all(
            filters[name]["passed"]
            for name in (
                "parse",
                "duplicate",
                "decontaminate",
                "shape_probe",
                "eager",
                "deterministic",
                "non_degenerate",
            )
        )
        assert filters["runtime"]["passed"] is None and "GPU" in filters["runtime"]["reason"]
        assert filters["decontaminate"]["measured"]["kernelbench_nearest"].startswith("kernelbench/")
        assert row["provenance"]["seed"] == 7 and row["provenance"]["ran_at_sizes"]
    for row in rejected:
        assert row["reason"] and row["filter"]

    counted = {f.name: f for f in report.filters}
    assert counted["parse"].entered == 10
    assert sum(f.dropped for f in report.filters) == len(rejected)
    if (tmp_path / "run" / "tasks.parquet").exists():
        assert [t.code for t in load_dataset(tmp_path / "run" / "tasks.parquet")] == [r["code"] for r in rows]


def test_an_interrupted_run_carries_on_and_decides_the_same(tmp_path: Path, kernelbench: Path) -> None:
    settings = _settings(kernelbench, count=12, runtime=False)
    whole = _run(settings, tmp_path / "whole")
    cut = tmp_path / "cut"
    _run(settings, cut)
    lines = (cut / "outcomes.jsonl").read_text().splitlines()
    (cut / "outcomes.jsonl").write_text("\n".join(lines[:5]) + "\n" + lines[5][:40])  # killed mid-line
    (cut / "tasks.jsonl").unlink()
    again = _run(settings, cut)
    assert again.resumed == 5
    assert _decisions(cut) == _decisions(tmp_path / "whole")
    assert again.accepted == whole.accepted


def _decisions(run: Path) -> list[tuple[str, str, list[tuple[str, bool | None]]]]:
    """Each accepted task's id, code and filter verdicts (times differ from run to run; decisions may not)."""
    rows = [json.loads(line) for line in (run / "tasks.jsonl").read_text().splitlines()]
    return [
        (r["id"], r["code"], [(f["name"], f["passed"]) for f in r["provenance"]["filters"]]) for r in rows
    ]


def test_a_directory_holding_a_run_with_other_settings_is_refused(tmp_path: Path) -> None:
    _run(_settings(None, count=2, runtime=False), tmp_path / "run")
    with pytest.raises(UsageError, match=r"holds a run with other settings \(count: 2 there, 3 now\)"):
        _run(_settings(None, count=3, runtime=False), tmp_path / "run")


def test_bad_candidates_fail_with_their_reason_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A composer bug, invalid Python, wrong shape rules, a hang: each costs its own candidate only."""
    # Index 0 computes something else than WRONG_SHAPE, or the set's decontamination would drop one of them.
    made = {
        0: programs.SOUND.replace("torch.relu", "torch.sigmoid"),
        1: programs.NOT_PYTHON,
        2: programs.WRONG_SHAPE,
        3: programs.HANGS,
    }

    def compose(seed: int, index: int, **_: object) -> Candidate:
        if index == 4:
            raise KeyError("a registry entry without a shape rule")
        return Candidate(
            index=index, composer="programmatic", seed=seed, code=made[index], ops=("nn.Linear",)
        )

    monkeypatch.setattr(pipeline, "compose_programmatic", compose)
    report = _run(_settings(None, count=5, timeout_s=10), tmp_path / "run")
    rejected = {
        row["index"]: row
        for row in map(json.loads, (tmp_path / "run" / "rejected.jsonl").read_text().splitlines())
    }
    assert report.accepted == 1
    assert rejected[1]["filter"] == "parse" and "syntax error" in rejected[1]["reason"]
    assert rejected[2]["filter"] == "shape_probe" and "model.py line" in rejected[2]["reason"]
    assert rejected[3]["filter"] == "shape_probe" and "ran past the 10 s limit" in rejected[3]["reason"]
    assert rejected[4]["filter"] == "parse" and "the composer failed: KeyError" in rejected[4]["reason"]


def test_a_run_stopped_early_says_so_and_the_next_run_finishes_it(tmp_path: Path) -> None:
    settings = _settings(None, count=4, runtime=False)
    stopped = _run(settings, tmp_path / "run", stop_after_s=0.0)
    decided = len(RunDirectory(tmp_path / "run").outcomes())  # only what the static filters refused
    assert decided < 4
    assert any(f"stopped early: {decided} of 4 candidates decided" in note for note in stopped.notes)
    finished = _run(settings, tmp_path / "run")
    assert finished.resumed == decided and not any("stopped early" in note for note in finished.notes)
    assert len(RunDirectory(tmp_path / "run").outcomes()) == 4
