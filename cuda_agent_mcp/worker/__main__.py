"""Worker process entry: `python -m cuda_agent_mcp.worker REQUEST_FD REPLY_FD`.

Serves one evaluation, then exits. Exits at once after a CUDA error: the context cannot be trusted.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import traceback

from cuda_agent_mcp.evaluator.lifetime import die_with_parent
from cuda_agent_mcp.evaluator.protocol import (
    CallRequest,
    Failure,
    LoadRequest,
    Released,
    parse_request,
    read_frame_body,
    write_frame,
)
from cuda_agent_mcp.worker.runner import Runner, is_cuda_error, warm_up

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
        phase = "load" if isinstance(request, LoadRequest) else "call"
        try:
            if isinstance(request, LoadRequest):
                write_frame(reply_fd, runner.load(request))
            elif isinstance(request, CallRequest):
                write_frame(reply_fd, runner.call(request))
            else:
                runner.release()
                write_frame(reply_fd, Released())
        except Exception as exc:
            cuda = is_cuda_error(exc)
            kind = "cuda_error" if cuda else "exception"
            write_frame(reply_fd, Failure(phase=phase, kind=kind, message=_describe(exc)))  # type: ignore[arg-type]
            if cuda:
                os._exit(EXIT_CUDA_ERROR)


# Candidates have no reason to write files; this also caps what they can print into the worker's log.
MAX_FILE_BYTES = 64 * 1024 * 1024


def limit_resources() -> None:
    """Hard limits, set before any candidate code exists in this process (it cannot raise them again)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # A write past the limit fails with EFBIG (an exception the judge reports) instead of a silent SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def main() -> None:
    die_with_parent()  # a judge that dies (or is killed for a timeout) takes its workers with it
    limit_resources()
    warm_up()
    serve(int(sys.argv[1]), int(sys.argv[2]))


if __name__ == "__main__":
    main()
