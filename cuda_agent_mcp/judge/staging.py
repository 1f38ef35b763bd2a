"""Where the judge puts what it shares with a worker: memory of its own, at a new address every call.

Runs in the judge process. CUDA IPC exports a whole allocator segment, so a worker that maps one tensor
can read and write everything else in that segment: the judge's other tensors, reference outputs, its
model's weights. So nothing the judge shares comes from its ordinary allocator:

- each input position of a call has a pool of its own (`torch.cuda.MemPool`: segments no other tensor
  uses), holding one region per input set of a batch plus a shift range; every call writes its inputs
  at a new 256-byte-aligned offset (SOL-ExecBench's shifting pool), so a cache keyed on data pointers
  sees a new pointer every call, and vectorised or TMA kernels still get aligned addresses;
- the model's weights are copies in a pool of their own, never the judge's parameters;
- a pool's storage is shared once (one IPC handle the worker maps once); each call's tensors, and each
  weight, are views into it described by offset, shape and stride. Sharing once also means one torch
  reference counter per pool, which the judge sets to 0 itself before it drops a pool no worker maps
  any more (`ipc_memory.CounterSlot`): torch would otherwise keep the pool allocated for good.

On the CPU every tensor goes into a new shared-memory file of its own, which gives the same guarantees.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass, field
from typing import Any

import torch

from cuda_agent_mcp.wire.ipc_memory import CounterSlot
from cuda_agent_mcp.wire.refs import (
    CudaIpcPayload,
    ShmPayload,
    TensorRef,
    note_judge_files,
    release_shm,
    shm_snapshot,
)
from cuda_agent_mcp.wire.transport import dtype_name, receive, share

ALIGNMENT = 256
# Distinct 256-byte shifts per pool: every call of an evaluation (verify trials, warm-up and timed calls
# together stay well below this) gets an address of its own.
SHIFTS = 256


def _aligned(nbytes: int) -> int:
    return (nbytes + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def _dense_strides(tensor: torch.Tensor) -> tuple[list[int], int]:
    """The strides a clone of `tensor` has (its layout kept where dense) and the elements they span."""
    layout = torch.empty_like(tensor, device="meta")
    stride = list(layout.stride())
    extent = (
        0 if tensor.numel() == 0 else 1 + sum((n - 1) * s for n, s in zip(tensor.shape, stride, strict=True))
    )
    return stride, extent


@dataclass
class _Pool:
    """One input position's memory: `regions` slots of `slot_bytes`, plus the shift range."""

    slot_bytes: int
    regions: int
    buffer: torch.Tensor
    pool: Any
    ref: TensorRef  # the whole buffer, shared once
    counter: CounterSlot | None  # its torch reference counter (None: not found where torch keeps it)
    order: list[int] = field(default_factory=list)

    def view_ref(self, view: torch.Tensor) -> TensorRef:
        """A view into this pool's buffer, described against the buffer's one share."""
        return TensorRef(
            dtype=dtype_name(view.dtype),
            shape=list(view.shape),
            stride=list(view.stride()),
            storage_offset=view.storage_offset(),
            payload=self.ref.payload,
        )


@dataclass(frozen=True)
class Staged:
    """One input set as the worker will see it: the refs to send, and the judge's own views of the same
    memory (to check afterwards that the candidate did not write its inputs). A CPU input's view is the
    judge's tensor itself: its file is read again afterwards (`as_left`), never mapped."""

    refs: list[TensorRef | None]
    views: list[Any]

    def as_left(self) -> list[Any]:
        """The inputs as the worker left them. A CPU input's file is read into the judge's own memory: the
        worker can write it, and a mapped file it shortens is a SIGBUS in the judge; TransportError if
        it is no longer the file the judge wrote (the candidate's doing)."""
        return [
            receive(ref, max_bytes=1 << 40)
            if ref is not None and isinstance(ref.payload, ShmPayload)
            else view
            for ref, view in zip(self.refs, self.views, strict=True)
        ]


