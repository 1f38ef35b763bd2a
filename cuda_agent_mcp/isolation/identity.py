"""Who a judge or worker process is, in its environment, whatever uid it runs as (issue 23).

Judges and workers get their whole environment from us, so nothing in it comes from a login: without
`USER` or `LOGNAME`, `getpass.getuser()` asks passwd, and the worker uid (10001) has no entry on most
machines (torch 2.11's inductor then failed every torch.compile baseline with `getpwuid(): uid not
found`). So every judge and worker gets `HOME`, `USER` and `LOGNAME` (the passwd name where the uid has
one, else `cuda-agent`), and names its inductor and Triton caches itself instead of letting them follow
a user name or a home.

Standard library only: the tool process (judge starts) and the judge (its workers) both use it.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import MutableMapping
from pathlib import Path

FALLBACK_USER = "cuda-agent"  # for a uid without a passwd entry
INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
TRITON_CACHE_ENV = "TRITON_CACHE_DIR"
COMPILE_CACHE_ENVS = (INDUCTOR_CACHE_ENV, TRITON_CACHE_ENV)


def user_name(uid: int) -> str:
    """The uid's passwd name, or FALLBACK_USER where it has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return FALLBACK_USER


def identity_env(uid: int, home: Path | str) -> dict[str, str]:
    """HOME, USER and LOGNAME of a process running as `uid` (getpass reads LOGNAME and USER first)."""
    name = user_name(uid)
    return {"HOME": str(home), "USER": name, "LOGNAME": name}


def compile_cache_env(root: Path | str) -> dict[str, str]:
    """Inductor's and Triton's cache directories, under `root`."""
    return {
        INDUCTOR_CACHE_ENV: os.path.join(root, "inductor"),
        TRITON_CACHE_ENV: os.path.join(root, "triton"),
    }


def usable_compile_caches(environ: MutableMapping[str, str], fallback_root: Path) -> list[str]:
    """Make the compile caches `environ` names; any that cannot be made or written here is moved under
    `fallback_root` (a directory of the process's own). Returns the variables moved."""
    moved = []
    fallback = compile_cache_env(fallback_root)
    for key in COMPILE_CACHE_ENVS:
        path = environ.get(key)
        if path and _writable_directory(path):
            continue
        environ[key] = fallback[key]
        os.makedirs(fallback[key], mode=0o700, exist_ok=True)
        moved.append(key)
    return moved


def _writable_directory(path: str) -> bool:
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)
