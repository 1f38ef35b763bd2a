"""Start a judge server as the unprivileged worker uid: `python -I -S judge_view.py SPEC_JSON` (run as root).

Measured on the H200 (docs/DECISIONS.md, issue 17): CUDA IPC between a judge and its workers needs one
uid, one /dev/shm and no user namespace between them. So the judge gets, before it drops to the worker
uid and execs itself:
- a network namespace of its own (its workers, forked from it, inherit it: no network for them either);
- a mount namespace with private tmpfs mounts on /dev/shm and /tmp (its and its workers' alone);
- the paths it needs made reachable for that uid: each directory on the way it may not search (a root
  home holding the Python, a private test directory) is covered by a tmpfs that holds just those paths,
  bound back at their own names; the rest of the machine is as the uid sees it;
- its pids cgroup subtree (delegated to the uid by the caller), joined before the uid is dropped.
No PID namespace (not measured with CUDA) and no Landlock: the judge is trusted; its workers confine
themselves.
"""

from __future__ import annotations

import json
import os
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's directory out
import view  # type: ignore[import-not-found]  # the sibling file: mount helpers

PRIVATE = ("/dev/shm", "/tmp")


def searchable(path: str, uid: int, gid: int) -> bool:
    """Whether `uid` may pass through directory `path` (search permission, ignoring ACLs)."""
    info = os.stat(path)
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid == gid:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def blocked_at(path: str, uid: int, gid: int) -> str | None:
    """The outermost directory above `path` that `uid` cannot pass (or a private mount above it)."""
    parts = path.strip("/").split("/")
    for depth in range(1, len(parts)):
        ancestor = "/" + "/".join(parts[:depth])
        if ancestor in PRIVATE or not searchable(ancestor, uid, gid):
            return ancestor
    return None


def make_reachable(needed: list[str], uid: int, gid: int, tmp_bytes: int) -> None:
    """Private /dev/shm and /tmp, and every needed path passable for `uid` (see the module docstring)."""
    present = [p for p in needed if os.path.exists(p)]
    fds = {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p in present}  # taken before anything is covered
    blocked = {blocked_at(p, uid, gid) for p in present}
    covers = {c for c in blocked if c is not None} | set(PRIVATE)
    outermost = sorted(c for c in covers if not any(c != o and c.startswith(o + "/") for o in covers))
    for cover in outermost:
        mode = "1777" if cover in PRIVATE else "0755"
        options = f"size={tmp_bytes if cover in PRIVATE else 4 << 20},mode={mode}"
        view.mount("tmpfs", cover, "tmpfs", view.MS_NOSUID | view.MS_NODEV, options)
        for path, fd in fds.items():
            if path == cover or path.startswith(cover + "/"):
                _bind_back(fd, path)


def _bind_back(fd: int, path: str) -> None:
    source = f"/proc/self/fd/{fd}"
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.makedirs(path, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        if not os.path.exists(path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
    view.mount(source, path, None, view.MS_BIND | view.MS_REC)


def main() -> None:
    spec = json.loads(sys.argv[1])
    uid, gid = spec["uid"], spec["gid"]
    try:
        view._check(view._libc.unshare(view.CLONE_NEWNS | view.CLONE_NEWNET), "unshare")
        view.mount(None, "/", None, view.MS_REC | view.MS_PRIVATE)
        make_reachable(spec["reachable"], uid, gid, spec["tmp_bytes"])
        if spec.get("cgroup"):
            view.write_file(spec["cgroup"] + "/main/cgroup.procs", "0")
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except (OSError, view.SetupError) as exc:
        sys.stderr.write(f"judge view: {exc}\n")
        os._exit(view.EXIT_SETUP)
    argv = spec["argv"]
    os.execve(argv[0], argv, os.environ)


if __name__ == "__main__":
    main()
