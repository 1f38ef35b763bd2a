# ruff: noqa: SIM105  # try/except, not contextlib: its import is a cost every command pays
"""The view builder: run one command in fresh namespaces, inside a filesystem view, as an unprivileged uid.

Started by `SandboxedExecutor` as `python -I -S view_main.py SPEC` (SPEC: a marshalled dict, in hex),
which imports this module (so its bytecode is cached) and its sibling `landlock.py`, standard library
only and nothing slow to import: a command pays an interpreter start, ctypes and a few syscalls.
Two modes:

`namespaces` (root, or any user where user namespaces are allowed):
    unshare(user?, mount, pid, net, ipc, uts), fork; the child is PID 1 of the new PID namespace and
    builds a new root on a tmpfs: the system directories, the declared read-only paths and the working
    directory (read-write, or an overlay whose upper layer is a tmpfs of the session's remaining quota),
    the protected files bound read-only over their own names, a fresh /proc, a minimal /dev, private /tmp
    and /dev/shm; pivot_root into it, the old root detached. Then it forks the command, which joins the
    pids cgroup, drops to the run's uid (when we are real root), enters a Landlock domain, sets its
    rlimits and execs. When the command ends (or at the deadline) PID 1 kills everything left in the
    namespace, merges the overlay's upper layer into the workspace and reports on the status descriptor.
`landlock` (no namespaces can be made): the same command, Landlock-confined to the same paths, its own
    process group, the quota watched by polling; this process is the subreaper of what it orphans, and
    kills what is left when it ends.

The status (a marshalled dict in the file `status_path`) says whether the deadline or a quota was hit.
"""

from __future__ import annotations

import ctypes
import errno
import marshal
import os
import resource
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's directory out
import landlock  # type: ignore[import-not-found]  # the sibling module, found the same way

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 16384, 1 << 18, 1 << 21, 1 << 24
MNT_DETACH = 2
SIGKILL = 9
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
SYS_PIVOT_ROOT = 155  # x86_64; aarch64 is 41
if os.uname().machine == "aarch64":
    SYS_PIVOT_ROOT = 41
# What statvfs reports of a mount that a bind of it must keep (a user namespace may not drop them).
_LOCKED = (
    (os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
    (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME),
)  # fmt: skip
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
EXIT_SETUP = 125  # the view could not be built: a message on stderr says why


class SetupError(Exception):
    pass


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(code)}")


def _bytes(text: str | None) -> bytes | None:
    return text.encode() if text is not None else None


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(_bytes(source), target.encode(), _bytes(fstype), flags, _bytes(data)), f"mount {target}"
    )


def bind(
    source: str, target: str, *, writable: bool = False, device: bool = False, recursive: bool = False
) -> None:
    """Bind `source` at `target` (created like it), read-only unless `writable`, keeping its locked flags;
    device nodes keep working only on a mount without nodev. `recursive` takes the mounts below `source`
    along (keeping their own flags): a system directory with a read-only mount inside it (the GPU
    machine's /usr/local/nvidia) shows it, where a plain bind would leave an empty directory that the
    read-only view cannot create a mount point in (measured on the H200: EROFS)."""
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    mount(source, target, None, MS_BIND | (MS_REC if recursive else 0))
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | (0 if device else MS_NODEV) | (0 if writable else MS_RDONLY)
    vfs = os.statvfs(source)
    for st_flag, ms_flag in _LOCKED:
        if vfs.f_flag & st_flag:
            flags |= ms_flag
    mount(None, target, None, flags)


def write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


# -- namespaces mode ------------------------------------------------------------------------------


def enter_namespaces(as_root: bool) -> None:
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    _check(_libc.unshare(flags | (0 if as_root else CLONE_NEWUSER)), "unshare")
    if not as_root:  # be root in a user namespace of our own: mounts become possible, nothing else
        write_file("/proc/self/setgroups", "deny")
        write_file("/proc/self/uid_map", f"0 {uid} 1")
        write_file("/proc/self/gid_map", f"0 {gid} 1")


