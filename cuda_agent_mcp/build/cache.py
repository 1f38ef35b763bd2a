"""The content-addressed build cache: compiled objects and linked extensions, keyed by what made them.

    <root>/objects/<k[:2]>/<k>.o      object file        k = hash(source, headers, flags, toolchain)
    <root>/objects/<k[:2]>/<k>.json   its ObjectRecord (diagnostics, kernel resources, the object's sha256)
    <root>/extensions/<k>/cuda_extension.so                k = hash(object keys, toolchain)
    <root>/extensions/<k>/cuda_extension.py                a CuPy workspace's module (its cubins inside)
    <root>/extensions/<k>/record.json its sha256 and size
    <root>/tmp/                       staging; entries move into place by atomic rename

Only the trusted builder writes here, outside every sandbox view (no agent command, compiler or worker
sees this directory): compilers write into staging, and each entry is moved into the store, made ours and
read-only, and its sha256 recorded. Every hit is checked against that hash; an entry that does not match
(or has no hash) is evicted and logged, and the caller builds it again. The store is kept under a size cap
(`$CUDA_AGENT_CACHE_MAX_BYTES`, default 20 GiB) by evicting the least recently used entries.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import threading
import time
import uuid
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuda_agent_mcp.results import Diagnostic, KernelResources
from cuda_agent_mcp.workspace.harness import EXTENSION_NAME

_log = logging.getLogger(__name__)

MAX_BYTES_ENV = "CUDA_AGENT_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 20 * 1024**3
# Entries used this recently are never evicted: a build or an evaluation may be reading them.
_IN_USE_S = 600.0


class ObjectRecord(BaseModel):
    """What compiling one translation unit produced besides the object itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    file: str
    kind: str
    diagnostics: list[Diagnostic] = []
    kernels: list[KernelResources] = []
    compile_wall_s: float
    sha256: str = Field(default="", description="of the object, recorded when it was stored")


class _ExtensionRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    sha256: str
    size: int


