"""Every judge and worker is given who it is and where its compile caches are (issue 23), by the one
module `isolation/identity.py`, on each path that starts one: a judge as the server's user, a forked
worker, a container worker. Only a trusted torch.compile load ever gets the judge's caches, and only
where Landlock keeps candidates out of them. (A judge as the worker uid, end to end:
tests/security/test_judge_identity.py.)"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest
from pydantic import ValidationError

from cuda_agent_mcp.isolation import landlock
from cuda_agent_mcp.isolation.identity import (
    FALLBACK_USER,
    identity_env,
    usable_compile_caches,
    user_name,
)
from cuda_agent_mcp.isolation.judge_user import plan_judge_start
from cuda_agent_mcp.judge.socket_worker import SocketWorker
from cuda_agent_mcp.judge.worker_client import WorkerProcess, worker_env
from cuda_agent_mcp.wire.protocol import LoadRequest

CACHES = {"TORCHINDUCTOR_CACHE_DIR": "/judge/cache/inductor", "TRITON_CACHE_DIR": "/judge/cache/triton"}


def _uid_without_passwd_entry() -> int:
    known = {entry.pw_uid for entry in pwd.getpwall()}
    return next(uid for uid in range(2**31 - 2, 2**31 - 100, -1) if uid not in known)


def test_a_uid_without_a_passwd_entry_is_named_ours_and_one_with_an_entry_keeps_its_name() -> None:
    assert identity_env(_uid_without_passwd_entry(), "/h") == {
        "HOME": "/h",
        "USER": FALLBACK_USER,
        "LOGNAME": FALLBACK_USER,
    }
    mine = pwd.getpwuid(os.getuid()).pw_name
    assert identity_env(os.getuid(), Path("/h")) == {"HOME": "/h", "USER": mine, "LOGNAME": mine}


def test_compile_caches_that_cannot_be_made_or_are_unset_move_to_the_fallback(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    environ = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "a-file" / "inductor")}  # TRITON_CACHE_DIR unset
    moved = usable_compile_caches(environ, tmp_path / "fallback")
    assert moved == ["TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"]
    assert environ == {
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "fallback" / "inductor"),
        "TRITON_CACHE_DIR": str(tmp_path / "fallback" / "triton"),
    }
    assert all(Path(path).is_dir() for path in environ.values())


def test_compile_caches_that_can_be_written_are_kept_and_made(tmp_path: Path) -> None:
    environ = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "i"), "TRITON_CACHE_DIR": str(tmp_path / "t")}
    assert usable_compile_caches(environ, tmp_path / "fallback") == []
    assert (tmp_path / "i").is_dir() and (tmp_path / "t").is_dir() and not (tmp_path / "fallback").exists()


def test_a_forked_workers_home_caches_and_name_are_its_own_never_the_judges(tmp_path: Path) -> None:
    judge = {"PATH": "/usr/bin", "HOME": "/judge", "USER": "judge", "LOGNAME": "judge", **CACHES}
    env = worker_env(judge, tmp_path, "tag")
    name = user_name(os.getuid())
    assert {k: env[k] for k in ("HOME", "TMPDIR", "USER", "LOGNAME")} == {
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "USER": name,
        "LOGNAME": name,
    }
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "cache" / "inductor")
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "cache" / "triton")


def test_a_container_workers_home_caches_and_name_are_in_its_own_tmp(tmp_path: Path) -> None:
    worker = SocketWorker(tmp_path, None)
    try:
        env = worker.environment({"PATH": "/usr/bin", **CACHES}, tmp_path / "shm")
    finally:
        worker._listener.close()
    name = user_name(os.getuid())
    assert {k: env[k] for k in ("HOME", "USER", "LOGNAME", *CACHES)} == {
        "HOME": "/tmp",
        "USER": name,
        "LOGNAME": name,
        "TORCHINDUCTOR_CACHE_DIR": "/tmp/cache/inductor",
        "TRITON_CACHE_DIR": "/tmp/cache/triton",
    }


def test_a_judge_as_the_servers_user_gets_a_name_and_persistent_caches_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_AGENT_JUDGE_USER", "server")
    start = plan_judge_start(["judge"], {"PATH": "/usr/bin", "HOME": "/srv"}, tmp_path, workers="fork")
    name = user_name(os.getuid())
    assert start.uid is None
    assert {k: start.env[k] for k in ("HOME", "USER", "LOGNAME", *CACHES)} == {
        "HOME": "/srv",
        "USER": name,
        "LOGNAME": name,
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "judge-cache" / "inductor"),
        "TRITON_CACHE_DIR": str(tmp_path / "judge-cache" / "triton"),
    }


def test_a_trusted_load_gets_the_judges_caches_only_where_landlock_confines_candidates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key, value in CACHES.items():
        monkeypatch.setenv(key, value)
    worker = object.__new__(WorkerProcess)  # the choice needs no process
    monkeypatch.setattr(landlock, "abi_version", lambda: 6)
    assert worker.trusted_compile_caches() == CACHES
    monkeypatch.setattr(landlock, "abi_version", lambda: 0)
    assert worker.trusted_compile_caches() == {}


def test_a_confined_candidate_load_can_never_carry_the_judges_caches_nor_a_load_other_variables() -> None:
    fields = {"directory": "/c", "module": "model_new", "class_name": "ModelNew", "init_args_pickle": ""}
    assert LoadRequest(**fields, compile_caches=CACHES).compile_caches == CACHES
    with pytest.raises(ValidationError, match="never gets the judge's compile caches"):
        LoadRequest(**fields, compile_caches=CACHES, confine_filesystem=True)
    with pytest.raises(ValidationError, match="names other variables"):
        LoadRequest(**fields, compile_caches={"LD_PRELOAD": "/x.so"})