def build_root(spec: dict, root: str) -> tuple[int | None, int]:
    """The new root under `root`; returns (fd of the overlay's upper directory or None, fd of the real
    working directory). Runs as (namespace) root, before the pivot."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    cwd = spec["cwd"]
    real_cwd = os.open(cwd, os.O_RDONLY | os.O_DIRECTORY)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,nr_inodes=4096,mode=0755")
    for name in spec["system"]:
        if os.path.islink(name):
            os.symlink(os.readlink(name), root + name)
        elif os.path.isdir(name):
            bind(name, root + name, recursive=True)
    os.makedirs(root + "/etc", exist_ok=True)
    for entry in spec["etc"]:
        if os.path.exists("/etc/" + entry):
            bind("/etc/" + entry, f"{root}/etc/{entry}")
    os.makedirs(root + "/proc")
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.makedirs(root + "/dev")
    mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
    for device in DEVICES:
        if os.path.exists("/dev/" + device):
            bind("/dev/" + device, f"{root}/dev/{device}", writable=True, device=True)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
        os.symlink(target, f"{root}/dev/{name}")
    os.makedirs(root + "/dev/shm")
    mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={spec['tmp_bytes']},mode=1777")
    os.makedirs(root + "/tmp", exist_ok=True)
    mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={spec['tmp_bytes']},mode=1777")
    # After /tmp's tmpfs, so declared paths under /tmp (a virtual environment, a cache) show through it;
    # shortest first, so a path inside one already bound is left to it.
    for path in spec["readable"]:
        if os.path.exists(path) and not os.path.exists(root + path):
            try:
                bind(path, root + path)
            except OSError as exc:  # no mount point can be made there (under a read-only system bind)
                if exc.errno != errno.EROFS:
                    raise
                sys.stderr.write(f"sandbox: {path} is not shown (no mount point can be made for it)\n")
    upper = mount_workdir(spec, root, cwd)
    for path in spec["protected"]:
        if os.path.isfile(path) and not os.path.islink(path):
            bind(path, root + path)
    # Nothing may be created beside the mounts: the root tmpfs becomes read-only.
    mount(None, root, None, MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_RDONLY)
    return upper, real_cwd


def mount_workdir(spec: dict, root: str, cwd: str) -> int | None:
    """The working directory at its own path: a read-write bind, or (with a quota) an overlay whose writes
    land in a tmpfs sized to what the quota has left, so a write past it fails with ENOSPC."""
    quota = spec.get("quota")
    if not quota:
        bind(cwd, root + cwd, writable=True)
        return None
    scratch = root + "/.quota"
    os.makedirs(scratch)
    # Inodes for every new name the quota allows and a whiteout for every name there is (deleting must
    # always be possible); new names past the quota are not kept by the merge.
    options = f"size={max(quota['bytes'], 4096)},nr_inodes={quota['files'] + quota['present'] + 16},mode=0755"
    mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, options)
    os.makedirs(scratch + "/upper")
    os.makedirs(scratch + "/work")
    if spec.get("uid") is not None:
        os.chown(scratch + "/upper", spec["uid"], spec["gid"])
    os.makedirs(root + cwd, exist_ok=True)
    overlay = f"lowerdir={cwd},upperdir={scratch}/upper,workdir={scratch}/work"
    if spec.get("userns"):
        overlay += ",userxattr"  # trusted.* xattrs need real root; a user namespace uses user.*
    try:
        mount("overlay", root + cwd, "overlay", MS_NOSUID | MS_NODEV, overlay)
    except SetupError as exc:  # no overlay here (an old kernel in a user namespace): poll the quota
        sys.stderr.write(f"sandbox: no overlay for the workspace quota ({exc}); it is polled instead\n")
        _check(_libc.umount2(scratch.encode(), MNT_DETACH), "umount quota scratch")
        spec["watch"], spec["quota"] = quota, None
        bind(cwd, root + cwd, writable=True)
        return None
    upper = os.open(scratch + "/upper", os.O_RDONLY | os.O_DIRECTORY)
    _check(_libc.umount2(scratch.encode(), MNT_DETACH), "umount quota scratch")  # hidden, kept by the fd
    return upper


def pivot(root: str) -> None:
    os.chdir(root)
    _check(_libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")


# -- the command ----------------------------------------------------------------------------------


def become_command(spec: dict) -> None:
    """In the forked child: the run's uid, Landlock, rlimits, then exec (never returns)."""
    try:
        _libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
        if spec["mode"] == "landlock":
            os.setpgid(0, 0)  # its own group: without a PID namespace, that is how it is killed
        uid = spec.get("uid")
        if uid is not None:
            os.setgroups([])
            os.setresgid(spec["gid"], spec["gid"], spec["gid"])
            os.setresuid(uid, uid, uid)
        os.chdir(spec["cwd"])
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        writable = [spec["cwd"], "/tmp", "/dev/shm", *("/dev/" + d for d in DEVICES)]
        if spec["mode"] == "landlock":
            writable += spec["scratch"]
        if spec["mode"] == "landlock":  # no view: name what may be read
            readable = [
                *spec["system"],
                *spec["readable"],
                "/proc",
                "/dev",
                *("/etc/" + e for e in spec["etc"]),
            ]
        else:  # the view holds only what may be read; Landlock keeps writes, signals and ptrace in
            readable = ["/"]
        if not landlock.restrict(readable=readable, writable=writable) and spec["mode"] == "landlock":
            raise SetupError("Landlock is not available")
        for name, value in spec["rlimits"].items():
            limit = getattr(resource, "RLIMIT_" + name.upper())
            # CPU: SIGXCPU at the limit (reported as such), SIGKILL a second later if it is ignored.
            resource.setrlimit(limit, (value, value + 1) if name == "cpu" else (value, value))
        argv = spec["argv"]
        os.execve(find_program(argv[0]), argv, os.environ)
    except FileNotFoundError:
        sys.stderr.write(f"{spec['argv'][0]}: command not found\n")
        os._exit(127)
    except PermissionError as exc:
        sys.stderr.write(f"{spec['argv'][0]}: {exc.strerror}\n")
        os._exit(126)
    except (OSError, SetupError) as exc:
        sys.stderr.write(f"sandbox: {exc}\n")
        os._exit(EXIT_SETUP)


