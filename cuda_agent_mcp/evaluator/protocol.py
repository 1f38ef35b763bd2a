"""Messages between the judge and a worker, framed as length-prefixed JSON on two private pipes.

The worker's stdout and stderr are not the channel (candidate code can print anything); only frames
on the protocol pipe count, and the judge validates each one against these models.
"""

from __future__ import annotations

import os
import select
import struct
import time
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from cuda_agent_mcp.evaluator.refs import TensorRef

MAX_FRAME_BYTES = 4 * 1024 * 1024
_HEADER = struct.Struct("!I")


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- judge -> worker ---------------------------------------------------------------------------


class ForkSetup(_Message):
    """How a worker forked from the judge's fork server confines itself before serving."""

    directory: str = Field(description="its working directory, the only place meant for its files")
    log_path: str = Field(description="where its stdout and stderr go")
    env: dict[str, str] = Field(description="its whole environment")
    no_network: bool = Field(description="enter a fresh network namespace")


class LoadRequest(_Message):
    """Import a module from `directory` and build `class_name(*init_args)` on the device."""

    op: Literal["load"] = "load"
    directory: str
    module: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    class_name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    init_args_pickle: str = Field(description="base64 pickle of get_init_inputs() (judge to worker only)")
    state_dict: dict[str, TensorRef] = {}
    compile_model: bool = Field(False, description="wrap the model in torch.compile (baseline workers)")
    device: str = "cuda"
    confine_filesystem: bool = Field(
        False, description="before importing, restrict the worker's files to its view (candidate loads)"
    )


class CallRequest(_Message):
    """Call the loaded model once on shared inputs. `timed` adds L2 flush, events and wall clock.
    A timed call before any LoadRequest runs the worker's own echo model (a copy of the first tensor):
    the judge's calibration of the harness's cost while no candidate code is in the process."""

    op: Literal["call"] = "call"
    inputs: list[TensorRef | None] = Field(description="None marks a non-tensor argument (see scalars)")
    scalars_pickle: str = Field("", description="base64 pickle of the non-tensor arguments, by position")
    timed: bool = False
    poison: float | None = Field(
        None, description="fill this much freed allocator memory with this value first"
    )
    poison_bytes: int = Field(0, ge=0)
    record_ops: bool = Field(False, description="report the aten ops forward() dispatched (op audit)")
    trace_kernels: bool = Field(False, description="report the device kernels the call ran (profiler)")


class ReleaseRequest(_Message):
    """The judge has copied the previous outputs: the worker may free them."""

    op: Literal["release"] = "release"
    inputs: bool = Field(
        False,
        description="also unmap the judge's input buffers: the evaluation is over. Memory the judge shared "
        "stays allocated in the judge until every process that mapped it has unmapped it, and a killed "
        "worker never does",
    )


Request = Annotated[LoadRequest | CallRequest | ReleaseRequest, Field(discriminator="op")]


# -- worker -> judge ---------------------------------------------------------------------------


class TracedKernel(_Message):
    """One device activity the profiler saw during a traced call, summed over its launches."""

    name: str = Field(max_length=4000)
    calls: int = Field(ge=1)
    device_ns: int = Field(ge=0)


class Loaded(_Message):
    op: Literal["loaded"] = "loaded"
    parameter_count: int = Field(ge=0)


class CallResult(_Message):
    op: Literal["result"] = "result"
    structure: Literal["tensor", "tuple", "list"]
    outputs: list[TensorRef]
    event_ms: float | None = Field(None, ge=0)
    wall_ms: float | None = Field(None, ge=0)
    ops: list[str] = Field(default_factory=list, max_length=10000)
    kernels: list[TracedKernel] = Field(default_factory=list, max_length=10000)


class Failure(_Message):
    """Candidate code raised. `cuda_error` means the context is gone and the worker will exit."""

    op: Literal["failure"] = "failure"
    phase: Literal["load", "call"]
    kind: Literal["exception", "cuda_error", "bad_output"]
    message: str = Field(max_length=8000)


class Released(_Message):
    op: Literal["released"] = "released"


Reply = Annotated[Loaded | CallResult | Failure | Released, Field(discriminator="op")]
_REQUEST = TypeAdapter(Request)
_REPLY = TypeAdapter(Reply)


class FrameError(ValueError):
    """A frame that is too large, truncated or not JSON."""


def encode(message: BaseModel) -> bytes:
    body = message.model_dump_json().encode()
    if len(body) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(body)} bytes exceeds {MAX_FRAME_BYTES}")
    return _HEADER.pack(len(body)) + body


def write_frame(fd: int, message: BaseModel) -> None:
    data = encode(message)
    while data:
        written = os.write(fd, data)
        data = data[written:]


def read_exact(fd: int, count: int, deadline: float | None = None) -> bytes:
    """`count` bytes; EOFError when the other side closes first, TimeoutError once `deadline` (a
    time.monotonic() value) passes."""
    chunks = bytearray()
    while len(chunks) < count:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError
        chunk = os.read(fd, count - len(chunks))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks += chunk
    return bytes(chunks)


def read_frame_body(fd: int, deadline: float | None = None) -> bytes:
    (length,) = _HEADER.unpack(read_exact(fd, _HEADER.size, deadline))
    if length > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {length} bytes exceeds {MAX_FRAME_BYTES}")
    return read_exact(fd, length, deadline)


def parse_request(body: bytes) -> LoadRequest | CallRequest | ReleaseRequest:
    return _REQUEST.validate_json(body)


def parse_reply(body: bytes) -> Loaded | CallResult | Failure | Released:
    try:
        return _REPLY.validate_json(body)
    except ValueError as exc:
        raise FrameError(f"invalid reply: {str(exc)[:500]}") from None
