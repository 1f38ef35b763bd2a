"""The bubblewrap filesystem view, and the system directories and /etc files every view shows."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

# The system directories every view shows read-only (symlinks, as on merged-/usr systems, stay symlinks),
# and the few files of /etc that the dynamic loader, compilers and Python read.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group", "localtime")


def filesystem_view(cwd: Path, readable: Sequence[Path]) -> list[str]:
    """bubblewrap arguments for a root holding the system directories, `readable` (read-only) and `cwd`
    (read-write) at their own paths, a private /tmp, /proc and /dev; nothing else."""
    args: list[str] = []
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            args += ["--ro-bind", name, name]
    for entry in ETC_ENTRIES:
        args += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    # After the tmpfs, so paths under /tmp (a virtual environment, a test's workspace) show through it.
    system = [Path(name) for name in SYSTEM_DIRS]
    for path in readable:
        if not any(Path(path).is_relative_to(root) for root in system):  # those are visible already
            args += ["--ro-bind-try", str(path), str(path)]
    args += ["--bind", str(cwd), str(cwd), "--chdir", str(cwd)]
    return args