class BuildCache:
    """Object and extension store under one root directory."""

    def __init__(self, root: Path, *, max_bytes: int | None = None) -> None:
        self.root = root
        self.max_bytes = max_bytes if max_bytes is not None else _max_bytes_from_env()
        for name in ("objects", "extensions", "tmp"):
            (root / name).mkdir(parents=True, exist_ok=True)
        self._size: int | None = None  # the store's bytes, counted on first need, then kept up to date
        self._lock = threading.Lock()

    # -- objects -------------------------------------------------------------------------------

    def object_path(self, key: str) -> Path:
        return self.root / "objects" / key[:2] / f"{key}.o"

    def lookup_object(self, key: str) -> ObjectRecord | None:
        """The record of a cached object whose bytes still hash to what was stored, or None (missing,
        unreadable, or bad: then evicted, so the caller compiles it again)."""
        obj = self.object_path(key)
        record_path = obj.with_suffix(".json")
        if not obj.exists() or not record_path.exists():
            return None
        try:
            record = ObjectRecord.model_validate_json(record_path.read_text())
        except (OSError, ValidationError):
            self._evict("object", key, [obj, record_path], "its record is unreadable")
            return None
        if record.key != key or not record.sha256 or _sha256(obj) != record.sha256:
            self._evict("object", key, [obj, record_path], "its content does not match the recorded hash")
            return None
        _touch(record_path)
        return record

    def store_object(self, built: Path, record: ObjectRecord) -> Path:
        """Move a freshly built object into the store (object first, record last, both atomic)."""
        target = self.object_path(record.key)
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = _take(built, target)
        record = record.model_copy(update={"sha256": digest})
        _atomic_write(target.with_suffix(".json"), record.model_dump_json(indent=1))
        self._grew(target.stat().st_size)
        return target

    # -- extensions ----------------------------------------------------------------------------

    def extension_path(self, key: str, name: str = f"{EXTENSION_NAME}.so") -> Path:
        """Where the extension of `key` lives: a linked `cuda_extension.so`, or a CuPy workspace's
        generated `cuda_extension.py` (`name`)."""
        return self.root / "extensions" / key / name

    def lookup_extension(self, key: str, name: str = f"{EXTENSION_NAME}.so") -> Path | None:
        """The cached extension if its bytes still hash to what was stored, else None (a bad one is
        evicted, so the caller links it again)."""
        path = self.extension_path(key, name)
        record_path = path.with_name("record.json")
        if not path.exists():
            return None
        try:
            record = _ExtensionRecord.model_validate_json(record_path.read_text())
        except (OSError, ValidationError):
            self._evict("extension", key, [path, record_path], "it has no readable record")
            return None
        if path.stat().st_size != record.size or _sha256(path) != record.sha256:
            self._evict("extension", key, [path, record_path], "its content does not match the recorded hash")
            return None
        _touch(record_path)
        return path

    def store_extension(self, built: Path, key: str, name: str = f"{EXTENSION_NAME}.so") -> Path:
        target = self.extension_path(key, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = _take(built, target)
        record = _ExtensionRecord(sha256=digest, size=target.stat().st_size)
        _atomic_write(target.with_name("record.json"), record.model_dump_json())
        self._grew(record.size)
        return target

    def staging_dir(self) -> Path:
        path = self.root / "tmp" / uuid.uuid4().hex
        path.mkdir(parents=True)
        return path

    # -- size ----------------------------------------------------------------------------------

    def entries(self) -> list[tuple[float, int, list[Path]]]:
        """Every entry as (last use, bytes, its files)."""
        found = []
        for record in (self.root / "objects").glob("*/*.json"):
            files = [record.with_suffix(".o"), record]
            found.append((_mtime(record), sum(_size(f) for f in files), files))
        for directory in (self.root / "extensions").iterdir():
            files = [p for p in directory.iterdir()] if directory.is_dir() else []
            record = directory / "record.json"
            found.append((_mtime(record if record.exists() else directory), sum(map(_size, files)), files))
        return found

    def size_bytes(self) -> int:
        return sum(size for _, size, _ in self.entries())

    def evict_to_cap(self) -> int:
        """Remove the least recently used entries until the store is under 90 % of its cap (entries used
        in the last ten minutes are kept whatever the size); the bytes removed."""
        entries = sorted(self.entries(), key=lambda e: e[0])
        total = sum(size for _, size, _ in entries)
        target, removed, now = int(self.max_bytes * 0.9), 0, time.time()
        for used, size, files in entries:
            if total - removed <= target or now - used < _IN_USE_S:
                break
            _remove(files)
            removed += size
        with self._lock:
            self._size = total - removed
        if removed:
            _log.info(
                "build cache: evicted %d bytes of least recently used entries (cap %d)",
                removed,
                self.max_bytes,
            )
        return removed

    def _grew(self, size: int) -> None:
        with self._lock:
            if self._size is None:
                self._size = -1  # counted below, outside the lock
            else:
                self._size += size
            over = self._size < 0 or self._size > self.max_bytes
        if over:
            self.evict_to_cap()

    def _evict(self, kind: str, key: str, files: list[Path], why: str) -> None:
        _log.warning("build cache: evicted %s %s because %s; it will be built again", kind, key, why)
        _remove(files)


def _max_bytes_from_env() -> int:
    text = os.environ.get(MAX_BYTES_ENV, "")
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_MAX_BYTES


def _take(built: Path, target: Path) -> str:
    """Move a file a compiler made (possibly as another uid) into the store: ours, read-only, hashed.
    Staging lives under the same root, so the rename is atomic: readers never see half an entry. The
    hash is taken after the file is ours and read-only, so no one else can change it afterwards."""
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    # A copy, not the compiler's own inode (whoever made it may still hold it open for writing), and
    # never through a link.
    with open(os.open(built, os.O_RDONLY | os.O_NOFOLLOW), "rb") as source, temporary.open("xb") as copy:
        shutil.copyfileobj(source, copy, 1 << 20)
    os.chmod(temporary, 0o444)
    digest = _sha256(temporary)
    os.replace(temporary, target)
    return digest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _touch(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(path)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _remove(files: list[Path]) -> None:
    for path in files:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    with contextlib.suppress(OSError):
        files[0].parent.rmdir()  # an extension's directory, once empty (object shards stay)


def _atomic_write(target: Path, text: str) -> None:
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    temporary.write_text(text)
    os.chmod(temporary, 0o444)
    os.replace(temporary, target)


def copy_atomically(source: Path, target: Path) -> None:
    """Copy so that a reader of `target` sees either the old file or the whole new one."""
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    shutil.copy2(source, temporary)
    os.replace(temporary, target)
