"""Tensors crossing between the judge and a worker without either trusting the other's objects.

A tensor travels as a `TensorRef`: plain fields (dtype, shape, stride, offset) plus either a CUDA IPC
handle (GPU) or the path of a shared-memory file (CPU, used by tests and CPU-only runs). The receiver
rebuilds an exact `torch.Tensor` from validated fields: no pickle, no classes chosen by the sender.
"""

from __future__ import annotations

import base64
import binascii
import math
import os
import re
import stat
import uuid
from typing import Any

import torch

from cuda_agent_mcp.wire.ipc_memory import allocation_range
from cuda_agent_mcp.wire.refs import (
    CudaIpcPayload,
    ShmPayload,
    TensorRef,
    shm_dir,
    shm_file_mode,
    shm_tag,
)

ALLOWED_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}


# torch names a CUDA IPC reference-counter file "/torch_<pid>_<random>_<n>" (NewProcessWideShmHandle) and
# gives each shared block one of its CUDA_IPC_REF_COUNTER_FILE_SIZE int64 slots. The receiver's torch
# opens that file by name when it lets go of the storage and decrements the slot at that offset: both
# fields come from the sender, so both are checked before torch sees them.
TORCH_REF_COUNTER = re.compile(r"/?torch_([0-9]+)_[0-9]+_[0-9]+")
REF_COUNTER_SLOTS = 10000
CUDA_IPC_HANDLE_BYTES = 64  # an event handle torch's rebuild parses but, told no sync is needed, never opens


class TransportError(ValueError):
    """A TensorRef that cannot be opened or is inconsistent: a protocol violation by the sender."""


class MappingFailed(TransportError):
    """A well-formed CUDA IPC handle the driver would not map here: the machine's failure as far as the
    receiver can tell (an honest sender's handles always map), so never charged to the sender alone."""


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text.encode(), validate=True)


def _decoded(text: str | None, field: str) -> bytes | None:
    try:
        return _unb64(text)
    except (binascii.Error, ValueError):
        raise TransportError(f"the {field} is not base64") from None


def dtype_name(dtype: torch.dtype) -> str:
    for name, value in ALLOWED_DTYPES.items():
        if value == dtype:
            return name
    raise TransportError(f"dtype {dtype} cannot cross processes")


def share(tensor: torch.Tensor) -> TensorRef:
    """Describe `tensor` so another process can map the same memory. CPU tensors are copied into a
    new shared-memory file first (the caller keeps nothing alive for them)."""
    dtype = dtype_name(tensor.dtype)
    if tensor.is_cuda:
        storage = tensor.untyped_storage()
        (device, handle, size, offset, rc_handle, rc_offset, event, sync) = storage._share_cuda_()
        payload: CudaIpcPayload | ShmPayload = CudaIpcPayload(
            device=int(device),
            handle=_b64(handle) or "",
            storage_size_bytes=int(size),
            storage_offset_bytes=int(offset),
            ref_counter_handle=_b64(rc_handle) or "",
            ref_counter_offset=int(rc_offset),
            event_handle=_b64(event),
            event_sync_required=bool(sync),
        )
        return TensorRef(
            dtype=dtype,
            shape=list(tensor.shape),
            stride=list(tensor.stride()),
            storage_offset=tensor.storage_offset(),
            payload=payload,
        )
    contiguous = tensor.detach().contiguous()
    name = f"cuda-agent-{shm_tag()}-{uuid.uuid4().hex}"
    nbytes = contiguous.numel() * contiguous.element_size()
    path = shm_dir() / name
    mapped = torch.from_file(str(path), shared=True, size=contiguous.numel(), dtype=contiguous.dtype)
    if (mode := shm_file_mode()) is not None:
        os.chmod(path, mode)
    mapped.copy_(contiguous.reshape(-1))
    return TensorRef(
        dtype=dtype,
        shape=list(contiguous.shape),
        stride=list(contiguous.stride()),
        storage_offset=0,
        payload=ShmPayload(name=name, storage_size_bytes=nbytes),
    )


