"""What a worker does for each request: load the model, prepare a batch, run it, share its outputs.

Every batch is prepared and run the same way, whether the judge will check its outputs, time it, or
both (it always checks): the worker itself does not know, so neither can the candidate inside it
(principle 1 of the evaluator). Only the observed passes (op recorder, profiler) differ, and what they
show can only count against a candidate.
"""

from __future__ import annotations

import base64
import importlib
import os
import pickle
import resource
import sys
import time
from pathlib import Path
from typing import Any, Literal

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from cuda_agent_mcp.isolation.landlock import confine, python_paths
from cuda_agent_mcp.wire.protocol import (
    BatchResult,
    Failure,
    KernelTrace,
    Loaded,
    LoadRequest,
    ObserveRequest,
    PrepareRequest,
    SetOutputs,
    TracedKernel,
)
from cuda_agent_mcp.wire.refs import CudaIpcPayload, TensorRef, release_shm
from cuda_agent_mcp.wire.transport import ALLOWED_DTYPES, open_ref, share

MAX_INPUT_BYTES = 1 << 40


def is_cuda_error(exc: BaseException) -> bool:
    """Errors after which the CUDA context is unusable: the worker must exit."""
    accelerator_error = getattr(torch, "AcceleratorError", None)
    if accelerator_error is not None and isinstance(exc, accelerator_error):
        return True
    return "CUDA error" in str(exc) or "cudaError" in str(exc)


def is_out_of_memory(exc: BaseException) -> bool:
    """torch's caching allocator could not get device memory (the context stays usable)."""
    return isinstance(exc, torch.OutOfMemoryError)