class InputStage:
    """Writes input sets into memory private to them, at new addresses every call."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._pools: dict[int, _Pool] = {}
        self._calls = 0
        self._cpu_refs: list[TensorRef] = []

    def stage(self, sets: list[list[Any]]) -> list[Staged]:
        """Copy each set's tensors into shared memory of its own; scalars pass through."""
        self._release_cpu()
        call = self._calls
        self._calls += 1
        staged = []
        for region, inputs in enumerate(sets):
            refs: list[TensorRef | None] = []
            views: list[Any] = []
            for position, value in enumerate(inputs):
                if not isinstance(value, torch.Tensor):
                    refs.append(None)
                    views.append(value)
                elif value.is_cuda:
                    ref, view = self._stage_cuda(position, region, len(sets), call, value)
                    refs.append(ref)
                    views.append(view)
                else:
                    ref = share(value)
                    self._cpu_refs.append(ref)
                    refs.append(ref)
                    views.append(value)
            staged.append(Staged(refs=refs, views=views))
        return staged

    def _stage_cuda(
        self, position: int, region: int, regions: int, call: int, value: torch.Tensor
    ) -> tuple[TensorRef, torch.Tensor]:
        stride, extent = _dense_strides(value)
        nbytes = extent * value.element_size()
        pool = self._pools.get(position)
        if pool is None or pool.slot_bytes < _aligned(nbytes) or pool.regions < regions:
            if pool is not None:
                _IDLE.append(pool)
            pool = _take_pool(
                self.device, _aligned(max(nbytes, 1)), max(regions, pool.regions if pool else 1)
            )
            self._pools[position] = pool
        shift = ALIGNMENT * pool.order[call % SHIFTS]
        offset = region * pool.slot_bytes + shift
        typed = pool.buffer[offset : offset + max(nbytes, value.element_size())].view(value.dtype)
        view = typed.as_strided(value.shape, stride)
        view.copy_(value)
        ref = TensorRef(
            dtype=dtype_name(value.dtype),
            shape=list(value.shape),
            stride=stride,
            storage_offset=offset // value.element_size(),
            payload=pool.ref.payload,
        )
        return ref, view

    def _release_cpu(self) -> None:
        for ref in self._cpu_refs:
            release_shm(ref)
        self._cpu_refs = []

    def close(self) -> None:
        """Give every pool back for the next evaluation (the worker must have unmapped them first: see
        ReleaseRequest.inputs)."""
        self._release_cpu()
        _IDLE.extend(self._pools.values())
        self._pools.clear()
        _trim_idle()


# Pools outlive the evaluation that made them and serve the next ones, up to MAX_IDLE_POOL_BYTES: beyond
# that the largest are dropped, and their memory goes back to the device when the judge empties its cache
# after the job. A pool is dropped only once no worker maps it (workers are killed and reaped before the
# judge gives its pools back), and only after its torch reference counter was set to 0: a pool shared
# once and mapped by N workers holds 1 - N there, and torch frees a dropped shared block only at exactly
# 0, so every dropped pool stayed allocated until the judge was retired (measured on the H200: 1 GiB
# pools mapped by 0, 2 or 3 workers stayed allocated, by 1 or with the counter set to 0 were freed, and
# later workers mapped new pools as before). A pool whose counter cannot be found is kept instead.
_IDLE: list[_Pool] = []
MAX_IDLE_POOL_BYTES = 1 << 30


