"""Plain descriptions of tensors that cross between processes, and the shared-memory files behind
CPU ones. No torch here: the judge's entry point uses these before it imports torch."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SHM_TAG_ENV = "CUDA_AGENT_SHM_TAG"
# Where shared-memory files live: /dev/shm, or a directory private to one judge and its containers
# (container workers have their own /dev/shm; see container_worker.py).
SHM_DIR_ENV = "CUDA_AGENT_SHM_DIR"
HOST_SHM = Path("/dev/shm")


def shm_dir() -> Path:
    return Path(os.environ.get(SHM_DIR_ENV) or HOST_SHM)


def shm_file_mode() -> int | None:
    """The mode a new shared-memory file is given, None to keep the creator's 0600. In a judge's private
    directory the directory restricts who may enter, and the worker in a container may run under another
    uid than the judge: there both must read and write each other's files."""
    return None if shm_dir() == HOST_SHM else 0o666


def shm_tag() -> str:
    """Names of this evaluation's shared-memory files start with it, so the judge can remove them all,
    including those of a worker that died before it could say which files it made."""
    tag = os.environ.get(SHM_TAG_ENV, "")
    if len(tag) != 12 or any(c not in "0123456789abcdef" for c in tag):
        tag = uuid.uuid4().hex[:12]
        os.environ[SHM_TAG_ENV] = tag
    return tag


# The first characters of a tag name its judge: a worker's tag shares them with its judge's, so whoever
# killed a judge can remove every file of that judge and its workers (`remove_judge_shm`).
FAMILY_CHARS = 6


def worker_tag() -> str:
    """A new tag for one of this judge's workers."""
    return shm_tag()[:FAMILY_CHARS] + uuid.uuid4().hex[: 12 - FAMILY_CHARS]


def remove_shm_files(tag: str) -> None:
    for path in shm_dir().glob(f"cuda-agent-{tag}-*"):
        path.unlink(missing_ok=True)


def remove_judge_shm(judge_tag: str) -> None:
    """Everything a killed judge (tag `judge_tag`) and its workers left in shared memory: their files in
    /dev/shm and its private directory (see socket_worker.PrivateShm)."""
    family = judge_tag[:FAMILY_CHARS]
    for path in HOST_SHM.glob(f"cuda-agent-{family}*"):
        path.unlink(missing_ok=True)
    for path in HOST_SHM.glob(f"cuda-agent-judge-shm-{family}-*"):
        shutil.rmtree(path, ignore_errors=True)


# A judge whose /dev/shm is a mount of its own (started in its own mount namespace: every file in it is
# this judge's or its workers') says so here; then everything a worker left is removed after it.
PRIVATE_SHM_ENV = "CUDA_AGENT_PRIVATE_SHM"
_TORCH_REFCOUNT = re.compile(r"^torch_(\d+)_")
_OURS = re.compile(r"^(cuda-agent-|sem\.mp-|torch_\d+_)")


# Files the judge's own CUDA exports made in /dev/shm (the driver's IPC files: a worker opens them to map
# the judge's memory, so removing one breaks every later worker's mapping of it; measured on the H200).
_JUDGE_FILES: set[str] = set()


def note_judge_files(before: set[str]) -> None:
    """Record what appeared in /dev/shm since `before`, around one of the judge's own CUDA exports."""
    _JUDGE_FILES.update(shm_snapshot() - before)


def shm_snapshot() -> set[str]:
    """The names in /dev/shm before a worker starts."""
    try:
        return set(os.listdir(HOST_SHM))
    except OSError:
        return set()


def remove_worker_shm(before: set[str], worker_pid: int | None) -> None:
    """Remove what a finished worker left in /dev/shm (principle 6: nothing a worker writes reaches a
    later worker, a baseline or the judge): torch's reference-count files of its process and every file
    it made that no one else would have made. Where the judge's /dev/shm is private (PRIVATE_SHM_ENV),
    every new file but the judge's own is the worker's. On a shared /dev/shm a file named like another
    process's torch or judge file is left alone (it may be one); the judge's private mount closes that gap."""
    private = os.environ.get(PRIVATE_SHM_ENV) == "1"
    judge_prefix = f"cuda-agent-{shm_tag()}-"
    own_pid = os.getpid()
    for name in shm_snapshot() - before:
        refcount = _TORCH_REFCOUNT.match(name)
        if (
            name in _JUDGE_FILES
            or name.startswith(judge_prefix)
            or (refcount is not None and int(refcount.group(1)) == own_pid)
        ):
            continue  # the judge's own files
        mine = refcount is not None and worker_pid is not None and int(refcount.group(1)) == worker_pid
        if private or mine or not _OURS.match(name):
            with contextlib.suppress(OSError):
                path = HOST_SHM / name
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink()


class CudaIpcPayload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["cuda_ipc"] = "cuda_ipc"
    device: int = Field(ge=0)
    handle: str  # base64
    storage_size_bytes: int = Field(ge=0)
    storage_offset_bytes: int = Field(ge=0)
    ref_counter_handle: str  # base64
    ref_counter_offset: int = Field(ge=0)
    event_handle: str | None = None  # base64
    event_sync_required: bool


class ShmPayload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["shm"] = "shm"
    name: str = Field(pattern=r"^cuda-agent-[0-9a-f]{12}-[0-9a-f]{32}$")
    storage_size_bytes: int = Field(ge=0)


class TensorRef(BaseModel):
    """One tensor, described in plain fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dtype: str
    shape: list[int]
    stride: list[int]
    storage_offset: int = Field(ge=0)
    payload: CudaIpcPayload | ShmPayload = Field(discriminator="kind")


def release_shm(ref: TensorRef) -> None:
    """Delete the shared-memory file behind a CPU TensorRef (a no-op for CUDA)."""
    if isinstance(ref.payload, ShmPayload):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(shm_dir() / ref.payload.name)
