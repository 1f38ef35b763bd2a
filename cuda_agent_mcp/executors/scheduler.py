"""GPU leases: exclusive for anything timed, shared (up to a limit) for correctness-only work.

Two sessions never time on the same GPU at once. Waiting requests are served fairly between owners
(sessions): the owner served least recently goes first, and within an owner, first come first served.
The head of that order is never overtaken, so an exclusive request cannot be starved by a stream of
shared ones. Callers see their place in the queue through `on_wait`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
from pydantic import BaseModel, ConfigDict

from cuda_agent_mcp.errors import GpusDrained


class QueueStatus(BaseModel):
    """Where a waiting request stands: 1 is next."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    position: int
    waiting: int


class GpuLease(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: int
    exclusive: bool
    waited_s: float


@dataclass
class _Request:
    owner: str
    exclusive: bool
    order: int
    enqueued: float
    granted: anyio.Event = field(default_factory=anyio.Event)
    gpu: int | None = None
    on_wait: Callable[[QueueStatus], None] | None = None
    last_position: int | None = None


@dataclass
class _Gpu:
    exclusive: bool = False
    shared: int = 0
    drained: str | None = None  # why it takes no more work


class GpuScheduler:
    """Leases on a fixed set of GPUs for one event loop (one server or one trainer process)."""

    def __init__(self, gpus: Sequence[int] = (0,), *, shared_slots: int = 2) -> None:
        if not gpus:
            raise ValueError("a scheduler needs at least one GPU")
        self._gpus = {index: _Gpu() for index in gpus}
        self._shared_slots = shared_slots
        self._waiting: list[_Request] = []
        self._last_served: dict[str, float] = {}
        self._counter = itertools.count()
        self.last_probe: dict[int, str] = {}  # GPU -> "healthy" or what its last health probe found

    @asynccontextmanager
    async def lease(
        self, owner: str, *, exclusive: bool, on_wait: Callable[[QueueStatus], None] | None = None
    ) -> AsyncIterator[GpuLease]:
        """Hold a GPU for the body of the `async with`. Cancelling while waiting leaves the queue."""
        request = _Request(owner, exclusive, next(self._counter), time.monotonic(), on_wait=on_wait)
        self._refuse_if_all_drained()
        self._waiting.append(request)
        self._dispatch()
        try:
            await request.granted.wait()
            if request.gpu is None:  # woken by drain(): no GPU is left
                self._refuse_if_all_drained()
        except BaseException:
            if request.gpu is None:
                if request in self._waiting:  # drain() may have emptied the queue already
                    self._waiting.remove(request)
                self._dispatch()
            else:
                self._release(request)
            raise
        assert request.gpu is not None
        try:
            yield GpuLease(
                gpu=request.gpu, exclusive=exclusive, waited_s=round(time.monotonic() - request.enqueued, 6)
            )
        finally:
            self._release(request)

    def status(self) -> dict[int, str]:
        """Per GPU: `exclusive`, `shared:N`, `idle`, or `drained: why`."""
        return {index: _describe(gpu) for index, gpu in self._gpus.items()}

    def holders(self, gpu: int) -> int:
        """How many leases on `gpu` are held now (an exclusive one counts once)."""
        state = self._gpus[gpu]
        return 1 if state.exclusive else state.shared

    def record_probe(self, gpu: int, problem: str | None) -> None:
        """The result of a health probe: a GPU with a problem is drained."""
        self.last_probe[gpu] = problem or "healthy"
        if problem is not None:
            self.drain(gpu, problem)

    def drain(self, gpu: int, reason: str) -> None:
        """Take `gpu` out of service (work already on it finishes); requests wait for the others, and
        fail with GpusDrained once every GPU is drained."""
        self._gpus[gpu].drained = reason
        if self._all_drained():
            for request in self._waiting:
                request.granted.set()  # wakes them to fail
            self._waiting.clear()

    def _all_drained(self) -> bool:
        return all(g.drained is not None for g in self._gpus.values())

    def _refuse_if_all_drained(self) -> None:
        if self._all_drained():
            reasons = "; ".join(f"GPU {i}: {g.drained}" for i, g in self._gpus.items())
            raise GpusDrained(f"every GPU is drained ({reasons})")

    def describe(self) -> str:
        """One line for a live view: each GPU's state and how many requests wait."""
        gpus = ", ".join(f"gpu {index} {state}" for index, state in self.status().items())
        return f"{gpus}; {len(self._waiting)} waiting"

    # -- internals ---------------------------------------------------------------------------------

    def _ordered(self) -> list[_Request]:
        return sorted(self._waiting, key=lambda r: (self._last_served.get(r.owner, -1.0), r.order))

    def _fits(self, request: _Request) -> int | None:
        for index, gpu in self._gpus.items():
            if gpu.drained is not None:
                continue
            if request.exclusive and not gpu.exclusive and gpu.shared == 0:
                return index
            if not request.exclusive and not gpu.exclusive and gpu.shared < self._shared_slots:
                return index
        return None

    def _dispatch(self) -> None:
        while self._waiting:
            head = self._ordered()[0]
            gpu = self._fits(head)
            if gpu is None:
                break  # the head waits; nothing overtakes it
            self._waiting.remove(head)
            if head.exclusive:
                self._gpus[gpu].exclusive = True
            else:
                self._gpus[gpu].shared += 1
            head.gpu = gpu
            self._last_served[head.owner] = time.monotonic()
            head.granted.set()
        for position, request in enumerate(self._ordered(), start=1):
            if request.on_wait is not None and request.last_position != position:
                request.last_position = position
                request.on_wait(QueueStatus(position=position, waiting=len(self._waiting)))

    def _release(self, request: _Request) -> None:
        assert request.gpu is not None
        gpu = self._gpus[request.gpu]
        if request.exclusive:
            gpu.exclusive = False
        else:
            gpu.shared -= 1
        self._dispatch()


def _describe(gpu: _Gpu) -> str:
    if gpu.drained is not None:
        return f"drained: {gpu.drained}"
    if gpu.exclusive:
        return "exclusive"
    return f"shared:{gpu.shared}" if gpu.shared else "idle"
