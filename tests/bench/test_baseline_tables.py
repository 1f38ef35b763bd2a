"""Baseline tables: written after each task, loaded only where the environment matches, turned into the
judge's own cache keys; and the comparison with KernelBench's published timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent_mcp.bench import baselines
from cuda_agent_mcp.bench.baselines import (
    BaselineEnvironment,
    BaselineResult,
    TableWriter,
    known_failures,
    load_tables,
    matching,
    seed_judge_cache,
    table_path,
)
from cuda_agent_mcp.bench.published import compare_with_published
from cuda_agent_mcp.evaluation import job
from cuda_agent_mcp.evaluation.job import baseline_cache_key
from cuda_agent_mcp.evaluation.rules_version import VERDICT_RULES_VERSION
from cuda_agent_mcp.results import Crashed, Passed
from cuda_agent_mcp.tasks import load_kernelbench
from tests.bench.conftest import REFERENCE, stats

H200 = BaselineEnvironment(gpu="NVIDIA H200", driver="570.124.06", cuda="12.8", torch="2.11.0")


def tasks(root: Path) -> list:
    for number, name, expression in (
        (1, "ReLU", "torch.relu(x)"),
        (2, "Tanh", "torch.tanh(x)"),
        (3, "Abs", "x.abs()"),
    ):
        path = root / "level1" / f"{number}_{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(REFERENCE.format(expression=expression))
    return load_kernelbench(root)


def passed(eager: float, compiled: float) -> BaselineResult:
    return BaselineResult(verdict=Passed(trials=0, max_abs_error=0, max_rel_error=0), eager=stats(eager),
                          compiled=stats(compiled), gpu="NVIDIA H200", environment={"torch": "2.11.0+cu128"},
                          wall_s=1.0)  # fmt: skip


def test_a_table_is_written_after_each_task_and_holds_failures_apart(tmp_path: Path) -> None:
    relu, tanh, abs_ = tasks(tmp_path / "kb")
    path = table_path(tmp_path / "tables", H200)
    assert path.name == "nvidia-h200_driver-570.124.06_cuda-12.8_torch-2.11.0.json"
    writer = TableWriter(path, H200)
    writer.record(relu, passed(2.0, 1.5))
    assert json.loads(path.read_text())["entries"]["kernelbench/level1/1"]["eager"]["median_ms"] == 2.0
    writer.record(tanh, BaselineResult(verdict=Crashed(phase="call", kind="exception", message="the reference failed: boom"),
                                       wall_s=1.0))  # fmt: skip
    again = TableWriter(path, H200)  # a later session continues the same file
    assert again.has(relu) and again.has(tanh) and not again.has(abs_)
    assert again.table.failures["kernelbench/level1/2"].message == "the reference failed: boom"
    changed = relu.model_copy(update={"content_hash": "0" * 64})
    assert not again.has(changed)  # another reference under the same id is measured again
    with pytest.raises(Exception, match="another environment"):
        TableWriter(path, H200.model_copy(update={"driver": "580.1"}))


def test_only_this_machines_table_seeds_the_judges_cache_under_its_own_keys(tmp_path: Path) -> None:
    relu, tanh, abs_ = tasks(tmp_path / "kb")
    TableWriter(table_path(tmp_path / "tables", H200), H200).record(relu, passed(2.0, 1.5))
    other = H200.model_copy(update={"gpu": "NVIDIA H100 80GB HBM3"})
    TableWriter(table_path(tmp_path / "tables", other), other).record(tanh, passed(3.0, 2.0))
    loaded = load_tables([tmp_path / "tables"])
    assert len(loaded) == 2 and len(matching(loaded, H200)) == 1 and matching(loaded, None) == []
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "baselines.json").write_text(
        json.dumps({"kept:NVIDIA H200:2.11.0+cu128": {"eager": {}, "compiled": {}}})
    )
    assert seed_judge_cache(matching(loaded, H200), [relu, tanh, abs_], cache) == 1
    judge_cache = json.loads((cache / "baselines.json").read_text())
    key = baseline_cache_key(relu.content_hash, "NVIDIA H200", "2.11.0+cu128")  # the judge's own key
    assert judge_cache[key]["eager"]["median_ms"] == 2.0 and "kept:NVIDIA H200:2.11.0+cu128" in judge_cache
    assert seed_judge_cache(matching(loaded, H200), [relu], cache) == 0  # present already: not rewritten


def test_recorded_failures_are_known_only_for_the_same_reference(tmp_path: Path) -> None:
    relu, tanh, _ = tasks(tmp_path / "kb")
    writer = TableWriter(table_path(tmp_path, H200), H200)
    writer.record(
        tanh, BaselineResult(verdict=Crashed(phase="load", kind="exception", message="no"), wall_s=0.1)
    )
    assert known_failures([writer.table], [relu, tanh]) == {"kernelbench/level1/2": "no"}
    edited = tanh.model_copy(update={"content_hash": "1" * 64})
    assert known_failures([writer.table], [edited]) == {}


def test_our_eager_times_against_kernelbenchs_published_ones(tmp_path: Path) -> None:
    relu, tanh, abs_ = tasks(tmp_path / "kb")
    writer = TableWriter(table_path(tmp_path, H200), H200)
    for task, eager in ((relu, 0.7), (tanh, 0.8), (abs_, 9.0)):
        writer.record(task, passed(eager, eager))
    published = tmp_path / "baseline_time_torch.json"
    published.write_text(json.dumps({"level1": {
        "1_ReLU.py": {"mean": 1.0, "hardware": "NVIDIA H100 80GB HBM3"},
        "2_Tanh.py": {"mean": 1.0, "hardware": "NVIDIA H100 80GB HBM3"},
        "3_Abs.py": {"mean": 1.0, "hardware": "NVIDIA H100 80GB HBM3"},
    }}))  # fmt: skip
    summary = compare_with_published(writer.table, [relu, tanh, abs_], published)
    assert summary.compared == 3 and summary.hardware == "NVIDIA H100 80GB HBM3"
    assert summary.median == pytest.approx(0.8)
    assert (summary.minimum, summary.maximum) == (pytest.approx(0.7), pytest.approx(9.0))
    assert [r.ratio for r in summary.rows] == [pytest.approx(0.7), pytest.approx(0.8), pytest.approx(9.0)]
    # Missing from the published file: counted, not compared.
    published.write_text(json.dumps({"level1": {"1_ReLU.py": {"mean": 1.0}}}))
    assert compare_with_published(writer.table, [relu, tanh, abs_], published).only_ours == 2


@pytest.mark.nvcc
def test_measuring_a_table_skips_what_it_has_and_records_a_failing_reference(
    tiny_suite, tmp_path: Path
) -> None:
    """On the CPU: the tiny suite's table already holds four tasks; the fifth task's reference raises, so
    its measurement is recorded as a failure (and a second run measures nothing)."""
    import anyio

    from cuda_agent_mcp.bench.baseline_run import measure_table
    from cuda_agent_mcp.bench.models import SolutionSpec, SuiteRequest

    selection = SuiteRequest(
        sources=[str(tiny_suite.tasks)],
        solutions=SolutionSpec(kind="policy"),
        device="cpu",
        out_dir=".",
        budget_s=0.3,
    )
    events = []
    first = anyio.run(
        lambda: measure_table(
            selection, tiny_suite.tables, cache_dir=tiny_suite.cache, progress=events.append
        )
    )
    assert (first.selected, first.already_in_table, first.failed) == (5, 4, ["kernelbench/level1/3"])
    assert events[-1].done == events[-1].total == 1
    table = json.loads(Path(first.table).read_text())
    assert "undefined_name" in table["failures"]["kernelbench/level1/3"]["message"]
    again = anyio.run(lambda: measure_table(selection, tiny_suite.tables, cache_dir=tiny_suite.cache))
    assert again.already_in_table == 5 and again.measured == 0 and again.failed == []


def test_the_baseline_cache_key_changes_with_the_verdict_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    current = baseline_cache_key("h" * 64, "NVIDIA H200", "2.11.0+cu128")
    monkeypatch.setattr(job, "VERDICT_RULES_VERSION", "2099-01-01")
    later = baseline_cache_key("h" * 64, "NVIDIA H200", "2.11.0+cu128")
    assert later != current and "2099-01-01" in later


def _table_with_an_entry_and_a_failure(root: Path) -> tuple[Path, list]:
    relu, tanh, abs_ = tasks(root / "kb")
    path = table_path(root / "tables", H200)
    writer = TableWriter(path, H200)
    writer.record(relu, passed(2.0, 1.5))
    writer.record(
        tanh, BaselineResult(verdict=Crashed(phase="load", kind="exception", message="no"), wall_s=0.1)
    )
    return path, [relu, tanh, abs_]


def _assert_nothing_is_used(path: Path, tasks: list, cache: Path) -> None:
    relu, tanh, _ = tasks
    again = TableWriter(path, H200)
    assert not again.has(relu) and not again.has(tanh)  # measured again
    assert seed_judge_cache(load_tables([path]), tasks, cache) == 0  # never a cache hit
    assert known_failures(load_tables([path]), tasks) == {}


def test_a_table_entry_made_under_older_verdict_rules_is_measured_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, tasks_ = _table_with_an_entry_and_a_failure(tmp_path)
    table = json.loads(path.read_text())
    assert table["entries"]["kernelbench/level1/1"]["rules_version"] == VERDICT_RULES_VERSION
    assert table["failures"]["kernelbench/level1/2"]["rules_version"] == VERDICT_RULES_VERSION
    for module in (job, baselines):  # the rules change after the table was written
        monkeypatch.setattr(module, "VERDICT_RULES_VERSION", "2099-01-01")
    _assert_nothing_is_used(path, tasks_, tmp_path / "cache")


def test_a_table_written_before_entries_carried_their_rules_is_read_but_not_used(tmp_path: Path) -> None:
    path, tasks_ = _table_with_an_entry_and_a_failure(tmp_path)
    table = json.loads(path.read_text())
    for section in ("entries", "failures"):
        for entry in table[section].values():
            del entry["rules_version"]
    path.write_text(json.dumps(table))
    _assert_nothing_is_used(path, tasks_, tmp_path / "cache")
