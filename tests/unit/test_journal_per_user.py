"""The journal is each user's own: in their state directory (0700), the file 0600, never in the build
cache (which may be shared); `cuda-agent journal` shows the caller's records, and an older journal left in
the cache only when asked (`--shared`), after the caller's own."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent_mcp.tools.journal import Journal, default_journal_path, legacy_journal_path
from tests.conftest import REPO


def _user_env(home: Path, cache: Path) -> dict[str, str]:
    """A user told apart by their home alone, all of them on one (shared) build cache."""
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_AGENT_STATE", "XDG_STATE_HOME")}
    return env | {"HOME": str(home), "CUDA_AGENT_CACHE": str(cache), "PYTHONPATH": str(REPO)}


def _record(journal: Path, task_id: str) -> None:
    log = Journal(journal)
    log.begin(kind="verify", session_id="s", task_id=task_id, task_hash="h")
    log.close()


def _journal_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent_mcp", "journal", "--json", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_two_users_on_one_cache_see_only_their_own_records_in_private_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "shared-cache"
    homes = {user: tmp_path / user for user in ("alice", "bob")}
    for user, home in homes.items():
        monkeypatch.delenv("CUDA_AGENT_STATE", raising=False)
        monkeypatch.delenv("XDG_STATE_HOME", raising=False)
        monkeypatch.setenv("HOME", str(home))
        path = default_journal_path()
        assert path == home / ".local" / "state" / "cuda-agent-mcp" / "journal.sqlite"
        _record(path, f"task-of-{user}")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for user, home in homes.items():
        done = _journal_cli(_user_env(home, cache))
        assert done.returncode == 0, done.stderr
        assert [r["task_id"] for r in json.loads(done.stdout)["records"]] == [f"task-of-{user}"]
    assert not legacy_journal_path(cache).exists()  # nothing of anyone's in the shared cache


def test_a_state_directory_left_open_is_made_private_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    monkeypatch.setenv("CUDA_AGENT_STATE", str(state))
    path = default_journal_path()
    _record(path, "t")
    path.chmod(0o644)
    Journal(path).close()
    assert stat.S_IMODE(state.stat().st_mode) == 0o700 and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_older_shared_journal_is_shown_only_when_asked_and_after_the_callers_own(tmp_path: Path) -> None:
    cache, home = tmp_path / "shared-cache", tmp_path / "carol"
    cache.mkdir()
    _record(legacy_journal_path(cache), "someone-elses")
    env = _user_env(home, cache)
    _record(home / ".local" / "state" / "cuda-agent-mcp" / "journal.sqlite", "carols")

    plain = _journal_cli(env)
    assert plain.returncode == 0, plain.stderr
    listing = json.loads(plain.stdout)
    assert [r["task_id"] for r in listing["records"]] == ["carols"] and listing["shared_records"] == []

    asked = _journal_cli(env, "--shared")
    listing = json.loads(asked.stdout)
    assert [r["task_id"] for r in listing["records"]] == ["carols"]
    assert [r["task_id"] for r in listing["shared_records"]] == ["someone-elses"]
    assert listing["shared_path"] == str(legacy_journal_path(cache))

    table = subprocess.run(
        [sys.executable, "-m", "cuda_agent_mcp", "journal"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        table.returncode == 0 and "--shared shows it" in table.stderr and "someone-elses" not in table.stdout
    )
