"""Worker process entry: `python -m cuda_agent_mcp.worker REQUEST_FD REPLY_FD`.

Serves one evaluation, then exits. Exits at once after a CUDA error: the context cannot be trusted.
"""

from __future__ import annotations

import os
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
from cuda_agent_mcp.worker.runner import Runner, is_cuda_error

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


def main() -> None:
    die_with_parent()  # a judge that dies (or is killed for a timeout) takes its workers with it
    serve(int(sys.argv[1]), int(sys.argv[2]))


if __name__ == "__main__":
    main()