class OpRecorder(TorchDispatchMode):
    """Records the aten ops dispatched inside forward(). Runs in the candidate's process, so a candidate
    can evade it; the judge treats what it reports as evidence against, never as proof for."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        self.ops.add(func._schema.name)
        return func(*args, **(kwargs or {}))


def warm_up() -> None:
    """Pay the first use of the op audit's dispatch mode (about 2 s of imports, measured on the CPU
    here and in every verify's first call on the H200) while the worker waits in the pool. CPU only:
    a pooled worker has not touched CUDA yet."""
    with OpRecorder():
        torch.zeros(1).add(1)


class Runner:
    """Holds the loaded model, the prepared batch and the outputs of the last one (kept alive until the
    next batch is prepared or the judge releases them)."""

    def __init__(self) -> None:
        self.model: Any = None
        self.device = torch.device("cpu")
        self.kept: list[torch.Tensor] = []
        self.kept_refs: list[TensorRef] = []
        self.flush_buffer: torch.Tensor | None = None
        self.batch: list[list[Any]] = []
        # Storages of the judge's input pools, mapped once each: every batch's sets are views at new
        # offsets into the same few pools, so mapping is paid once per evaluation, not per call.
        self._mapped: dict[str, Any] = {}
        self.echo_outputs: list[tuple[list[int], torch.dtype]] = []
        self.echo_spin_cycles = 0
        self._cycles_per_ms: float | None = None

    def load(self, request: LoadRequest) -> Loaded:
        self.device = torch.device(request.device)
        # Final before the candidate exists here: soft and hard alike, so it cannot be raised again.
        resource.setrlimit(resource.RLIMIT_FSIZE, (request.max_file_bytes, request.max_file_bytes))
        # Baselines run at the precision the judge computes references in (no TF32).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        # A trusted baseline may compile into the judge's persistent caches (LoadRequest.compile_caches),
        # before its torch.compile; else it compiles into the worker's own directory, as its environment says.
        os.environ.update(request.compile_caches)
        if request.confine_filesystem:
            if self.device.type == "cuda":
                # The driver opens what it needs while creating the context (some of it outside the view,
                # measured: cuInit inside the view fails with error 304); the context then serves the
                # candidate's work.
                torch.empty(1, device=self.device)
            confine(readable=[Path(request.directory), *python_paths()], writable=[Path.cwd()])
        sys.path.insert(0, request.directory)
        module = importlib.import_module(request.module)
        cls = getattr(module, request.class_name)
        init_args = pickle.loads(base64.b64decode(request.init_args_pickle))
        model = cls(*init_args)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"{request.class_name} is not a torch.nn.Module")
        model = model.to(self.device).eval()
        if request.state_dict:
            state = {k: open_ref(v, max_bytes=MAX_INPUT_BYTES) for k, v in request.state_dict.items()}
            model.load_state_dict(state, strict=True)
        self.model = torch.compile(model) if request.compile_model else model
        self._prepare_flush()
        return Loaded(parameter_count=sum(p.numel() for p in model.parameters()))

    # -- batches ------------------------------------------------------------------------------------

    def prepare(self, request: PrepareRequest) -> None:
        """Map the batch's inputs, drop the last batch's outputs, poison free memory, flush the L2."""
        self._release_outputs()
        if self.model is None:
            self._calibration_device([ref for refs in request.sets for ref in refs])
            self.echo_outputs = [(list(o.shape), ALLOWED_DTYPES[o.dtype]) for o in request.echo_outputs]
            self.echo_spin_cycles = int(request.echo_spin_ms * self._spin_rate())
        if self.device.type == "cuda":
            # Outputs the judge has copied and released leave torch's IPC limbo now, not inside a timed
            # batch, so the next outputs reuse their memory instead of exporting new allocations.
            torch.cuda.ipc_collect()
        batch = []
        for refs, pickled in zip(request.sets, request.scalars_pickle, strict=True):
            scalars = pickle.loads(base64.b64decode(pickled)) if pickled else {}
            batch.append([self._open(ref) if ref is not None else scalars[i] for i, ref in enumerate(refs)])
        self.batch = batch
        if request.poison_bytes:
            self._poison(request.poison, request.poison_bytes)
        if self.flush_buffer is not None:
            self.flush_buffer.fill_(1.0)  # write 2x L2 so the batch starts with a cold cache
        self._synchronize()

    def run(self, observe: ObserveRequest | None = None) -> BatchResult | Failure:
        """Call the model on every prepared set inside the clocks; share the outputs."""
        if not self.batch:
            return Failure(phase="call", kind="protocol", message="no batch prepared")
        model = self.model if self.model is not None else self._echo
        recorder = trace = None
        with torch.no_grad():
            if observe is None:
                outputs, event_ms, wall_ms = self._timed(model)
            elif observe.kind == "ops":
                with OpRecorder() as recorder:
                    outputs, event_ms, wall_ms = self._timed(model)
            else:
                outputs, event_ms, wall_ms, trace = self._traced(model)
        aliased = self._aliasing(self.batch, outputs)
        self.batch = []
        if aliased:  # refused before anything is shared (an input's memory is the judge's to share)
            return BatchResult(sets=[], event_ms=event_ms, wall_ms=wall_ms, aliased=aliased)
        sets = []
        for output in outputs:
            structure: Literal["tensor", "tuple", "list"]
            if isinstance(output, torch.Tensor):
                structure, tensors = "tensor", [output]
            elif isinstance(output, tuple | list) and all(isinstance(t, torch.Tensor) for t in output):
                structure, tensors = ("tuple" if isinstance(output, tuple) else "list"), list(output)
            else:
                return Failure(
                    phase="call", kind="bad_output", message=f"forward returned {type(output).__name__}"
                )
            refs = [share(t) for t in tensors]
            self.kept += tensors
            self.kept_refs += refs
            sets.append(SetOutputs(structure=structure, outputs=refs))
        return BatchResult(
            sets=sets,
            event_ms=event_ms,
            wall_ms=wall_ms,
            aliased=aliased,
            ops=sorted(recorder.ops) if recorder is not None else [],
            trace=trace,
        )

    def release(self, inputs: bool = False) -> None:
        self._release_outputs()
        if inputs:
            # The evaluation is over: unmap the judge's buffers before this process is killed. (Dropping
            # the model and torch.compile's caches with a full collection as well was measured at about
            # 1 s per worker on the H200 and still left the compile baseline's input mapped: not done.)
            self.batch, self._mapped = [], {}

    # -- inside the clocks --------------------------------------------------------------------------

    def _timed(self, model: Any) -> tuple[list[Any], float | None, float]:
        if self.device.type != "cuda":
            started = time.perf_counter()
            outputs = [model(*args) for args in self.batch]
            return outputs, None, (time.perf_counter() - started) * 1e3
        stream = torch.cuda.current_stream(self.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(self.device)
        started = time.perf_counter()
        start.record(stream)
        outputs = [model(*args) for args in self.batch]
        end.record(stream)
        torch.cuda.synchronize(self.device)
        wall_ms = (time.perf_counter() - started) * 1e3
        return outputs, start.elapsed_time(end), wall_ms

    def _traced(self, model: Any) -> tuple[list[Any], float | None, float, KernelTrace]:
        """The batch under the profiler (device activity on every stream)."""
        if self.device.type != "cuda":
            outputs, event_ms, wall_ms = self._timed(model)
            return outputs, event_ms, wall_ms, KernelTrace()
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            outputs, event_ms, wall_ms = self._timed(model)
        return outputs, event_ms, wall_ms, summarize_trace(device_events(prof))

    # -- helpers -------------------------------------------------------------------------------------

    def _open(self, ref: TensorRef) -> torch.Tensor:
        payload = ref.payload
        if not isinstance(payload, CudaIpcPayload):
            return open_ref(ref, max_bytes=MAX_INPUT_BYTES)
        key = payload.model_dump_json()
        if key not in self._mapped:
            self._mapped[key] = open_ref(ref, max_bytes=MAX_INPUT_BYTES).untyped_storage()
        storage = self._mapped[key]
        return torch.empty(0, dtype=ALLOWED_DTYPES[ref.dtype], device=storage.device).set_(
            storage, ref.storage_offset, ref.shape, ref.stride
        )

    @staticmethod
    def _aliasing(batch: list[list[Any]], outputs: list[Any]) -> str:
        """Outputs that share memory with an input of their call or with another output: the judge's
        contract forbids both (a worker can lie here, so this only ever rejects)."""
        for index, (args, output) in enumerate(zip(batch, outputs, strict=True)):
            tensors = [output] if isinstance(output, torch.Tensor) else list(output)
            spans = [(_span(t), f"output {i}") for i, t in enumerate(tensors) if isinstance(t, torch.Tensor)]
            spans += [(_span(a), f"input {i}") for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
            for a in range(len(spans)):
                for b in range(a + 1, len(spans)):
                    if spans[a][1].startswith("output") and _overlap(spans[a][0], spans[b][0]):
                        return f"call {index}: {spans[a][1]} shares memory with {spans[b][1]}"
        return ""

    def _echo(self, *args: Any) -> Any:
        """The null worker's model: device time as long as the candidate's call (a spin), then new outputs
        shaped like the task's (allocated, not written: sharing them is the harness's cost being
        measured), else a small copy."""
        if self.echo_spin_cycles > 0:
            torch.cuda._sleep(self.echo_spin_cycles)
        if not self.echo_outputs:
            return _echo(*args)
        outputs = [torch.empty(shape, dtype=dtype, device=self.device) for shape, dtype in self.echo_outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _spin_rate(self) -> float:
        """GPU clock cycles per millisecond of `torch.cuda._sleep`, measured once with events."""
        if self.device.type != "cuda":
            return 0.0
        if self._cycles_per_ms is None:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            cycles = 2_000_000
            torch.cuda._sleep(cycles)  # the first launch pays module loading
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            end.synchronize()
            self._cycles_per_ms = cycles / max(start.elapsed_time(end), 1e-3)
        return self._cycles_per_ms

    def _release_outputs(self) -> None:
        for ref in self.kept_refs:
            release_shm(ref)
        self.kept, self.kept_refs = [], []

    def _prepare_flush(self) -> None:
        if self.device.type == "cuda":
            l2_bytes = int(getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 64 << 20))
            self.flush_buffer = torch.empty(2 * l2_bytes // 4, dtype=torch.float32, device=self.device)

    def _calibration_device(self, refs: list[TensorRef | None]) -> None:
        """Before any model is loaded CUDA is untouched here: initialise it (as moving a model would)
        before mapping the judge's memory, on the device that memory is on."""
        if self.flush_buffer is not None:
            return
        devices = [r.payload.device for r in refs if r is not None and isinstance(r.payload, CudaIpcPayload)]
        if devices:
            self.device = torch.device("cuda", devices[0])
            torch.cuda.init()
            torch.cuda.set_device(self.device)
            self._prepare_flush()

    def _poison(self, value: float, nbytes: int) -> None:
        """Fill the memory the caching allocator will hand out next, so unwritten outputs show up.

        Every free block the allocator caches is taken back (asked for by size, largest first, in pieces
        its own pool serves: `poison_requests`; the best-fit search answers with that block) and filled;
        a block of `nbytes` (the batch's outputs, nothing more) is added while no free block is that
        large. Poisoning never runs
        the device out of memory: an allocation that fails ends the taking (the allocator has then emptied
        its cache, so the sizes read before are stale) and what was taken is filled. Once the cache holds a
        block as large as the outputs, poisoning allocates nothing new: asking for fresh device memory on
        every call cost ~0.5 s per call on 6.4 GB outputs."""
        if self.device.type != "cuda":
            block = torch.empty(max(nbytes // 4, 1), dtype=torch.float32, device=self.device)
            block.fill_(value)
            return
        free = free_block_sizes(self.device)
        # Cached blocks first (no new device memory), then the outputs' block if none was that large: a
        # failing fresh allocation then finds nothing cached to release and fails cleanly.
        wanted = free + ([nbytes] if nbytes and (not free or free[0] < nbytes) else [])
        held = []
        for size in wanted:
            try:
                held.append(torch.empty(size, dtype=torch.uint8, device=self.device))
            except torch.OutOfMemoryError:
                break
        for block in held:
            usable = block.numel() // 4 * 4
            block[:usable].view(torch.float32).fill_(value)
        self._synchronize()
        del held

    def _synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _span(tensor: torch.Tensor) -> tuple[int, int]:
    start = tensor.data_ptr()
    if tensor.numel() == 0:
        return start, start
    extent = 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride(), strict=True))
    return start, start + extent * tensor.element_size()


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _echo(*args: Any) -> torch.Tensor:
    """The calibration model without an output spec: one small copy (at most 1 Mi elements), made through
    the same allocator a candidate's output is."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    return tensors[0].reshape(-1)[: 1 << 20].clone() if tensors else torch.zeros(1)


# torch's caching allocator serves requests of up to 1 MiB (kSmallSize) from its small pool (2 MiB segments)
# and larger ones from its large pool.
SMALL_REQUEST_BYTES = 1 << 20


def free_block_sizes(device: torch.device) -> list[int]:
    """The requests that take back the free blocks the caching allocator holds on `device`, largest first."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return poison_requests(torch.cuda.memory_snapshot(), index)


