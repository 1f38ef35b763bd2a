"""Which Linux namespaces `unshare(1)` lets this process create, and the options that make each."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache

# unshare(1) options per namespace: a network namespace, or a PID namespace with its own /proc whose
# processes die with the command.
NAMESPACE_OPTIONS = {
    "network": ["--net"],
    "pid": ["--pid", "--fork", "--kill-child", "--mount-proc"],
}


@cache
def available_isolation() -> tuple[str, ...]:
    """The namespaces `unshare(1)` lets this process create (probed once); evaluation workers use it."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return ()
    usable = []
    for name, options in NAMESPACE_OPTIONS.items():
        try:
            done = subprocess.run([unshare, *options, "--", "true"], capture_output=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            usable.append(name)
    return tuple(usable)