def find_program(name: str) -> str:
    """`name` looked up in PATH as execvp would (without importing what os.execvpe does)."""
    if "/" in name:
        return name
    for directory in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(name)


def wait_for(child: int, spec: dict, *, reap_all: bool) -> tuple[int, bool, str | None]:
    """Wait for the command (polling, so the deadline and the quota watch need no threads); as PID 1
    also reap every orphan. Returns (wait status, deadline hit, quota hit)."""
    deadline = time.monotonic() + spec["deadline_s"]
    watch = spec.get("watch")
    start = usage(spec["cwd"]) if watch else (0, 0)  # the watch limits what the command adds
    next_watch = 0.0
    while True:
        pid, status = os.waitpid(-1 if reap_all else child, os.WNOHANG)
        if pid == child:
            return status, False, None
        if pid:
            continue
        now = time.monotonic()
        if now >= deadline:
            return kill_command(child, reap_all), True, None
        if watch and now >= next_watch:
            next_watch = now + 0.1
            size, files = usage(spec["cwd"])
            over = (
                "bytes"
                if size - start[0] > watch["bytes"]
                else "files"
                if files - start[1] > watch["files"]
                else None
            )
            if over is not None:
                return kill_command(child, reap_all), False, over
        time.sleep(0.005)


def kill_command(child: int, everything: bool) -> int:
    try:
        os.kill(-1, SIGKILL) if everything else os.killpg(child, SIGKILL)
    except ProcessLookupError:
        pass
    _, status = os.waitpid(child, 0)
    return status


