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

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from cuda_agent_mcp.wire.refs import TensorRef

MAX_FRAME_BYTES = 4 * 1024 * 1024
_HEADER = struct.Struct("!I")


class _Message(BaseModel):
    # NaN travels as NaN (the poison value), not as null: JSON's default would turn it into "no poison".
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="constants")


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
    compile_model: bool = Field(
        default=False, description="wrap the model in torch.compile (baseline workers)"
    )
    device: str = "cuda"
    confine_filesystem: bool = Field(
        default=False,
        description="before importing, restrict the worker's files to its view (candidate loads)",
    )
    max_file_bytes: int = Field(
        default=64 << 20,
        ge=1 << 20,
        description="the worker's file-size limit from now on (its log; on the CPU also its output files, "
        "so the judge fits it to the task's outputs)",
    )
    compile_caches: dict[str, str] = Field(
        default={},
        description="TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR to use instead of the worker's own (the "
        "judge's persistent ones, for a trusted torch.compile baseline only: never with confine_filesystem)",
    )

    @model_validator(mode="after")
    def _caches_only_for_trusted_loads(self) -> LoadRequest:
        if set(self.compile_caches) - {"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"}:
            raise ValueError(f"compile_caches names other variables: {sorted(self.compile_caches)}")
        if self.compile_caches and self.confine_filesystem:
            raise ValueError("a confined (candidate) load never gets the judge's compile caches")
        return self


InputSet = list[TensorRef | None]


class EchoOutput(_Message):
    shape: list[int] = Field(max_length=16)
    dtype: str


class PrepareRequest(_Message):
    """Get the next batch ready: map its input sets, free the previous batch's outputs, fill the memory
    the allocator will hand out next with `poison`, flush the L2 cache. Outside the judge's clock.

    Every batch of an evaluation, verified or timed, is prepared and run the same way (principle 1:
    nothing in the worker tells a checked call from a timed one); the judge alone decides what a batch's
    times and outputs are used for. A worker that is never loaded runs its echo model instead: the null
    worker, a clean process whose batches the judge interleaves with the candidate's to measure the
    harness's own cost in the same conditions (judge/timing.py)."""

    op: Literal["prepare"] = "prepare"
    sets: list[InputSet] = Field(
        min_length=1, max_length=256, description="one list of inputs per call; None marks a scalar"
    )
    scalars_pickle: list[str] = Field(
        description="per set, base64 pickle of its non-tensor arguments by position ('' for none)"
    )
    poison: float = Field(description="value written into free allocator memory before the batch")
    poison_bytes: int = Field(ge=0)
    echo_outputs: list[EchoOutput] = Field(
        default_factory=list,
        max_length=64,
        description="null worker only (no model loaded): the echo model returns new tensors of these "
        "shapes and dtypes, so the harness's cost of sharing them back is measured on outputs like the "
        "task's (a large output is a new allocation to export, a small one is not)",
    )
    echo_spin_ms: float = Field(
        default=0.0,
        ge=0,
        le=10_000,
        description="null worker only: device time each echo call spends on the GPU, so the null's windows "
        "are as long as the candidate's",
    )


class RunRequest(_Message):
    """Call the model once per prepared input set, back to back inside the clocks (CUDA events on the
    launch stream, a wall clock closed by a device-wide synchronize), then share every output."""

    op: Literal["run"] = "run"


class ObserveRequest(_Message):
    """Run the prepared batch like RunRequest, but observed: under the op recorder ("ops": the aten ops
    forward() dispatches) or the profiler ("kernels": device activity on every stream). A candidate can
    tell these from a RunRequest, so what they show can only reject, never vouch."""

    op: Literal["observe"] = "observe"
    kind: Literal["ops", "kernels"]


class PingRequest(_Message):
    """Do nothing: the judge times the protocol's own round trip with it."""

    op: Literal["ping"] = "ping"


class ReleaseRequest(_Message):
    """The judge has copied the previous outputs: the worker may free them."""

    op: Literal["release"] = "release"
    inputs: bool = Field(
        default=False,
        description="also unmap the judge's input buffers: the evaluation is over. Memory the judge shared "
        "stays allocated in the judge until every process that mapped it has unmapped it, and a killed "
        "worker never does",
    )


Request = Annotated[
    LoadRequest | PrepareRequest | RunRequest | ObserveRequest | PingRequest | ReleaseRequest,
    Field(discriminator="op"),
]


# -- worker -> judge ---------------------------------------------------------------------------


class TracedKernel(_Message):
    """One device activity the profiler saw during an observed batch, summed over its launches."""

    name: str = Field(max_length=4000)
    calls: int = Field(ge=1)
    device_ns: int = Field(ge=0)


class KernelTrace(_Message):
    """What the profiler saw of an observed batch, on every stream of the process."""

    kernels: list[TracedKernel] = Field(default_factory=list, max_length=10000)
    busy_ns: int = Field(default=0, ge=0, description="union of all device activity intervals, all streams")
    streams: int = Field(default=0, ge=0, description="streams that ran device activity")


class Loaded(_Message):
    op: Literal["loaded"] = "loaded"
    parameter_count: int = Field(ge=0)


class Prepared(_Message):
    op: Literal["prepared"] = "prepared"


class SetOutputs(_Message):
    """The outputs of one call of a batch."""

    structure: Literal["tensor", "tuple", "list"]
    outputs: list[TensorRef] = Field(max_length=1024)


class BatchResult(_Message):
    """A batch's outputs, per input set, and the worker's own clocks around the whole batch (the
    candidate's word: the judge checks them against its own clock)."""

    op: Literal["result"] = "result"
    sets: list[SetOutputs] = Field(max_length=256)
    event_ms: float | None = Field(default=None, ge=0)
    wall_ms: float | None = Field(default=None, ge=0)
    aliased: str = Field(
        default="", max_length=2000, description="an output sharing memory with an input or another output"
    )
    ops: list[str] = Field(default_factory=list, max_length=10000)
    trace: KernelTrace | None = None


class Pong(_Message):
    op: Literal["pong"] = "pong"


class Failure(_Message):
    """A request raised in the worker. `cuda_error` means the context is gone and the worker will exit;
    `out_of_memory` is the worker's word, which the judge checks against the memory it measures itself."""

    op: Literal["failure"] = "failure"
    phase: Literal["load", "call"]
    kind: Literal["exception", "cuda_error", "bad_output", "protocol", "out_of_memory"]
    message: str = Field(max_length=8000)


class Released(_Message):
    op: Literal["released"] = "released"


Reply = Annotated[Loaded | Prepared | BatchResult | Pong | Failure | Released, Field(discriminator="op")]
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


def parse_request(
    body: bytes,
) -> LoadRequest | PrepareRequest | RunRequest | ObserveRequest | PingRequest | ReleaseRequest:
    return _REQUEST.validate_json(body)


def parse_reply(body: bytes) -> Loaded | Prepared | BatchResult | Pong | Failure | Released:
    try:
        return _REPLY.validate_json(body)
    except ValueError as exc:
        raise FrameError(f"invalid reply: {str(exc)[:500]}") from None
