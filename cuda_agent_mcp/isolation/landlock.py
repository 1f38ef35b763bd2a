"""Landlock (Linux 5.13+): an unprivileged, irrevocable filesystem allowlist for this process and its children.

The one Landlock primitive of the project, used three ways:
- `restrict`: the view builder (`view.py`) confines a sandboxed command to the paths of its view;
- `confine`: an evaluation worker, just before it imports the candidate, may from then on read only the
  system directories, the Python installation it runs (`python_paths`: torch included, this package's
  sources not) and the candidate's directory, and write only its working directory and /dev (GPU device
  nodes, shared memory); not the evaluator's sources, the reference, other workspaces, the build cache or
  the judge's scratch. Where the kernel has no Landlock `confine` returns False and the judge records that
  the worker ran without a filesystem view;
- `confine` with narrower system paths (`system_readable=()`, no /etc, /proc or /sys): the build's
  compilers (`build/confine.py`, which loads this file by its path).

Landlock also forbids ptrace of processes outside the domain (so /proc/<judge>/mem and the like are closed),
and from ABI 6 (Linux 6.12) the domain is scoped: its processes cannot signal processes outside it (a
worker cannot stop the judge that times it) or, unless `scope_sockets=False`, reach abstract Unix sockets
made outside it. From ABI 5, ioctls on devices are allowed only beneath the writable paths.

Standard library only, and nothing slow to import (no typing, no pathlib until `python_paths`): `view.py`
imports it as a sibling file in a bare interpreter (`python -I -S`), before any of the package could be
imported, and `build/confine.py` runs it from its file on every compile.
"""

from __future__ import annotations

import ctypes
import os
import sys

TYPE_CHECKING = False  # typing itself is slow to import, and the view's interpreter never needs it
if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # x86_64 and aarch64 share these numbers
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_ABI1_ALL = (1 << 13) - 1  # execute .. make_sym
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV  # the rights a file can carry
# ABI 6: no signals to, and no abstract unix sockets of, processes outside the domain (the judge, the
# fork server, other workers).
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

# What an evaluation worker may read and write besides its own paths.
SYSTEM_PATHS = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/sys")
WRITABLE_SYSTEM_PATHS = ("/dev",)


class _RulesetAttr(ctypes.Structure):
    # The kernel reads as many fields as the size passed says: fs (ABI 1), net (ABI 4), scoped (ABI 6).
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class RulesetRefused(OSError):
    """The kernel has Landlock but would not create a ruleset (nothing was restricted)."""


_libc = ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is missing or disabled."""
    version = _libc.syscall(
        _CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
    )
    return max(int(version), 0)


def restrict(
    *, readable: Iterable[str | Path], writable: Iterable[str | Path], scope_sockets: bool = True
) -> int:
    """Allow reading (and executing) beneath `readable`, everything beneath `writable`, nothing else;
    returns the ABI used (0: no Landlock here, nothing was restricted). Paths that do not exist are
    skipped. Sets no_new_privs, as Landlock requires of an unprivileged caller. Raises OSError when the
    domain cannot be made (`RulesetRefused` when not even a ruleset can)."""
    abi = abi_version()
    if abi < 1:
        return 0
    handled = _ABI1_ALL | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    handled |= _IOCTL_DEV if abi >= 5 else 0
    scoped = ((_SCOPE_ABSTRACT_UNIX_SOCKET if scope_sockets else 0) | _SCOPE_SIGNAL) if abi >= 6 else 0
    attr = _RulesetAttr(handled, 0, scoped)
    # Older kernels reject the fields they do not know: give them only the first (ABI 1-3) or two.
    size = ctypes.sizeof(attr) if abi >= 6 else ctypes.sizeof(ctypes.c_uint64)
    ruleset = _libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise RulesetRefused(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in {os.fspath(p) for p in readable}:
            _allow(ruleset, path, _READ)
        for path in {os.fspath(p) for p in writable}:
            _allow(ruleset, path, handled)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if _libc.syscall(_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return abi


def confine(
    *,
    readable: Iterable[str | Path],
    writable: Iterable[str | Path],
    system_readable: Iterable[str] = SYSTEM_PATHS,
    system_writable: Iterable[str] = WRITABLE_SYSTEM_PATHS,
    scope_sockets: bool = True,
) -> bool:
    """Restrict this process (and its future children) to `readable` and `writable` plus the system
    paths (a worker's view, see the module docstring); False without Landlock, or where the kernel
    refuses a ruleset. The build's confinement passes narrower system paths."""
    try:
        abi = restrict(
            readable=[*system_readable, *readable],
            writable=[*system_writable, *writable],
            scope_sockets=scope_sockets,
        )
    except RulesetRefused:
        return False
    return abi > 0


def python_paths() -> list[Path]:
    """This interpreter's installation and import path, except the directory holding this package's
    sources (its modules are imported already; its files are the evaluator's)."""
    from pathlib import Path  # only here: the view's interpreter never needs it

    package_parent = Path(__file__).resolve().parents[2]
    paths = [Path(sys.prefix), Path(sys.base_prefix)]
    for entry in sys.path:
        path = Path(entry or ".").resolve()
        if path != package_parent and path.is_dir():
            paths.append(path)
    return paths


def _allow(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path this machine does not have
    try:
        if not os.path.isdir(path):
            access &= _FILE_RIGHTS
        rule = _PathBeneathAttr(access, fd)
        if _libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path}) failed")
    finally:
        os.close(fd)