def open_ref(
    ref: TensorRef,
    *,
    max_bytes: int,
    expected_device: int | None = None,
    untrusted: bool = False,
    sender_pid: int | None = None,
) -> torch.Tensor:
    """Map the memory `ref` describes as an exact torch.Tensor; TransportError if anything is off.

    `max_bytes` bounds the bytes the view covers (what a copy of it takes), not its storage: on CUDA a
    view's storage is its whole allocation (a 0-dim loss keeps its elementwise buffer, a slice keeps
    its workspace), and mapping it costs nothing more than the view's own pages.

    From an `untrusted` sender (a worker, seen from the judge) a CUDA mapping is also checked against
    the driver's own extent of what was mapped before anything reads it, the sender's event is never
    opened (a worker synchronises before it replies), and its reference counter must be one of
    `sender_pid`'s files where that pid is known."""
    dtype = ALLOWED_DTYPES.get(ref.dtype)
    if dtype is None:
        raise TransportError(f"dtype {ref.dtype!r} is not allowed")
    if len(ref.shape) != len(ref.stride) or any(s < 0 for s in ref.shape) or any(s < 0 for s in ref.stride):
        raise TransportError("shape and stride must be non-negative and of equal length")
    itemsize = torch.empty(0, dtype=dtype).element_size()
    numel = math.prod(ref.shape)
    extent = (
        0
        if numel == 0
        else ref.storage_offset + 1 + sum((n - 1) * s for n, s in zip(ref.shape, ref.stride, strict=True))
    )
    payload = ref.payload
    if extent * itemsize > payload.storage_size_bytes:
        raise TransportError("the tensor reaches past the end of its storage")
    if (view_bytes := numel * itemsize) > max_bytes:
        raise TransportError(
            f"a tensor of {view_bytes} bytes ({ref.dtype}, shape {ref.shape}) exceeds the limit "
            f"of {max_bytes} bytes"
        )
    if isinstance(payload, CudaIpcPayload):
        if expected_device is not None and payload.device != expected_device:
            raise TransportError("tensor is on another device")
        _check_cuda_fields(payload, sender_pid)
        storage = _open_cuda(payload, trust_event=not untrusted)
        if untrusted:
            _check_mapping(storage, payload)
    else:
        path = shm_dir() / payload.name
        # The mapping is lazy (only the view's pages are read), so the file's real size is the bound on
        # what is mapped: from_file would grow a shorter file to the size the sender claims.
        try:
            info = os.stat(path, follow_symlinks=False)
        except OSError as exc:
            raise TransportError(f"cannot map {payload.name}: {exc.strerror}") from None
        if not stat.S_ISREG(info.st_mode) or info.st_size < payload.storage_size_bytes:
            raise TransportError(
                f"{payload.name} is not a file of at least {payload.storage_size_bytes} bytes"
            )
        try:
            flat = torch.from_file(str(path), shared=True, size=payload.storage_size_bytes, dtype=torch.uint8)
        except (RuntimeError, OSError) as exc:
            raise TransportError(f"cannot map {payload.name}: {exc}") from None
        storage = flat.untyped_storage()
    empty = torch.empty(0, dtype=dtype, device=storage.device)
    return empty.set_(storage, ref.storage_offset, ref.shape, ref.stride)


def receive(
    ref: TensorRef, *, max_bytes: int, expected_device: int | None = None, sender_pid: int | None = None
) -> torch.Tensor:
    """A private copy of a tensor an untrusted process sent, in memory only the receiver owns.

    A CUDA output is mapped (its fields checked first, the mapping checked against the driver's extent)
    and cloned. A CPU output is read, never mapped: the sender can write its file, and a mapped file it
    truncates is a SIGBUS in the reader. `share()` sends CPU tensors as a dense copy, so any other
    layout is refused."""
    if isinstance(ref.payload, CudaIpcPayload):
        mapped = open_ref(
            ref, max_bytes=max_bytes, expected_device=expected_device, untrusted=True, sender_pid=sender_pid
        )
        return mapped.clone()
    return _read_shm(ref, ref.payload, max_bytes)


