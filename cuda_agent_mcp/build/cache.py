"""The content-addressed build cache: compiled objects and linked extensions, keyed by what made them.

    <root>/objects/<k[:2]>/<k>.o      object file        k = hash(source, headers, flags, toolchain)
    <root>/objects/<k[:2]>/<k>.json   its ObjectRecord (diagnostics, kernel resources), replayed on a hit
    <root>/extensions/<k>/cuda_extension.so                k = hash(object keys, toolchain)
    <root>/tmp/                       staging; entries move into place by atomic rename

Only the trusted builder writes here; compilers write into staging and never into the store.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from cuda_agent_mcp.results import Diagnostic, KernelResources
from cuda_agent_mcp.workspace.harness import EXTENSION_NAME


class ObjectRecord(BaseModel):
    """What compiling one translation unit produced besides the object itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    file: str
    kind: str
    diagnostics: list[Diagnostic] = []
    kernels: list[KernelResources] = []
    compile_wall_s: float


class BuildCache:
    """Object and extension store under one root directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "objects").mkdir(parents=True, exist_ok=True)
        (root / "extensions").mkdir(parents=True, exist_ok=True)
        (root / "tmp").mkdir(parents=True, exist_ok=True)

    # -- objects -------------------------------------------------------------------------------

    def object_path(self, key: str) -> Path:
        return self.root / "objects" / key[:2] / f"{key}.o"

    def lookup_object(self, key: str) -> ObjectRecord | None:
        """The record of a cached object, or None when either file is missing or unreadable."""
        obj = self.object_path(key)
        record = obj.with_suffix(".json")
        if not obj.exists() or not record.exists():
            return None
        try:
            return ObjectRecord.model_validate_json(record.read_text())
        except (OSError, ValidationError):
            return None

    def store_object(self, built: Path, record: ObjectRecord) -> Path:
        """Move a freshly built object into the store (object first, record last, both atomic)."""
        target = self.object_path(record.key)
        target.parent.mkdir(parents=True, exist_ok=True)
        _atomic_move(built, target)
        _atomic_write(target.with_suffix(".json"), record.model_dump_json(indent=1))
        return target

    # -- extensions ----------------------------------------------------------------------------

    def extension_path(self, key: str) -> Path:
        return self.root / "extensions" / key / f"{EXTENSION_NAME}.so"

    def store_extension(self, built: Path, key: str) -> Path:
        target = self.extension_path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        _atomic_move(built, target)
        return target

    def staging_dir(self) -> Path:
        path = self.root / "tmp" / uuid.uuid4().hex
        path.mkdir(parents=True)
        return path


def _atomic_move(source: Path, target: Path) -> None:
    # Staging lives under the same root, so a rename is atomic: readers never see half an object.
    os.replace(source, target)


def _atomic_write(target: Path, text: str) -> None:
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    temporary.write_text(text)
    os.replace(temporary, target)


def copy_atomically(source: Path, target: Path) -> None:
    """Copy so that a reader of `target` sees either the old file or the whole new one."""
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    shutil.copy2(source, temporary)
    os.replace(temporary, target)
