"""Worker process entry: `python -m cuda_agent_mcp.worker REQUEST_FD REPLY_FD`, or, in a container,
`python -m cuda_agent_mcp.worker --connect SOCKET` (the judge listens on SOCKET).

Serves one evaluation, then exits. Exits at once after a CUDA error: the context cannot be trusted.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import os
import resource
import select
import signal
import socket
import sys
import threading
import traceback
from typing import Literal

from cuda_agent_mcp.wire.lifetime import die_with_parent
from cuda_agent_mcp.wire.paused_gc import paused_garbage_collection
from cuda_agent_mcp.wire.protocol import (
    Failure,
    ForkSetup,
    LoadRequest,
    ObserveRequest,
    PingRequest,
    Pong,
    Prepared,
    PrepareRequest,
    Released,
    RunRequest,
    parse_request,
    read_frame_body,
    write_frame,
)
from cuda_agent_mcp.worker.runner import Runner, is_cuda_error, is_out_of_memory, warm_up

EXIT_CUDA_ERROR = 3


def _describe(exc: BaseException) -> str:
    frames = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-4)
    return "".join(frames)[-6000:]


def serve(request_fd: int, reply_fd: int) -> None:
    runner = Runner()
    while True:
        try:
            request = parse_request(read_frame_body(request_fd))
        except EOFError:
            return
        phase: Literal["load", "call"] = "load" if isinstance(request, LoadRequest) else "call"
        try:
            if isinstance(request, LoadRequest):
                write_frame(reply_fd, runner.load(request))
                gc.freeze()  # what loading made is never garbage: later collections skip it
            elif isinstance(request, PrepareRequest):
                runner.prepare(request)
                write_frame(reply_fd, Prepared())
            elif isinstance(request, RunRequest | ObserveRequest):
                # Every batch's reply is inside the judge's clock: no collection may pause it, and every
                # batch is run alike (the worker does not know which ones are timed).
                with paused_garbage_collection():
                    observe = request if isinstance(request, ObserveRequest) else None
                    write_frame(reply_fd, runner.run(observe))
            elif isinstance(request, PingRequest):
                write_frame(reply_fd, Pong())
            else:
                runner.release(inputs=request.inputs)
                write_frame(reply_fd, Released())
        except Exception as exc:
            cuda = is_cuda_error(exc)
            kind: Literal["cuda_error", "exception", "out_of_memory"] = (
                "out_of_memory" if is_out_of_memory(exc) else "cuda_error" if cuda else "exception"
            )
            write_frame(reply_fd, Failure(phase=phase, kind=kind, message=_describe(exc)))
            if cuda:
                os._exit(EXIT_CUDA_ERROR)


# Candidates have no reason to write files; this also caps what they can print into the worker's log.
MAX_FILE_BYTES = 64 * 1024 * 1024


def limit_resources() -> None:
    """Limits set before any candidate code exists in this process. The file-size limit is final only at
    load (`Runner.load`, from `LoadRequest.max_file_bytes`, before the candidate is imported): a CPU
    worker's outputs are shared-memory files, which the limit caps too, so the judge fits it to the
    task's outputs; until then it is MAX_FILE_BYTES."""
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # A write past the limit fails with EFBIG (an exception the judge reports) instead of a silent SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def main() -> None:
    if sys.argv[1] == "--connect":
        run_connected(sys.argv[2])
        return
    die_with_parent()  # a judge that dies (or is killed for a timeout) takes its workers with it
    limit_resources()
    warm_up()
    serve(int(sys.argv[1]), int(sys.argv[2]))


def run_connected(socket_path: str) -> None:
    """Entry of a worker in a container (judge/container_worker.py). It connects once it is warm
    (torch imported, no CUDA context, no candidate), so the judge's accept means "ready"; the connection
    carries both directions of the protocol. The container is its confinement: own PID namespace, no
    network, read-only root, the judge's paths bound only where it needs them."""
    limit_resources()
    warm_up()
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(socket_path)
    fd = connection.detach()
    log = os.open("worker.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    for target in (1, 2):
        os.dup2(log, target)
    os.close(log)
    threading.Thread(target=_exit_when_judge_leaves, args=(fd,), daemon=True).start()
    serve(fd, fd)


def _exit_when_judge_leaves(fd: int) -> None:
    """A container is not the judge's child, so no parent-death signal reaches it: end the worker when
    the judge's end of the connection closes, even while the candidate is busy. (The judge's own
    clean-up removes its containers too; this covers a judge killed outright.)"""
    watcher = select.poll()
    watcher.register(fd, select.POLLRDHUP)
    while True:
        for _, events in watcher.poll():
            if events & (select.POLLRDHUP | select.POLLHUP | select.POLLERR | select.POLLNVAL):
                os._exit(1)


def run_forked(request_fd: int, reply_fd: int, setup: ForkSetup) -> None:
    """Entry of a worker forked from the judge's fork server, which imported torch (and this module)
    but never touched CUDA or saw a candidate. Confines the process, then serves as `main` does."""
    os.setsid()  # its own process group: the judge kills the whole group
    die_with_parent()  # the fork server, which dies with the judge
    if setup.no_network:
        enter_new_network_namespace()
    os.chdir(setup.directory)
    log = os.open(setup.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    for target in (1, 2):
        os.dup2(log, target)
    os.close(log)
    _close_fds_except({0, 1, 2, request_fd, reply_fd})  # nothing of the fork server's stays reachable
    os.environ.clear()
    os.environ.update(setup.env)
    # The import path is the judge's choice: nothing relative to a working directory.
    sys.path[:] = [entry for entry in sys.path if entry not in ("", ".")]
    sys.argv = ["cuda_agent_mcp.worker", str(request_fd), str(reply_fd)]  # as `main` is started
    limit_resources()
    serve(request_fd, reply_fd)


def _close_fds_except(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


_CLONE_NEWNET = 0x40000000


def enter_new_network_namespace() -> None:
    """unshare(CLONE_NEWNET): no network for candidate code (what `unshare --net` does for spawned ones)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.unshare(_CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")


if __name__ == "__main__":
    main()
