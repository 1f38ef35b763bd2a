"""Issue 19, item 9: a test run never writes into the user's own journal or cache.

A small test that journals an evaluation record through the default state, as many tests do, is run
in a child pytest as a user would run the suite: once with this suite's conftest (the user's cache must
stay untouched) and once without it (the same test then writes there: the check can fail)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import EXAMPLES, REPO, STATE_VARIABLES

INNER_TEST = f"""
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session


def test_an_evaluation_record_in_the_default_journal(tmp_path):
    task = load_task_file({str(EXAMPLES / "relu" / "model.py")!r}, task_id="examples/relu")
    session = Session.create(task, tmp_path / "ws")  # the default cache and journal
    record = session.journal.begin(
        kind="verify", session_id=session.id, task_id=task.id, task_hash=task.content_hash
    )
    session.journal.fail(record, "written by a test")
"""


def _user_environment(home: Path) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in STATE_VARIABLES}
    return environment | {"HOME": str(home), "PYTHONPATH": str(REPO)}


def _journal(home: Path) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "cuda_agent_mcp", "journal", "--json"],
        capture_output=True,
        text=True,
        env=_user_environment(home),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["records"]


def _run_inner(tmp_path: Path, home: Path, *, with_conftest: bool) -> None:
    inner = tmp_path / "inner"
    inner.mkdir(exist_ok=True)
    (inner / "test_inner.py").write_text(INNER_TEST)
    plugin = ["-p", "tests.conftest"] if with_conftest else []
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *plugin, "-q", "-p", "no:cacheprovider", "--rootdir", str(inner), str(inner)],
        capture_output=True,
        text=True,
        env=_user_environment(home),
        cwd=REPO,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_a_test_run_leaves_the_users_journal_and_cache_untouched(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    user_cache, user_state = home / ".cache" / "cuda-agent-mcp", home / ".local" / "state" / "cuda-agent-mcp"
    _run_inner(tmp_path, home, with_conftest=True)
    assert not user_cache.exists(), sorted(p.name for p in user_cache.rglob("*"))
    assert not user_state.exists(), sorted(p.name for p in user_state.rglob("*"))
    assert _journal(home) == []  # `cuda-agent journal` lists no run the user never made

    _run_inner(tmp_path, home, with_conftest=False)  # the control: unprotected, the same test writes there
    assert [r["error"] for r in _journal(home)] == ["written by a test"]
