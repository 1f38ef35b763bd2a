"""The candidate worker's filesystem view, by Landlock (Linux 5.13+, unprivileged, irrevocable).

Applied in the worker just before the candidate is imported: from then on this process and everything
it starts may read only the system directories, the Python installation it runs (torch included) and the
candidate's own directory, and write only in its working directory and /dev (GPU device nodes, shared
memory). Not readable: the evaluator's sources, the reference, other workspaces, the build cache, the
judge's scratch. Landlock also forbids ptrace of processes outside the domain, so /proc/<judge>/mem and
the like are closed too, and (ABI 6, Linux 6.12) signals to them: the worker cannot stop the judge. Where the kernel has no Landlock, `confine` returns False and the judge records
that the worker ran without a filesystem view.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterable
from pathlib import Path

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # x86_64 and aarch64 share these numbers
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_ABI1_ALL = (1 << 13) - 1  # execute .. make_sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_READ = _EXECUTE | _READ_FILE | _READ_DIR

SYSTEM_PATHS = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/sys")
WRITABLE_SYSTEM_PATHS = ("/dev",)


class _RulesetAttr(ctypes.Structure):
    # The kernel reads as many fields as the size passed says: fs (ABI 1), net (ABI 4), scoped (ABI 6).
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


# ABI 6: no signals to, and no abstract unix sockets of, processes outside the domain (the judge, the
# fork server, other workers): the worker cannot stop or kill the judge that times it.
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is missing or disabled."""
    version = _libc.syscall(
        _CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
    )
    return max(int(version), 0)


def python_paths() -> list[Path]:
    """This interpreter's installation and import path, except the directory holding this package's
    sources (its modules are imported already; its files are the evaluator's)."""
    package_parent = Path(__file__).resolve().parents[2]
    paths = [Path(sys.prefix), Path(sys.base_prefix)]
    for entry in sys.path:
        path = Path(entry or ".").resolve()
        if path != package_parent and path.is_dir():
            paths.append(path)
    return paths


def confine(
    *,
    readable: Iterable[Path],
    writable: Iterable[Path],
    system_readable: Iterable[str] = SYSTEM_PATHS,
    system_writable: Iterable[str] = WRITABLE_SYSTEM_PATHS,
    scope_sockets: bool = True,
) -> bool:
    """Restrict this process (and its future children) to the view above; False without Landlock.
    The build's confinement (`build/confine.py`) passes narrower system paths (no /etc, /proc, /sys)."""
    abi = abi_version()
    if abi < 1:
        return False
    handled = _ABI1_ALL | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    scoped = ((_SCOPE_ABSTRACT_UNIX_SOCKET if scope_sockets else 0) | _SCOPE_SIGNAL) if abi >= 6 else 0
    attr = _RulesetAttr(handled, 0, scoped)
    size = 24 if abi >= 6 else 8  # the fields this kernel knows, and no more
    ruleset = _libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        return False
    try:
        for path in {*map(Path, system_readable), *readable}:
            _allow(ruleset, path, _READ)
        for path in {*map(Path, system_writable), *writable}:
            _allow(ruleset, path, handled)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if _libc.syscall(_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return True


def _allow(ruleset: int, path: Path, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path this machine does not have
    try:
        if not path.is_dir():
            access &= _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE  # the rights a file can carry
        rule = _PathBeneathAttr(access, fd)
        if _libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path}) failed")
    finally:
        os.close(fd)
