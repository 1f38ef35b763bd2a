"""The evaluation journal: records open and close, survive the process, and orphans become interrupted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cuda_agent_mcp.results import Passed, VerifyResult
from cuda_agent_mcp.tools.journal import Journal


def _result() -> VerifyResult:
    return VerifyResult(
        verdict=Passed(trials=5, max_abs_error=0.0, max_rel_error=0.0),
        source_hash="abc",
        build_key="k",
        trials=5,
        distributions=["task"],
        wall_s=1.0,
        environment={"gpu": "cpu"},
    )


def test_a_finished_record_keeps_its_result_and_environment(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.sqlite")
    record = journal.begin(kind="verify", session_id="s1", task_id="t", task_hash="h")
    journal.finish(record, _result(), verdict="passed", source_hash="abc", environment={"gpu": "cpu"})
    journal.close()

    reopened = Journal(tmp_path / "journal.sqlite")
    (entry,) = reopened.records()
    assert entry.status == "done" and entry.verdict == "passed" and entry.source_hash == "abc"
    assert entry.result is not None and entry.result["trials"] == 5
    assert entry.environment["gpu"] == "cpu" and "python" in entry.environment
    assert reopened.interrupted_on_open == 0


def test_records_left_running_by_a_dead_process_are_marked_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    script = (
        "import sys, os; from pathlib import Path; from cuda_agent_mcp.tools.journal import Journal\n"
        "j = Journal(Path(sys.argv[1])); j.begin(kind='profile', session_id='s', task_id='t', task_hash='h')\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(path)], check=True)
    mine = Journal(path)
    assert mine.interrupted_on_open == 1
    live = mine.begin(kind="verify", session_id="s", task_id="t", task_hash="h")
    assert mine.mark_interrupted() == 0  # our own running record belongs to a live process
    statuses = {r.id: r.status for r in mine.records()}
    assert statuses[live] == "running"
    assert sorted(statuses.values()) == ["interrupted", "running"]


def test_a_failed_record_says_why(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.sqlite")
    record = journal.begin(kind="verify", session_id="s", task_id="t", task_hash="h")
    journal.fail(record, "JudgeFailed: the verify job took longer than its limit")
    (entry,) = journal.records(session_id="s")
    assert entry.status == "failed" and "longer than its limit" in (entry.error or "")
