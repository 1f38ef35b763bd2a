"""Tensors crossing between the judge and a worker without either trusting the other's objects.

A tensor travels as a `TensorRef`: plain fields (dtype, shape, stride, offset) plus either a CUDA IPC
handle (GPU) or the path of a shared-memory file (CPU, used by tests and CPU-only runs). The receiver
rebuilds an exact `torch.Tensor` from validated fields: no pickle, no classes chosen by the sender.
"""

from __future__ import annotations

import base64
import math
import os
import stat
import uuid
from typing import Any

import torch

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


class TransportError(ValueError):
    """A TensorRef that cannot be opened or is inconsistent: a protocol violation by the sender."""


class MappingFailed(TransportError):
    """A well-formed CUDA IPC handle the driver would not map here: the machine's failure as far as the
    receiver can tell (an honest sender's handles always map), so never charged to the sender alone."""


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text.encode(), validate=True)


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


def open_ref(ref: TensorRef, *, max_bytes: int, expected_device: int | None = None) -> torch.Tensor:
    """Map the memory `ref` describes as an exact torch.Tensor; TransportError if anything is off.

    `max_bytes` bounds the bytes the view covers (what a copy of it takes), not its storage: on CUDA a
    view's storage is its whole allocation (a 0-dim loss keeps its elementwise buffer, a slice keeps
    its workspace), and mapping it costs nothing more than the view's own pages."""
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
        storage = _open_cuda(payload)
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


def _open_cuda(payload: CudaIpcPayload) -> Any:
    try:
        return torch.UntypedStorage._new_shared_cuda(
            payload.device,
            _unb64(payload.handle),
            payload.storage_size_bytes,
            payload.storage_offset_bytes,
            _unb64(payload.ref_counter_handle),
            payload.ref_counter_offset,
            _unb64(payload.event_handle),
            payload.event_sync_required,
        )
    except (RuntimeError, ValueError, TypeError) as exc:
        raise MappingFailed(f"cannot open CUDA IPC handle: {exc}") from None