def _take_pool(device: torch.device, slot_bytes: int, regions: int) -> _Pool:
    fitting = [
        p for p in _IDLE if p.buffer.device == device and p.slot_bytes >= slot_bytes and p.regions >= regions
    ]
    if fitting:
        pool = min(fitting, key=lambda p: p.buffer.numel())
        _IDLE.remove(pool)
        secrets.SystemRandom().shuffle(pool.order)
        return pool
    mem_pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(mem_pool):
        buffer = torch.empty(regions * slot_bytes + ALIGNMENT * SHIFTS, dtype=torch.uint8, device=device)
    order = list(range(SHIFTS))
    secrets.SystemRandom().shuffle(order)
    ref = judge_share(buffer)
    return _Pool(
        slot_bytes=slot_bytes,
        regions=regions,
        buffer=buffer,
        pool=mem_pool,
        ref=ref,
        counter=_counter_of(ref),
        order=order,
    )


def _counter_of(ref: TensorRef) -> CounterSlot | None:
    payload = ref.payload
    if not isinstance(payload, CudaIpcPayload):
        return None
    return CounterSlot.of_new_share(base64.b64decode(payload.ref_counter_handle), payload.ref_counter_offset)


def idle_pool_bytes() -> int:
    """Device memory the kept pools hold (the judge server's retirement rule leaves it out)."""
    return sum(p.buffer.numel() for p in _IDLE)


def _trim_idle() -> None:
    held = sum(p.buffer.numel() for p in _IDLE)
    if held <= MAX_IDLE_POOL_BYTES:
        return
    dropped = False
    for pool in sorted(_IDLE, key=lambda p: p.buffer.numel(), reverse=True):
        if held <= MAX_IDLE_POOL_BYTES:
            break
        if pool.counter is None or not pool.counter.release():
            continue
        _IDLE.remove(pool)
        held -= pool.buffer.numel()
        dropped = True
    if dropped and torch.cuda.is_initialized():
        torch.cuda.ipc_collect()  # frees the dropped pools' blocks now that their counters read 0


def judge_share(tensor: torch.Tensor) -> TensorRef:
    """`share` for the judge's own CUDA memory, noting the files the driver made for it in /dev/shm (a
    finished worker's clean-up must leave those alone)."""
    before = shm_snapshot() if tensor.is_cuda else set()
    ref = share(tensor)
    if tensor.is_cuda:
        note_judge_files(before)
    return ref


def weight_refs(copies: dict[str, torch.Tensor], pool: _Pool | None) -> dict[str, TensorRef]:
    """What a worker is sent for `private_copies`' weights: views into their pool's one share (CUDA), or
    shared-memory files of them (CPU, released by the caller once the worker loaded them)."""
    if pool is None:
        return {k: judge_share(v) for k, v in copies.items()}
    return {k: pool.view_ref(v) for k, v in copies.items()}


def private_copies(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], _Pool | None]:
    """Copies of the reference's weights in a pool of their own (one buffer, each weight at an aligned
    offset): the worker gets these, never the judge's own parameters (it could write them through the
    shared mapping, and with them the reference outputs the judge compares against). The pool comes from
    and goes back to the kept pools (`give_back`), like the inputs' (see `_IDLE`)."""
    tensors = list(state.values())
    if not tensors or not tensors[0].is_cuda:
        return {k: v.detach().clone() for k, v in state.items()}, None
    layout = {k: _dense_strides(v) for k, v in state.items()}
    sizes = {
        k: _aligned(max(extent * v.element_size(), 1))
        for (k, v), (_, extent) in zip(state.items(), layout.values(), strict=True)
    }
    pool = _take_pool(tensors[0].device, sum(sizes.values()), 1)
    copies = {}
    offset = ALIGNMENT * pool.order[0]
    for name, value in state.items():
        stride, extent = layout[name]
        typed = pool.buffer[offset : offset + max(extent * value.element_size(), value.element_size())].view(
            value.dtype
        )
        view = typed.as_strided(value.shape, stride)
        view.copy_(value.detach())
        copies[name] = view
        offset += sizes[name]
    return copies, pool


def give_back(pool: _Pool | None) -> None:
    """Return a pool for later evaluations (once no worker maps it any more)."""
    if pool is not None:
        _IDLE.append(pool)
        _trim_idle()