def poison_requests(snapshot: list[dict[str, Any]], device_index: int) -> list[int]:
    """Request sizes, largest first, that take back every free block of `snapshot` on `device_index` that
    the allocator could hand out, each from the pool it lies in. A free block of the small pool is asked
    for in pieces of at most 1 MiB: asked for whole (a free 2 MiB segment), the request would go to the
    large pool and make a new segment there every batch (on the H200 a worker sharing 44 outputs of 1 MiB
    a batch grew by 63 MB a batch, and an honest kernel was killed for its memory after about 140). A
    free block of the large pool of at most 1 MiB is not handed out as it is (only larger requests reach
    that pool), and no request could take it back (one of its size goes to the small pool, as it did
    before), so it is not asked for."""
    sizes: list[int] = []
    for segment in snapshot:
        if segment["device"] != device_index:
            continue
        small = segment.get("segment_type") == "small"
        for block in segment["blocks"]:
            if block["state"] != "inactive":
                continue
            size = int(block["size"])
            if small:
                whole, rest = divmod(size, SMALL_REQUEST_BYTES)
                sizes += [SMALL_REQUEST_BYTES] * whole + ([rest] if rest else [])
            elif size > SMALL_REQUEST_BYTES:
                sizes.append(size)
    return sorted(sizes, reverse=True)


