"""Machine facts that are slow to learn (GPU arch, compiler versions), remembered on disk.

Each fact is stored with a key that changes whenever the fact can (a binary's size and mtime, the boot
id and visible devices), so a stale value is never used. Saves the subprocesses on every short-lived
`cuda-agent compile` run; a long-lived server pays them once anyway.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path

FACTS_FILE = "machine-facts.json"


def file_identity(path: str | Path) -> str:
    """A key for a binary: its real path, size and modification time."""
    real = Path(path).resolve()
    try:
        stat = real.stat()
    except OSError:
        return f"{real}:missing"
    return f"{real}:{stat.st_size}:{stat.st_mtime_ns}"


def boot_identity() -> str:
    """Changes on reboot and with the set of GPUs this process may see."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = "unknown-boot"
    visible = [os.environ.get(n, "") for n in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")]
    return ":".join([boot, *visible])


def remembered(directory: Path | None, name: str, key: str, compute: Callable[[], str]) -> str:
    """The value of fact `name` for `key`: from disk when known, else computed and stored."""
    if directory is None:
        return compute()
    path = directory / FACTS_FILE
    try:
        facts = json.loads(path.read_text())
    except (OSError, ValueError):
        facts = {}
    entry = facts.get(name) if isinstance(facts, dict) else None
    if isinstance(entry, dict) and entry.get("key") == key and isinstance(entry.get("value"), str):
        return entry["value"]
    value = compute()
    facts = facts if isinstance(facts, dict) else {}
    facts[name] = {"key": key, "value": value}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{FACTS_FILE}.{uuid.uuid4().hex}")
        temporary.write_text(json.dumps(facts, indent=1))
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only cache only costs the subprocess next time
    return value