def _read_shm(ref: TensorRef, payload: ShmPayload, max_bytes: int) -> torch.Tensor:
    dtype = ALLOWED_DTYPES.get(ref.dtype)
    if dtype is None:
        raise TransportError(f"dtype {ref.dtype!r} is not allowed")
    if any(n < 0 for n in ref.shape):
        raise TransportError("shape must be non-negative")
    itemsize = torch.empty(0, dtype=dtype).element_size()
    nbytes = math.prod(ref.shape) * itemsize
    if not _dense(ref.shape, ref.stride) or ref.storage_offset != 0 or payload.storage_size_bytes != nbytes:
        raise TransportError("a CPU tensor must arrive dense, at offset 0, in a file of exactly its bytes")
    if nbytes > max_bytes:
        raise TransportError(
            f"a tensor of {nbytes} bytes ({ref.dtype}, shape {ref.shape}) exceeds the limit of {max_bytes} bytes"
        )
    copy = torch.empty(ref.shape, dtype=dtype)
    if nbytes == 0:
        return copy
    try:
        # O_NONBLOCK: a FIFO put in the file's place must not hang the reader.
        fd = os.open(shm_dir() / payload.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise TransportError(f"cannot open {payload.name}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size < nbytes:
            raise TransportError(f"{payload.name} is not a file of at least {nbytes} bytes")
        target = memoryview(copy.view(-1).view(torch.uint8).numpy())
        done = 0
        while done < nbytes:
            read = os.preadv(fd, [target[done:]], done)
            if read <= 0:  # the sender shortened its file after the check
                raise TransportError(f"{payload.name} ended after {done} of its {nbytes} bytes")
            done += read
    except OSError as exc:
        raise TransportError(f"cannot read {payload.name}: {exc.strerror}") from None
    finally:
        os.close(fd)
    return copy


def _dense(shape: list[int], stride: list[int]) -> bool:
    """torch's is_contiguous: row-major steps, where a dimension of one element may have any stride."""
    if len(shape) != len(stride):
        return False
    if 0 in shape:
        return True
    step = 1
    for size, given in zip(reversed(shape), reversed(stride), strict=True):
        if size != 1 and given != step:
            return False
        step *= size
    return True


def _check_cuda_fields(payload: CudaIpcPayload, sender_pid: int | None = None) -> None:
    """What torch's rebuild would use unchecked: handles that must decode, and the reference counter it
    writes to when the storage is freed, which must be a sender's counter slot (never one of this
    process's own files, only the sender's where its pid is known, never an offset past the file torch
    maps)."""
    if not _decoded(payload.handle, "memory handle"):
        raise TransportError("the memory handle is empty")
    _decoded(payload.event_handle, "event handle")
    counter = _decoded(payload.ref_counter_handle, "reference-counter name") or b""
    match = TORCH_REF_COUNTER.fullmatch(counter.decode("ascii", errors="replace"))
    if match is None:
        raise TransportError("the reference-counter name is not one torch makes")
    if int(match.group(1)) == os.getpid():
        raise TransportError("the reference counter named is the receiver's own")
    if sender_pid is not None and int(match.group(1)) != sender_pid:
        raise TransportError("the reference counter named is not the sender's own")
    if payload.ref_counter_offset >= REF_COUNTER_SLOTS:
        raise TransportError(
            f"reference-counter offset {payload.ref_counter_offset} is past the counter file's "
            f"{REF_COUNTER_SLOTS} slots"
        )


def _open_cuda(payload: CudaIpcPayload, *, trust_event: bool) -> Any:
    event, sync = (
        (_unb64(payload.event_handle), payload.event_sync_required)
        if trust_event
        else (bytes(CUDA_IPC_HANDLE_BYTES), False)
    )
    try:
        return torch.UntypedStorage._new_shared_cuda(
            payload.device,
            _unb64(payload.handle),
            payload.storage_size_bytes,
            payload.storage_offset_bytes,
            _unb64(payload.ref_counter_handle),
            payload.ref_counter_offset,
            event,
            sync,
        )
    except (RuntimeError, ValueError, TypeError) as exc:
        raise MappingFailed(f"cannot open CUDA IPC handle: {exc}") from None


def _check_mapping(storage: Any, payload: CudaIpcPayload) -> None:
    """The sender's offset and size against what the driver mapped for its handle (its allocator segment,
    from the mapping's base): a storage reaching outside it would read or write memory of the receiver's
    own, such as the reference outputs it compares against."""
    if payload.storage_size_bytes == 0:
        return
    base = storage.data_ptr() - payload.storage_offset_bytes
    extent = allocation_range(base)
    if extent is None:
        raise MappingFailed("the driver knows no allocation where the worker's handle was mapped")
    if extent[0] != base or payload.storage_offset_bytes + payload.storage_size_bytes > extent[1]:
        raise TransportError(
            f"the storage claimed ({payload.storage_size_bytes} bytes at offset {payload.storage_offset_bytes}) "
            f"reaches outside the {extent[1]} bytes the handle maps"
        )
