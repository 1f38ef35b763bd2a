"""The build cache trusts nothing it reads back: entries hashed at store, checked on every hit, evicted
when bad; and it stays under its size cap by evicting the least recently used entries."""

from __future__ import annotations

import os
import time
from pathlib import Path

from cuda_agent_mcp.build.cache import BuildCache, ObjectRecord


def _store(cache: BuildCache, key: str, size: int = 1000) -> Path:
    staged = cache.staging_dir() / f"{key}.o"
    staged.write_bytes(os.urandom(size))
    record = ObjectRecord(key=key, file="kernels/k.cu", kind="cu", compile_wall_s=0.1)
    return cache.store_object(staged, record)


def test_a_stored_object_is_read_only_and_a_changed_one_is_evicted_not_returned(
    tmp_path: Path, caplog
) -> None:  # type: ignore[no-untyped-def]
    cache = BuildCache(tmp_path)
    key = "ab" + "0" * 62
    path = _store(cache, key)
    assert oct(path.stat().st_mode & 0o777) == "0o444"
    record = cache.lookup_object(key)
    assert record is not None and len(record.sha256) == 64
    path.chmod(0o644)
    with path.open("ab") as poisoned:
        poisoned.write(b"poison")
    assert cache.lookup_object(key) is None
    assert not path.exists() and not path.with_suffix(".json").exists()
    assert "evicted object" in caplog.text and "does not match the recorded hash" in caplog.text


def test_an_object_recorded_without_a_hash_is_not_trusted(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path)
    key = "cd" + "1" * 62
    path = _store(cache, key)
    legacy = ObjectRecord(key=key, file="kernels/k.cu", kind="cu", compile_wall_s=0.1)  # an older record
    record_path = path.with_suffix(".json")
    record_path.chmod(0o644)
    record_path.write_text(legacy.model_dump_json())
    assert cache.lookup_object(key) is None


def test_an_extension_is_checked_on_every_hit(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path)
    staged = cache.staging_dir() / "cuda_extension.so"
    staged.write_bytes(b"\x7fELF" + os.urandom(4000))
    path = cache.store_extension(staged, "e" * 64)
    assert cache.lookup_extension("e" * 64) == path
    path.chmod(0o644)
    path.write_bytes(path.read_bytes()[:-1] + b"!")  # same size, other bytes
    assert cache.lookup_extension("e" * 64) is None and not path.exists()


def test_the_least_recently_used_entries_go_when_the_store_passes_its_cap(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path, max_bytes=10_000)
    keys = [f"{i:02d}" + "f" * 62 for i in range(6)]
    for age, key in enumerate(keys):
        path = _store(cache, key, size=2500)
        old = time.time() - 3600 * (10 - age)  # the first stored is the least recently used
        os.utime(path.with_suffix(".json"), (old, old))
    cache.evict_to_cap()
    kept = [k for k in keys if cache.object_path(k).exists()]
    assert cache.size_bytes() <= 9000
    assert kept == keys[-len(kept) :] and kept, kept  # the newest survive, the oldest went first