def device_events(prof: Any) -> list[tuple[str, int, int, int]]:
    """(name, start ns, end ns, stream) of every device activity in a finished profile (kernels, copies,
    memsets), on every stream."""
    results = getattr(prof.profiler, "kineto_results", None)
    if results is None:
        return []
    found = []
    for event in results.events():
        if event.device_type() != torch.autograd.DeviceType.CUDA:
            continue
        stream = getattr(event, "device_resource_id", lambda: 0)()
        found.append((event.name(), int(event.start_ns()), int(event.end_ns()), int(stream)))
    return found


def summarize_trace(events: list[tuple[str, int, int, int]]) -> KernelTrace:
    """Totals by name, the union of the intervals (busy time over all streams) and the streams seen."""
    totals: dict[str, list[int]] = {}
    for name, start, end, _ in events:
        entry = totals.setdefault(name[:4000], [0, 0])
        entry[0] += 1
        entry[1] += max(end - start, 0)
    busy = 0
    reach = None
    for start, end in sorted((s, e) for _, s, e, _ in events):
        if reach is None or start > reach:
            busy += max(end - start, 0)
            reach = end
        elif end > reach:
            busy += end - reach
            reach = end
    return KernelTrace(
        kernels=[TracedKernel(name=name, calls=c, device_ns=ns) for name, (c, ns) in totals.items()][:10000],
        busy_ns=busy,
        streams=len({stream for *_, stream in events}),
    )
