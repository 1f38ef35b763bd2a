"""The evaluation journal: records open and close, survive the process, and orphans become interrupted."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from cuda_agent_mcp.evaluation.rules_version import VERDICT_RULES_VERSION
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


# The table as journals were created before records carried their verdict rules (issue 23).
_SCHEMA_BEFORE_RULES_VERSION = """
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
    error TEXT
);
CREATE INDEX IF NOT EXISTS evaluations_started ON evaluations (started_at);
"""


def test_every_record_carries_the_verdict_rules_it_ran_under(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.sqlite")
    done = journal.begin(kind="verify", session_id="s", task_id="t", task_hash="h")
    journal.finish(done, _result(), verdict="passed", source_hash="abc", environment={})
    failed = journal.begin(kind="profile", session_id="s", task_id="t", task_hash="h")
    journal.fail(failed, "JudgeFailed: boom")
    assert {r.id: r.rules_version for r in journal.records()} == {
        done: VERDICT_RULES_VERSION,
        failed: VERDICT_RULES_VERSION,
    }


def test_a_journal_from_before_rules_versions_is_migrated_on_open_and_its_rows_read_as_unknown(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.sqlite"
    old = sqlite3.connect(path)
    old.executescript(_SCHEMA_BEFORE_RULES_VERSION)
    old.execute(
        "INSERT INTO evaluations (id, kind, session_id, task_id, task_hash, source_hash, status, verdict, "
        "started_at, finished_at, owner_pid, owner_start, environment, result, error) "
        "VALUES ('old', 'verify', 's', 't', 'h', 'abc', 'done', 'passed', 1.0, 2.0, 1, 'x', '{}', ?, NULL)",
        (_result().model_dump_json(),),
    )
    old.commit()
    old.close()

    journal = Journal(path)
    new = journal.begin(kind="verify", session_id="s", task_id="t", task_hash="h")
    journal.finish(new, _result(), verdict="passed", source_hash="abc", environment={})
    listing = journal.listing()
    assert listing.skipped == 0
    versions = {r.id: r.rules_version for r in listing.records}
    assert versions == {"old": None, new: VERDICT_RULES_VERSION}
    (entry,) = [r for r in listing.records if r.id == "old"]
    assert entry.status == "done" and entry.result is not None and entry.result["trials"] == 5
    assert [r.id for r in journal.records(rules_version=VERDICT_RULES_VERSION)] == [new]
    journal.close()
    assert Journal(path).listing().skipped == 0  # opened again: migrated once, nothing to do


def test_two_processes_opening_an_old_journal_at_once_both_work(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    old = sqlite3.connect(path)
    old.executescript(_SCHEMA_BEFORE_RULES_VERSION)
    old.close()
    script = (
        "import sys; from pathlib import Path; from cuda_agent_mcp.tools.journal import Journal\n"
        "j = Journal(Path(sys.argv[1])); r = j.begin(kind='verify', session_id='s', task_id='t', task_hash='h')\n"
        "j.fail(r, 'x')\n"
    )
    children = [subprocess.Popen([sys.executable, "-c", script, str(path)]) for _ in range(4)]
    assert [child.wait() for child in children] == [0] * 4
    records = Journal(path).records()
    assert len(records) == 4 and {r.rules_version for r in records} == {VERDICT_RULES_VERSION}