def usage(top: str) -> tuple[int, int]:
    """(bytes, files and directories) under `top`, links not followed (the quota's polling fallback)."""
    files = size = 0
    for parent, dirs, names in os.walk(top):
        files += len(dirs) + len(names)
        for name in names:
            try:
                size += os.lstat(os.path.join(parent, name)).st_blocks * 512
            except OSError:
                pass
    return size, files


def reap_rest() -> None:
    try:
        os.kill(-1, SIGKILL)
    except ProcessLookupError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


# -- the overlay's writes, back into the workspace --------------------------------------------------


class Budget:
    """New names the workspace may still take (files and directories); what did not fit is counted."""

    def __init__(self, files: int) -> None:
        self.files = files
        self.dropped = 0

    def take(self) -> bool:
        if self.files <= 0:
            self.dropped += 1
            return False
        self.files -= 1
        return True


def merge(upper: int, lower: int, budget: Budget) -> None:
    """Apply the upper layer to the real working directory, never following a link: every name is one
    component opened relative to its parent's descriptor with O_NOFOLLOW. Deletions first (they give
    back room); a new name past the budget is not kept."""
    opaque_keys = (b"trusted.overlay.opaque", b"user.overlay.opaque")
    entries = [(name, os.stat(name, dir_fd=upper, follow_symlinks=False)) for name in os.listdir(upper)]
    whiteouts = [name for name, info in entries if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0]
    for name in whiteouts:
        budget.files += remove(lower, name)
    for name, info in entries:
        if name in whiteouts:
            continue
        existed = _exists(lower, name)
        if stat.S_ISDIR(info.st_mode):
            source = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=upper)
            try:
                opaque = any(_getxattr(source, key) == b"y" for key in opaque_keys)
                if opaque or not _is_dir(lower, name):
                    removed = remove(lower, name)
                    budget.files += removed
                    if removed == 0 and not budget.take():
                        continue
                    os.mkdir(name, info.st_mode & 0o777, dir_fd=lower)
                    budget.files -= 1 if removed else 0
                target = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=lower)
                try:
                    os.chmod(target, info.st_mode & 0o777)
                    os.chown(target, info.st_uid, info.st_gid)
                    merge(source, target, budget)
                finally:
                    os.close(target)
            finally:
                os.close(source)
        elif stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
            if not existed and not budget.take():
                continue
            if stat.S_ISREG(info.st_mode):
                copy_file(upper, lower, name, info)
            else:
                budget.files += max(0, remove(lower, name) - 1)
                os.symlink(os.readlink(name, dir_fd=upper), name, dir_fd=lower)
                os.chown(name, info.st_uid, info.st_gid, dir_fd=lower, follow_symlinks=False)
        # fifos, sockets and devices made by the command are dropped


def _exists(parent: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=parent, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def _getxattr(fd: int, key: bytes) -> bytes | None:
    try:
        return os.getxattr(fd, key)
    except OSError:
        return None


def _is_dir(parent: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def copy_file(upper: int, lower: int, name: str, info: os.stat_result) -> None:
    temporary = f".{name}.merge-{os.getpid()}"[-255:]
    source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=upper)
    try:
        target = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=lower)
        try:
            while chunk := os.read(source, 1 << 20):
                os.write(target, chunk)
            os.fchown(target, info.st_uid, info.st_gid)
            os.fchmod(target, info.st_mode & 0o777)
        finally:
            os.close(target)
    finally:
        os.close(source)
    if _is_dir(lower, name):
        remove(lower, name)  # a directory replaced by a file (rare): its names are not given back
    os.rename(temporary, name, src_dir_fd=lower, dst_dir_fd=lower)


def remove(parent: int, name: str) -> int:
    """Delete `name` under `parent` (a whole tree for a directory), never following links; how many
    names went."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return 0
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=parent)
        return 1
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    removed = 1
    try:
        for child in os.listdir(fd):
            removed += remove(fd, child)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)
    return removed


def quota_hit(upper: int) -> str | None:
    vfs = os.fstatvfs(upper)
    if vfs.f_bavail == 0:
        return "bytes"
    return "files" if vfs.f_favail == 0 else None


# -- entry ------------------------------------------------------------------------------------------


_status_fd = -1


def report(**status: object) -> None:
    try:
        os.write(_status_fd, marshal.dumps(status))
    except OSError:
        pass


def exit_like(status: int) -> None:
    """End this process the way the command ended (its exit code, or its signal)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        import signal  # only here: it imports enum, a cost every command would pay

        signal.signal(sig, signal.SIG_DFL)  # Python ignores some (SIGXFSZ, SIGPIPE) by default
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def join_cgroup(spec: dict) -> None:
    if spec.get("cgroup"):
        write_file(spec["cgroup"] + "/cgroup.procs", "0")


def run_in_namespaces(spec: dict) -> None:
    as_root = os.geteuid() == 0
    enter_namespaces(as_root)
    # PID 1 of a namespace cannot end itself by a signal, so it hands the command's wait status out
    # through a pipe and the process outside ends the way the command did.
    status_read, status_write = os.pipe()
    if (outer_child := os.fork()) != 0:
        os.close(status_write)
        os.waitpid(outer_child, 0)
        handed = os.read(status_read, 32)
        exit_like(int(handed) if handed.strip().isdigit() else EXIT_SETUP << 8)
    os.close(status_read)
    _libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
    join_cgroup(spec)
    upper, real_cwd = build_root(spec, spec["mountpoint"])
    pivot(spec["mountpoint"])
    child = os.fork()
    if child == 0:
        os.close(status_write)
        become_command(spec)
    status, timed_out, over = wait_for(child, spec, reap_all=True)
    reap_rest()
    merge_error = None
    if upper is not None:
        over = quota_hit(upper)
        budget = Budget(spec["quota"]["files"])
        try:
            merge(upper, real_cwd, budget)
        except OSError as exc:
            merge_error = str(exc)
        if budget.dropped:
            over = "files"
    report(timed_out=timed_out, quota=over, merge_error=merge_error)
    os.write(status_write, str(status).encode())
    os._exit(0)


def run_landlocked(spec: dict) -> None:
    join_cgroup(spec)
    # No PID namespace here: what the command orphans (a setsid daemon, a double fork's grandchild) would
    # go to init and outlive it. As their subreaper this process inherits them, and ends them with it.
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "child subreaper")
    child = os.fork()
    if child == 0:
        become_command(spec)
    status, timed_out, over = wait_for(child, spec, reap_all=False)
    try:
        os.killpg(child, SIGKILL)
    except ProcessLookupError:
        pass
    end_orphans()
    report(timed_out=timed_out, quota=over)
    exit_like(status)


def end_orphans(timeout_s: float = 5.0) -> None:
    """Kill and reap every process left below this one (the command's orphans, inherited as their
    subreaper) until none is left: one killed while it forked leaves a child, which comes here next."""
    deadline = time.monotonic() + timeout_s
    while (left := children()) and time.monotonic() < deadline:
        for pid in left:
            try:
                os.kill(pid, SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return
        time.sleep(0.001)


def children() -> list[int]:
    """This process's children, zombies included (the kernel's list where it keeps one, else /proc)."""
    me = os.getpid()
    try:
        with open(f"/proc/self/task/{me}/children") as listing:
            return [int(pid) for pid in listing.read().split()]
    except OSError:
        pass
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == me:
                        found.append(int(name))
            except (OSError, IndexError, ValueError):
                pass
    return found


def main() -> None:
    global _status_fd
    spec = marshal.loads(bytes.fromhex(sys.argv[1]))
    try:
        if spec["status_path"]:
            _status_fd = os.open(spec["status_path"], os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        (run_in_namespaces if spec["mode"] == "namespaces" else run_landlocked)(spec)
    except (OSError, SetupError) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.EPERM:
            exc = SetupError(f"{exc.strerror} ({exc.filename or 'setup'})")
        sys.stderr.write(f"sandbox: the view could not be built: {exc}\n")
        os._exit(EXIT_SETUP)


if __name__ == "__main__":
    main()
