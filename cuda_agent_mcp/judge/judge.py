"""The trusted side of an evaluation: inputs, reference outputs, comparisons, clocks and verdicts.

Runs in the judge process. It imports the pristine reference, never the candidate: the candidate runs in
a Worker and only tensors cross, through `transport`, in memory of their own (`staging`).

Every call the worker serves is one *batch*: K input sets prepared (mapped at new addresses, free memory
poisoned, L2 flushed) and then run back to back inside the clocks. Verify trials and timed samples are
batches alike; every output of every batch is checked (contract, aliasing, values, precision, inputs
untouched). Nothing in the worker tells them apart, so a candidate that behaves only while checked is
checked while it misbehaves. Only the observed passes (op recorder, profiler) are visible to it, and what
they show can only reject.
"""

from __future__ import annotations

import base64
import copy
import importlib.util
import math
import os
import pickle
import secrets
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, NoReturn

import torch

from cuda_agent_mcp.evaluation.job import EvalJob
from cuda_agent_mcp.evaluation.ops import forbidden_ops
from cuda_agent_mcp.judge.compare import Errors, Problem, check_outputs, errors, unchanged
from cuda_agent_mcp.judge.gpu_guard import GpuBusy, GpuGuard, listing
from cuda_agent_mcp.judge.gpu_memory import MemoryAtFailure, memory_at_failure, nvml_module
from cuda_agent_mcp.judge.kernels import breakdown
from cuda_agent_mcp.judge.memory_watch import CandidateMemory, watch_for_device
from cuda_agent_mcp.judge.phases import PhaseClock
from cuda_agent_mcp.judge.sanitize import SanitizerTarget, start_target
from cuda_agent_mcp.judge.sizes import (
    SizePlan,
    grown_inputs,
    hidden_size_plan,
    meta_output_bytes,
    meta_output_shapes,
    smallest_inputs,
)
from cuda_agent_mcp.judge.staging import InputStage, Staged, give_back, private_copies, weight_refs
from cuda_agent_mcp.judge.timing import (
    MAX_SYNC_MS,
    HiddenWork,
    calls_per_batch,
    clock_problem,
    hidden_work,
    summarize,
    timing_done,
)
from cuda_agent_mcp.judge.worker_client import ForkedWorkerPool, Worker, WorkerLost, WorkerPool
from cuda_agent_mcp.results import (
    AuditFinding,
    ContractViolation,
    Crashed,
    KernelBreakdown,
    Passed,
    Rejected,
    SanitizerReport,
    TimedOut,
    TimingStats,
    Verdict,
    WrongOutput,
)
from cuda_agent_mcp.wire.paused_gc import paused_garbage_collection
from cuda_agent_mcp.wire.protocol import (
    BatchResult,
    EchoOutput,
    KernelTrace,
    Loaded,
    LoadRequest,
    ObserveRequest,
    PingRequest,
    Prepared,
    PrepareRequest,
    RunRequest,
)
from cuda_agent_mcp.wire.refs import CudaIpcPayload, TensorRef, release_shm
from cuda_agent_mcp.wire.transport import MappingFailed, TransportError, dtype_name, open_ref, receive

POISON_VALUES = (float("nan"), -7.77e7)
_FULL_PRECISION = (torch.float32, torch.float64)
# A batch holds enough calls for TimingPolicy.window_ms of work (principle 4: the clocks' tolerances are
# relative, so launch overhead and a margin cannot hide work in short windows), within a memory budget.
MAX_BATCH = 256  # the protocol's limit of sets per batch
BATCH_MEMORY_BYTES = 1 << 30
# After the warm-up, every CHECK_EVERY-th timed batch uses the shifted distribution and is not a sample:
# the distribution tells a candidate nothing about whether it is being timed.
CHECK_EVERY = 4
# The traced batch may run at most this much longer per call than the timed median before the
# candidate is taken to behave differently when it is observed.
OBSERVED_SLOWDOWN_LIMIT = 1.15
# The null worker's first batch maps its inputs and exports its first outputs: not a sample.
NULL_WARMUP_BATCHES = 1
# The null runs no candidate code: its outputs are opened (never copied) under no tighter limit than inputs.
NULL_OUTPUT_BYTES = 1 << 40
BASELINE_FILE_BYTES = 4 << 30
# How long a process the candidate started may take to finish exiting after its call returned (the middle
# of a double fork, a helper that ends on its own).
LEFT_RUNNING_GRACE_S = 0.2


class VerdictReached(Exception):
    """Raised inside the judge to stop at the first failing check, carrying its verdict."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        super().__init__(verdict.status)


class HarnessFault(Exception):
    """A step of the harness failed and the candidate cannot be shown to have caused it (prepare, poison,
    L2 flush or IPC mapping that fails in a clean worker too; running out of memory others held; a null
    too noisy to judge on): the evaluation is infrastructure's to retry, never a verdict (issue 23)."""


class TaskFault(Exception):
    """The task's reference failed to run or to be timed here: the task's error, never the candidate's."""


@dataclass
class InputSet:
    """One call's inputs (the judge's own, never shared) and the reference's outputs on them."""

    distribution: str
    inputs: list[Any]
    structure: str
    expected: list[torch.Tensor]

    @property
    def out_bytes(self) -> int:
        return sum(e.numel() * e.element_size() for e in self.expected)

    @property
    def in_bytes(self) -> int:
        return sum(x.numel() * x.element_size() for x in self.inputs if isinstance(x, torch.Tensor))


@dataclass
class BatchRun:
    """What one batch gave: the worker's reply, private copies of every set's outputs, the clocks."""

    reply: BatchResult
    outputs: list[list[torch.Tensor]]
    judge_ms: float
    ping_ms: float
    staged: list[Staged]
    # Per set, each output's distance from the reference, measured by `check_batch`'s comparison (None
    # until checked, and for a set judged against the float64 truth instead).
    errors: list[list[Errors] | None] = field(default_factory=list)


class Judge:
    """One evaluation of one candidate against one reference."""

    def __init__(
        self, job: EvalJob, scratch: Path, env: dict[str, str], workers: WorkerPool | None = None
    ) -> None:
        self.job = job
        self.scratch = scratch
        self.env = env
        # Workers are forked on demand (see worker_client.py); a caller may pass its own pool.
        self.workers = workers or ForkedWorkerPool(scratch, env)
        self.device = torch.device(job.device)
        self.clock = PhaseClock()
        # References in true fp32: cuDNN would otherwise use TF32 for convolutions by default.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        with self.clock.phase("reference_setup"):
            self.reference = _import_reference(Path(job.reference_path))
            torch.manual_seed(job.init_seed)
            with torch.device(self.device):
                self.init_args = list(self.reference.get_init_inputs())
                self.model = self.reference.Model(*self.init_args).to(self.device).eval()
            self.state = {k: v.detach() for k, v in self.model.state_dict().items()}
        self.stage = InputStage(self.device)
        self.distributions_used: list[str] = []
        self.batch_size = 1
        self._calls = 0
        self._null_sync_ms: list[float] = []
        # What outputs were judged against: the reference in its dtype, or (where it is further from the
        # truth than the tolerance and the candidate is not) the same program in float64.
        self.judged_against: Literal["reference", "float64"] = "reference"
        self.sanitizer: SanitizerReport | None = None
        self._weight_pools: list[Any] = []

    # -- inputs and reference ------------------------------------------------------------------

    @cached_property
    def max_file_bytes(self) -> int:
        """The workers' file-size limit: 64 MiB (it caps their logs), or on the CPU, where outputs travel
        as shared-memory files, four times the reference's outputs (the hidden sizes are a little larger)."""
        floor = 64 << 20
        if self.device.type == "cuda":
            return floor
        return max(floor, 4 * meta_output_bytes(self.reference) + (1 << 20))

    @cached_property
    def size_plan(self) -> SizePlan:
        """How the hidden-size trial grows this task's inputs (judge/sizes.py); worked out on first
        use, so profile and baseline jobs never pay for it."""
        with self.clock.phase("size_plan"):
            return hidden_size_plan(self.reference)

    def make_inputs(self, seed: int, distribution: str) -> list[Any]:
        with self.clock.phase("inputs"):
            return self._make_inputs(seed, distribution)

    def _make_inputs(self, seed: int, distribution: str) -> list[Any]:
        torch.manual_seed(seed)
        if distribution == "resized":
            inputs = grown_inputs(self.reference, self.size_plan, seed, self.device)
        else:
            with torch.device(self.device):
                inputs = list(self.reference.get_inputs())
        inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs]
        if distribution == "shifted":
            # Centre and widen every float input: signs flip, so kernels that assume the task's
            # own range (e.g. a ReLU skipped on non-negative inputs) are found out.
            inputs = [
                (x - x.mean()) * 4 if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                for x in inputs
            ]
        return inputs

    def reference_outputs(self, inputs: list[Any]) -> tuple[str, list[torch.Tensor]]:
        """The reference on copies of `inputs` (it may write its inputs; the originals stay pristine).
        A reference that fails is the task's fault, or the machine's when it ran out of memory others held."""
        with self.clock.phase("reference"):
            clones = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            before = self._reset_peak_memory()
            try:
                with torch.no_grad():
                    output = self.model(*clones)
            except torch.OutOfMemoryError as exc:
                raise self._reference_out_of_memory(exc) from None
            except Exception as exc:
                raise TaskFault(f"the reference failed: {type(exc).__name__}: {exc}"[:2000]) from None
            if before is not None:
                working = torch.cuda.max_memory_allocated(self.device) - before
                self.candidate_memory.reference_bytes = max(self.candidate_memory.reference_bytes, working)
        if isinstance(output, torch.Tensor):
            return "tensor", [output]
        return ("tuple" if isinstance(output, tuple) else "list"), list(output)

    @cached_property
    def _one_call_out_bytes(self) -> int:
        """One reference call's outputs, from the meta device (0 where it cannot run there; off the GPU no
        budget is drawn)."""
        with self.clock.phase("memory_budget"):
            return meta_output_bytes(self.reference) if self.device.type == "cuda" else 0

    def _reset_peak_memory(self) -> int | None:
        """Start measuring the reference's peak working memory (what a candidate's budget is drawn from):
        the bytes allocated now, or None off the GPU."""
        if self.device.type != "cuda":
            return None
        torch.cuda.reset_peak_memory_stats(self.device)
        return torch.cuda.memory_allocated(self.device)

    @cached_property
    def candidate_memory(self) -> CandidateMemory:
        """The GPU memory a candidate worker may hold, and the watch that stops it beyond (memory_watch.py)."""
        policy = self.job.gpu_memory
        if self.device.type != "cuda":
            return CandidateMemory(policy, 0, None, "not applicable (no GPU)")
        with self.clock.phase("memory_budget"):
            total = torch.cuda.get_device_properties(self.device).total_memory
            return CandidateMemory(policy, total, *watch_for_device(self.device_uuid, nvml_module()))

    def _reference_out_of_memory(self, exc: BaseException) -> Exception:
        """The reference ran out of device memory in the judge: the task's error when nothing else held the
        device (it needs more than this GPU has), the infrastructure's otherwise."""
        memory = self._memory_at_failure(os.getpid())
        if memory is not None and memory.others_bytes < 0.1 * memory.total_bytes:
            return TaskFault(f"the reference needs more device memory than this GPU has: {memory.describe()}")
        held = memory.describe() if memory is not None else "the device's memory could not be measured"
        return HarnessFault(f"the reference ran out of device memory in the judge ({held}): {exc}"[:2000])

    def _memory_at_failure(self, pid: int | None) -> MemoryAtFailure | None:
        """NVML's per-process account, else the device's totals as this process sees them; None off a GPU."""
        if self.device.type != "cuda":
            return None
        if (measured := memory_at_failure(self.device_uuid, pid)) is not None:
            return measured
        free, total = torch.cuda.mem_get_info(self.device)
        return MemoryAtFailure(worker_bytes=None, used_bytes=total - free, total_bytes=total)

    @cached_property
    def device_uuid(self) -> str:
        if self.device.type != "cuda":
            return ""
        return str(getattr(torch.cuda.get_device_properties(self.device), "uuid", ""))

    def input_set(self, seed: int, distribution: str) -> InputSet:
        """One call's inputs and the reference's outputs. A distribution the reference cannot use
        (non-finite outputs on shifted inputs, an error at other sizes, a task without a size plan)
        falls back to the task's own."""
        if distribution == "resized" and self.size_plan.kind == "fixed":
            distribution = "task"
        inputs = self.make_inputs(seed, distribution)
        try:
            structure, expected = self.reference_outputs(inputs)
        except Exception:
            if distribution != "resized":
                raise
            return self.input_set(seed, "task")
        if distribution != "task" and not all(
            bool(torch.isfinite(e).all()) for e in expected if e.is_floating_point()
        ):
            return self.input_set(seed, "task")
        return InputSet(distribution, inputs, structure, expected)

    def input_sets(self, seed: int, distribution: str, count: int) -> list[InputSet]:
        """`count` sets of one distribution, from seeds derived from `seed` (replayable verify)."""
        return [self.input_set(_derived(seed, index), distribution) for index in range(count)]

    # -- talking to workers ----------------------------------------------------------------------

    def start_worker(
        self,
        directory: Path,
        module: str,
        class_name: str,
        *,
        compile_model: bool = False,
    ) -> Worker:
        """Load a model into a fresh worker (forked: its interpreter and torch import are paid). A worker
        that fails to load is closed here: the caller never gets it."""
        with self.clock.phase("worker_start"):
            worker = self.workers.take()
        try:
            return self._load(worker, directory, module, class_name, compile_model)
        except BaseException:
            worker.close()
            raise

    def start_null_worker(self) -> Worker | None:
        """A clean worker that is never loaded: its echo batches, interleaved with the candidate's, measure
        the harness's own cost in the same conditions (judge/timing.py). Only where there are clocks to
        cross-check (CUDA)."""
        if self.device.type != "cuda":
            return None
        with self.clock.phase("worker_start"):
            return self.workers.take()

    def _load(
        self, worker: Worker, directory: Path, module: str, class_name: str, compile_model: bool
    ) -> Worker:
        # Whatever is loaded from the candidate's directory runs in the filesystem view.
        confine = Path(directory) == Path(self.job.candidate_dir)
        directory = worker.stage(directory)
        worker.runs_candidate = confine
        copies, pool = private_copies(self.state)
        state = weight_refs(copies, pool)
        request = LoadRequest(
            directory=str(directory),
            module=module,
            class_name=class_name,
            init_args_pickle=base64.b64encode(pickle.dumps(_to_cpu(self.init_args))).decode(),
            state_dict=state,
            compile_model=compile_model,
            device=self.job.device,
            confine_filesystem=confine,
            # Baselines load only the reference (trusted code): torch.compile's caches (inductor's
            # precompiled header is over 64 MiB on the CPU) get room; candidates get the task's limit.
            max_file_bytes=self.max_file_bytes if confine else BASELINE_FILE_BYTES,
            # The torch.compile baseline (trusted) may reuse the judge's persistent caches where candidates
            # cannot write them (Worker.trusted_compile_caches); a candidate only ever has its own.
            compile_caches=worker.trusted_compile_caches() if compile_model and not confine else {},
        )
        if confine:
            # Its import and constructor may allocate: watched from the start, under one call's budget.
            self.candidate_memory.limit(worker, self._one_call_out_bytes)
        try:
            with self.clock.phase("worker_load"):
                reply = self._ask(worker, request, "load", self.job.timeouts.load_s)
        finally:
            for ref in state.values():
                release_shm(ref)
        worker.keep_alive = copies  # the worker's weights stay mapped while it lives
        self._weight_pools.append(pool)  # given back in close(), after every worker is gone
        if not isinstance(reply, Loaded):
            raise VerdictReached(
                Crashed(phase="load", kind="protocol", message=f"unexpected reply {reply.op}")
            )
        return worker

    def run_batch(
        self,
        worker: Worker,
        sets: list[InputSet] | list[list[Any]],
        *,
        timeout_s: float,
        poison: float | None = None,
        observe: Literal["ops", "kernels"] | None = None,
        out_bytes: int | None = None,
        echo: list[EchoOutput] | None = None,
        spin_ms: float = 0.0,
    ) -> BatchRun:
        """One batch: stage the inputs at new addresses, prepare (poison, flush), run inside the
        clocks, copy every set's outputs out of the worker. A batch of the null worker (`echo` given)
        is timed alike, and its outputs are not copied: only its clocks are wanted."""
        null = echo is not None
        inputs = [s.inputs if isinstance(s, InputSet) else s for s in sets]
        if out_bytes is None:
            out_bytes = sum(s.out_bytes for s in sets if isinstance(s, InputSet))
        with self.clock.phase("staging"):
            staged = self.stage.stage(inputs)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)  # the worker reads these bytes from another context
        self._calls += 1
        if worker.runs_candidate:
            self.candidate_memory.limit(worker, out_bytes)
        prepare = PrepareRequest(
            sets=[s.refs for s in staged],
            scalars_pickle=[_scalars(s.views) for s in staged],
            poison=poison if poison is not None else secrets.choice(POISON_VALUES),
            poison_bytes=0 if null else out_bytes,
            echo_outputs=echo or [],
            echo_spin_ms=spin_ms,
        )
        with self.clock.phase("prepare"):
            reply = self._ask(worker, prepare, "call", timeout_s)
        if not isinstance(reply, Prepared):
            raise VerdictReached(
                Crashed(phase="call", kind="protocol", message=f"unexpected reply {reply.op}")
            )
        request = RunRequest() if observe is None else ObserveRequest(kind=observe)
        started = time.perf_counter()
        reply = self._ask(worker, request, "call", timeout_s)
        judge_ms = (time.perf_counter() - started) * 1e3
        self.clock.add("null_calls" if null else "candidate_calls", judge_ms / 1e3)
        if not isinstance(reply, BatchResult):
            raise VerdictReached(
                Crashed(phase="call", kind="protocol", message=f"unexpected reply {reply.op}")
            )
        if reply.aliased:
            raise VerdictReached(ContractViolation(check="aliasing", trial=0, message=reply.aliased))
        if len(reply.sets) != len(staged):
            raise VerdictReached(
                Crashed(
                    phase="call",
                    kind="protocol",
                    message=f"{len(reply.sets)} results for {len(staged)} calls",
                )
            )
        outputs: list[list[torch.Tensor]] = []
        if not null:
            with self.clock.phase("output_copy"):
                outputs = self._copy_outputs(reply, staged, out_bytes, worker)
        else:
            # Received and dropped, as the candidate's outputs are after their copy: the worker's allocator
            # frees an exported block only once the receiver has let go of it, so a null whose outputs
            # were never opened would allocate and export new memory every batch (measured on the H200:
            # medians of 2 to 5 ms of excess, then out of memory) and stop being a null.
            with self.clock.phase("null_outputs"):
                for result in reply.sets:
                    for ref in result.outputs:
                        open_ref(ref, max_bytes=NULL_OUTPUT_BYTES)
        ping_ms = self._round_trip_ms(worker, timeout_s)
        return BatchRun(reply=reply, outputs=outputs, judge_ms=judge_ms, ping_ms=ping_ms, staged=staged)

    def _copy_outputs(
        self, reply: BatchResult, staged: list[Staged], out_bytes: int, worker: Worker
    ) -> list[list[torch.Tensor]]:
        """Private copies of every output; an output that aliases an input or another output is a
        contract violation (principle 10), whatever the worker says about it."""
        limit = output_limit_bytes(out_bytes)
        device = self.device.index if self.device.type == "cuda" else None
        copies = []
        try:
            for index, (result, inputs) in enumerate(zip(reply.sets, staged, strict=True)):
                if (
                    overlap := _aliases(result.outputs, [r for r in inputs.refs if r is not None])
                ) is not None:
                    raise VerdictReached(
                        ContractViolation(check="aliasing", trial=0, message=f"call {index}: {overlap}")
                    )
                copies.append(
                    [
                        receive(r, max_bytes=limit, expected_device=device, sender_pid=worker.own_pid)
                        for r in result.outputs
                    ]
                )
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        except MappingFailed as exc:
            # Outputs die with a worker the memory watch killed while they were mapped: that is the verdict.
            self._check_memory(worker)
            self._mapping_failed(str(exc))
        except TransportError as exc:
            self._check_memory(worker)
            raise VerdictReached(ContractViolation(check="transport", trial=0, message=str(exc))) from None
        return copies

    def _mapping_failed(self, detail: str) -> NoReturn:
        """The driver refused to map an output the candidate's worker sent. A clean worker's outputs,
        mapped right after, tell whose fault it is: mapping there too, it was the handle the candidate's
        process sent (a forgery, or its own breakage), a verdict; failing there too, the machine's
        (HarnessFault, retried on a fresh judge), so a forged handle never buys a masked sample."""
        clean = self.workers.take()
        try:
            self._null_batch(clean, 1, 0.0, self.job.timeouts.call_s, first=False)
        except HarnessFault:
            raise HarnessFault(
                f"the judge could not map a worker's output, nor a clean worker's: {detail}"[:2000]
            ) from None
        finally:
            clean.close()
        raise VerdictReached(
            ContractViolation(
                check="transport",
                trial=0,
                message=f"the driver refused to map an output the candidate's worker sent ({detail[:500]}), "
                "while a clean worker's outputs mapped",
            )
        )

    def _round_trip_ms(self, worker: Worker, timeout_s: float) -> float:
        """The judge's clock around a request that does nothing: the protocol's own cost."""
        started = time.perf_counter()
        self._ask(worker, PingRequest(), "call", timeout_s)
        return (time.perf_counter() - started) * 1e3

    def _ask(self, worker: Worker, request: Any, phase: Literal["load", "call"], timeout_s: float) -> Any:
        """One request and its reply; a failure becomes the candidate's verdict only where the candidate
        can be shown to have caused it (see `_harness_step_failed`, `_out_of_memory`)."""
        try:
            reply = worker.request(request, timeout_s=timeout_s)
        except WorkerLost as lost:
            self._check_memory(worker)  # the watch killed it: that is the reason, whatever the pipe saw
            if lost.reason == "timeout":
                raise VerdictReached(TimedOut(phase=phase, limit_s=timeout_s)) from None
            if isinstance(request, PrepareRequest):
                self._harness_step_failed(request, f"the worker exited ({lost.detail})", timeout_s)
            kind: Literal["process_exited", "protocol"] = (
                "process_exited" if lost.reason == "exited" else "protocol"
            )
            raise VerdictReached(
                Crashed(phase=phase, kind=kind, message=lost.detail, log_tail=lost.log_tail)
            ) from None
        self._check_memory(worker)
        self._check_left_running(worker)
        if reply.op == "failure":
            if reply.kind == "out_of_memory":
                self._out_of_memory(worker, reply.phase, reply.message)
            if isinstance(request, PrepareRequest):
                self._harness_step_failed(request, reply.message, timeout_s)
            raise VerdictReached(
                Crashed(phase=reply.phase, kind=reply.kind, message=reply.message, log_tail=worker.log_tail())
            )
        return reply

    def _check_memory(self, worker: Worker) -> None:
        """A candidate worker the memory watch found over its budget (and killed) is rejected for it."""
        if (overrun := self.candidate_memory.overrun(worker)) is None:
            return
        raise VerdictReached(
            Rejected(
                reason="gpu_memory_exceeded",
                message=f"{overrun.describe()} (measured by the judge through NVML). They were killed. Allocate "
                "less: reuse buffers, free temporaries, or work in pieces.",
                evidence={
                    "held_bytes": float(overrun.held_bytes),
                    "budget_bytes": float(overrun.budget_bytes),
                },
            )
        )

    def _check_left_running(self, worker: Worker) -> None:
        """After each of the candidate's calls returns, nothing it started may still run (its cage says,
        not the worker): a process left behind could load the GPU while baselines or later evaluations
        are timed. A double fork's middle process may take a moment to exit, so it is looked at twice."""
        if not worker.runs_candidate or not (left := worker.left_running()):
            return
        time.sleep(LEFT_RUNNING_GRACE_S)
        if left := worker.left_running():
            raise VerdictReached(
                Rejected(
                    reason="process_left_running",
                    message=f"the candidate's code left {len(left)} process(es) running after its call returned "
                    f"(pids {', '.join(map(str, left[:8]))}); every process it starts must end before the call "
                    "returns. They were killed with its worker.",
                    evidence={"processes_left": float(len(left))},
                )
            )

    def _harness_step_failed(self, prepare: PrepareRequest, detail: str, timeout_s: float) -> None:
        """Preparing a batch (mapping its inputs, poisoning free memory, flushing the L2) is the harness's
        code, but it runs in the candidate's process, which the candidate may have tampered with. The same
        request goes to a clean worker: failing there too, it is the harness's fault (HarnessFault, retried
        on a fresh judge); passing there, the candidate's process broke it (a verdict)."""
        clean = self.workers.take()
        try:
            reply = clean.request(prepare, timeout_s=timeout_s)
            reproduced = reply.op == "failure"
        except WorkerLost:
            reproduced = True
        finally:
            clean.close()
        last_line = detail.strip().splitlines()[-1][:500] if detail.strip() else "no detail"
        if reproduced:
            raise HarnessFault(
                f"preparing a batch failed in the candidate's worker and in a clean one: {last_line}"
            )
        raise VerdictReached(
            Crashed(
                phase="call",
                kind="exception",
                message="preparing a batch (the harness's own step) failed in this candidate's process and not in "
                f"a clean worker given the same request, so something the candidate did broke it: {last_line}",
            )
        )

    def _out_of_memory(self, worker: Worker, phase: Literal["load", "call"], detail: str) -> None:
        """The worker says it ran out of device memory: the infrastructure's only when the judge's own
        measure finds others crowding the device (judge/gpu_memory.py); the candidate's verdict otherwise,
        so an out-of-memory raised on a device with room to spare (or off a GPU) buys no retry."""
        memory = self._memory_at_failure(worker.gpu_pid)
        if memory is None or memory.candidates_fault:
            measured = f": {memory.describe()}" if memory is not None else ""
            raise VerdictReached(
                Crashed(
                    phase=phase,
                    kind="out_of_memory",
                    message=f"out of device memory{measured}. Allocate less (reuse buffers, free temporaries) "
                    "or work in pieces.",
                    log_tail=detail[-2000:],
                )
            )
        raise HarnessFault(
            f"the worker ran out of device memory while others crowded it ({memory.describe()})"
        )

    # -- checks shared by every batch --------------------------------------------------------------

    def check_batch(
        self, run: BatchRun, sets: list[InputSet], phase: Literal["verify", "timed"], trial: int
    ) -> None:
        """Every output of every call: the contract, values, precision; inputs untouched."""
        run.errors = [None] * len(sets)
        for index, (actual, expected, staged) in enumerate(zip(run.outputs, sets, run.staged, strict=True)):
            result = run.reply.sets[index]
            measured: list[Errors] = []
            with self.clock.phase("compare"):
                problem = check_outputs(
                    actual,
                    result.structure,
                    expected.expected,
                    expected.structure,
                    atol=self.job.atol,
                    rtol=self.job.rtol,
                    measured=measured,
                )
            known: list[Errors] | None = measured
            truth = None
            if problem is not None and problem.check is None:
                # Values only: a kernel closer to the truth than the reference itself may be right.
                truth = self._float64_truth(actual, result.structure, expected)
                if truth is not None:
                    problem, known = None, None
                    self.judged_against = "float64"
            if problem is not None:
                raise VerdictReached(_verdict_for(problem, phase, trial, expected.distribution))
            run.errors[index] = known
            with self.clock.phase("compare"):
                try:
                    left = staged.as_left()
                except TransportError as exc:
                    raise VerdictReached(
                        ContractViolation(
                            check="input_mutated", trial=trial, message=f"an input's file was changed: {exc}"
                        )
                    ) from None
                mutated = [
                    position
                    for position, (before, after) in enumerate(zip(expected.inputs, left, strict=True))
                    if isinstance(before, torch.Tensor) and not unchanged(before, after)
                ]
            if mutated:
                raise VerdictReached(
                    ContractViolation(
                        check="input_mutated",
                        trial=trial,
                        message=f"input {mutated[0]} was modified by forward()",
                    )
                )
            if truth is not None:
                self._check_precision(actual, truth, trial)
            elif known is not None:
                self._check_precision_of(known, expected.expected, trial)

    def _float64_truth(
        self, actual: list[torch.Tensor], structure: str, expected: InputSet
    ) -> list[torch.Tensor] | None:
        """The same program evaluated in float64 (weights and floating inputs promoted), rounded to the
        reference's dtypes, when judging against it is warranted: the reference, run in its dtype, is
        further from it than the tolerance allows (long reductions, cumulative sums, losses over many
        elements) and the candidate is within the tolerance of it. None otherwise, or where the program
        cannot run in float64. (GPU MODE's reference-kernels #164 rejected kernels closer to the truth
        than their reference.)"""
        if self._model64 is None or not any(
            e.is_floating_point() and e.dtype != torch.float64 for e in expected.expected
        ):
            return None
        with self.clock.phase("reference_float64"):
            try:
                promoted = [
                    x.detach().to(torch.float64)
                    if isinstance(x, torch.Tensor) and x.is_floating_point()
                    else x
                    for x in expected.inputs
                ]
                with torch.no_grad():
                    output = self._model64(*promoted)
            except Exception:
                return None
            truth64 = [output] if isinstance(output, torch.Tensor) else list(output)
            if len(truth64) != len(expected.expected) or not all(
                isinstance(t, torch.Tensor) for t in truth64
            ):
                return None
            truth = [t.to(e.dtype) for t, e in zip(truth64, expected.expected, strict=True)]
            atol, rtol = self.job.atol, self.job.rtol
            reference_off = check_outputs(
                expected.expected, expected.structure, truth, expected.structure, atol=atol, rtol=rtol
            )
            candidate_on = (
                check_outputs(actual, structure, truth, expected.structure, atol=atol, rtol=rtol) is None
            )
        return truth if reference_off is not None and candidate_on else None

    @cached_property
    def _model64(self) -> torch.nn.Module | None:
        """A float64 copy of the reference (made on first need; None if it cannot be made)."""
        try:
            return copy.deepcopy(self.model).to(torch.float64)
        except Exception:
            return None

    def _check_precision(self, actual: list[torch.Tensor], reference: list[torch.Tensor], trial: int) -> None:
        if self.job.max_error_norm is not None:
            measured = [errors(out, ref) for out, ref in zip(actual, reference, strict=True)]
            self._check_precision_of(measured, reference, trial)

    def _check_precision_of(self, measured: list[Errors], reference: list[torch.Tensor], trial: int) -> None:
        """A full-precision output whose error norm only lower-precision arithmetic explains rejects."""
        limit = self.job.max_error_norm
        if limit is None:
            return
        for index, (found, ref) in enumerate(zip(measured, reference, strict=True)):
            if ref.dtype not in _FULL_PRECISION:
                continue
            norm_error = found.norm
            if norm_error > limit:
                raise VerdictReached(
                    Rejected(
                        reason="precision_downgrade",
                        message=f"output {index} has a relative error norm of {norm_error:.2g} (trial {trial}), "
                        f"typical of fp16/bf16/TF32 arithmetic; this {str(ref.dtype).removeprefix('torch.')} "
                        f"task accepts at most {limit:g}. Compute in the task's precision.",
                    )
                )

    def plan_batch(self, run: BatchRun, sets: list[InputSet]) -> None:
        """How many calls a batch holds from now on: enough for the timing policy's window of device work
        (judge/timing.py: by the events, never fewer than the judge's clock asks for), within the memory
        budget and the protocol's limit."""
        calls = len(sets)
        per_set = max(sum(s.in_bytes + 2 * s.out_bytes for s in sets) // calls, 1)
        self.batch_size = calls_per_batch(
            self.job.timing.window_ms,
            run.reply.event_ms,
            run.judge_ms - run.ping_ms,
            calls,
            cap=max(1, min(MAX_BATCH, self._batch_memory() // per_set)),
        )

    def _batch_memory(self) -> int:
        """What a batch's input sets and outputs may take: a quarter of the free device memory."""
        if self.device.type != "cuda":
            return BATCH_MEMORY_BYTES
        return max(BATCH_MEMORY_BYTES, torch.cuda.mem_get_info(self.device)[0] // 4)

    # -- verify ----------------------------------------------------------------------------------

    def verify(self, worker: Worker) -> Verdict:
        """Each trial's inputs run twice, at new addresses and with free memory poisoned differently;
        every output is checked, and the two runs must agree. Then one observed batch under the op
        recorder, if the job asks for the op audit."""
        # Started first: its start-up (an interpreter, torch, a context under the sanitizer) runs beside
        # the trials, which time nothing.
        with self.clock.phase("sanitizer_start"):
            target = start_target(self.job.sanitize, self.device, self.env) if self.job.sanitize else None
        try:
            return self._verify(worker, target)
        finally:
            if isinstance(target, SanitizerTarget):
                target.close()

    def _verify(self, worker: Worker, target: SanitizerTarget | SanitizerReport | None) -> Verdict:
        worst_abs = worst_rel = 0.0
        for trial, seed in enumerate(self.job.seeds):
            distribution = self.job.distributions[trial % len(self.job.distributions)]
            sets = self.input_sets(seed, distribution, 1 if trial == 0 else self.batch_size)
            self.distributions_used.append(sets[0].distribution)
            first: list[list[torch.Tensor]] = []
            first_errors: list[list[Errors] | None] = []
            for attempt, poison in enumerate(POISON_VALUES):
                run = self.run_batch(worker, sets, timeout_s=self._batch_timeout(len(sets)), poison=poison)
                self.check_batch(run, sets, "verify", trial)
                if trial < 2 and not (trial == 1 and attempt == 1):
                    # The same warm-up of the batch size as a profile's first three batches.
                    self.plan_batch(run, sets)
                if attempt == 0:
                    first, first_errors = run.outputs, run.errors
                    continue
                for previous, now, expected in zip(first, run.outputs, sets, strict=True):
                    with self.clock.phase("compare"):
                        disagree = check_outputs(
                            now,
                            expected.structure,
                            previous,
                            expected.structure,
                            atol=self.job.atol,
                            rtol=self.job.rtol,
                        )
                    if disagree:
                        return ContractViolation(
                            check="nondeterministic",
                            trial=trial,
                            message="two calls on the same inputs, with freed memory filled differently, disagree: "
                            "the output depends on memory it did not write",
                        )
            for actual, expected, known in zip(first, sets, first_errors, strict=True):
                # What the first run's comparison measured; against the reference itself where the set was
                # judged against the float64 truth.
                measured = known or [errors(o, r) for o, r in zip(actual, expected.expected, strict=True)]
                for found in measured:
                    worst_abs, worst_rel = max(worst_abs, found.max_abs), max(worst_rel, found.max_rel)
        if self.job.op_audit and (rejected := self.audit_ops(worker)) is not None:
            return rejected
        if target is not None:
            with self.clock.phase("sanitizer"):
                self.sanitizer = self.run_sanitizer(target)
            if isinstance(target, SanitizerTarget) and (left := target.left_running()):
                return Rejected(
                    reason="process_left_running",
                    message=f"under compute-sanitizer the candidate's code left {len(left)} process(es) running "
                    "after its process exited; every process it starts must end before its call returns. "
                    "They were killed.",
                    evidence={"processes_left": float(len(left))},
                )
            if self.sanitizer.status == "errors":
                where = f" ({self.sanitizer.file}:{self.sanitizer.line})" if self.sanitizer.file else ""
                return Rejected(
                    reason="sanitizer",
                    message=f"compute-sanitizer {self.sanitizer.tool} found an error{where}: {self.sanitizer.message}",
                )
        return Passed(trials=len(self.job.seeds), max_abs_error=worst_abs, max_rel_error=worst_rel)

    def run_sanitizer(self, target: SanitizerTarget | SanitizerReport) -> SanitizerReport:
        """One call of the candidate under compute-sanitizer, in a process of its own, on inputs it
        allocates itself, at the smallest size the task allows."""
        if isinstance(target, SanitizerReport):
            return target  # unavailable here, and said so
        payload = {
            "init_args": _to_cpu(self.init_args),
            "state": {k: v.detach().cpu().clone() for k, v in self.state.items()},
            "inputs": smallest_inputs(self.reference, self.size_plan, secrets.randbits(62)),
        }
        return target.run(
            Path(self.job.candidate_dir),
            payload,
            timeout_s=self.job.timeouts.load_s + self.job.timeouts.call_s,
        )

    def audit_ops(self, worker: Worker) -> Rejected | None:
        """One observed batch under the op recorder: PyTorch compute in forward() rejects. (The
        candidate can see the recorder; this is evidence against only.)"""
        sets = self.input_sets(secrets.randbits(62), "task", 1)
        run = self.run_batch(worker, sets, timeout_s=self._batch_timeout(1), observe="ops")
        self.check_batch(run, sets, "verify", len(self.job.seeds))
        forbidden = forbidden_ops(run.reply.ops)
        if not forbidden:
            return None
        return Rejected(
            reason="forbidden_op",
            message=f"forward() dispatched PyTorch compute: {', '.join(forbidden[:8])}",
            findings=[
                AuditFinding(file="model_new.py", line=None, rule="runtime_op", message=f"forward() ran {op}")
                for op in forbidden
            ],
        )

    # -- profile ---------------------------------------------------------------------------------

    def trace_kernels(
        self, worker: Worker, timeout_s: float, timed_median_ms: float
    ) -> tuple[KernelBreakdown, list[str]]:
        """One observed batch under the profiler, after the timed batches (so it disturbs none); its
        outputs are checked like any other. Returns the breakdown and the evidence that was missing.

        The candidate can see the profiler, so what the trace shows can only count against it: kernels
        that are not the workspace's, or more kernel time per call than its timed calls took (it runs
        something else while it is not observed)."""
        sets = self.input_sets(secrets.randbits(62), "task", self.batch_size)
        run = self.run_batch(worker, sets, timeout_s=timeout_s, observe="kernels")
        self.check_batch(run, sets, "timed", 0)
        trace = run.reply.trace or KernelTrace()
        found = breakdown(trace.kernels, self.job.workspace_kernels, self.job.vendor_libraries)
        missing: list[str] = []
        if not trace.kernels:
            missing.append("kernel_trace: the profiler recorded no device activity for the traced call")
        per_call_busy_ms = trace.busy_ns / 1e6 / len(sets)
        if trace.kernels and per_call_busy_ms > OBSERVED_SLOWDOWN_LIMIT * timed_median_ms + 0.005:
            raise VerdictReached(
                Rejected(
                    reason="foreign_work",
                    message=f"under the profiler each call kept the GPU busy {per_call_busy_ms:.4f} ms, but the timed "
                    f"calls took {timed_median_ms:.4f} ms: the implementation runs different work when it is "
                    "observed. Run the same kernels whether or not a profiler is active.",
                )
            )
        return found, missing

    def time_worker(
        self, worker: Worker, timeout_s: float, *, trusted: bool = False, null: Worker | None = None
    ) -> tuple[TimingStats, int]:
        """Time fresh-input batches until the median is stable or the budget ends; every output is
        checked. The judge's garbage collector is paused meanwhile: a collection inside the judge's clock
        would look like hidden work of the candidate's.

        `trusted` (the baselines: the reference in clean workers) records the clocks and never rejects
        on them. Otherwise each timed batch is followed by a batch of `null`, a clean worker (see
        `start_null_worker`), of the same size, output shapes and device time, and the judge's clock is
        judged against that null (judge/timing.py: `hidden_work`). On the CPU there are no events, so no
        clocks to cross-check and no null (the reward is capped at correctness there anyway)."""
        guard = self.gpu_guard if self.gpu_guard is not None and self.gpu_guard.active else None
        try:
            if guard is not None:
                with self.clock.phase("gpu_wait"):
                    guard.wait_until_free()
            with paused_garbage_collection():
                timed = self._time_worker(worker, timeout_s, trusted, null)
            if guard is not None and (found := guard.foreign()):
                raise GpuBusy(
                    f"foreign work ran on the GPU while it was timed ({listing(found)}): the timing was discarded"
                )
        except GpuBusy as busy:  # the machine's, never the candidate's: retried on a fresh judge
            raise HarnessFault(str(busy)) from None
        return timed

    @cached_property
    def gpu_guard(self) -> GpuGuard | None:
        """The check that nobody else works on the timed GPU (judge/gpu_guard.py); None off the GPU."""
        if self.device.type != "cuda":
            return None
        if not getattr(self.workers, "pids_visible", True):
            return (
                None  # container workers: their pids are not the judge's to recognise (gpu_exclusivity says)
            )
        return GpuGuard(self.device_uuid)

    @property
    def gpu_exclusivity(self) -> str:
        """How the judge made sure the GPU was its own while it timed, for the record."""
        if self.device.type != "cuda":
            return "not applicable (no GPU)"
        if self.gpu_guard is None:
            return "unchecked: container workers' processes are not visible to the judge"
        return self.gpu_guard.mode

    def _time_worker(
        self, worker: Worker, timeout_s: float, trusted: bool, null: Worker | None
    ) -> tuple[TimingStats, int]:
        policy = self.job.timing
        samples: list[float] = []
        disagreements = 0
        excess_ms: list[float] = []
        null_excess_ms: list[float] = []
        windows: list[float] = []
        reasons: Counter[str] = Counter()
        if null is not None and not trusted:
            # The null's CUDA context, input mapping and spin rate, before any clock or budget runs.
            self._null_batch(null, 1, 0.0, timeout_s, first=False)
        started = time.monotonic()
        batches = 0
        threads_after_warmup: int | None = None
        out_bytes = 0
        while True:
            warm = batches >= policy.warmup_calls
            checking = warm and batches % CHECK_EVERY == 0
            distribution = "shifted" if checking else "task"
            count = 1 if batches == 0 else self.batch_size
            sets = self.input_sets(secrets.randbits(62), distribution, count)
            out_bytes = sets[0].out_bytes
            run = self.run_batch(worker, sets, timeout_s=self._batch_timeout(count, timeout_s))
            batches += 1
            self.check_batch(run, sets, "timed", batches - 1)
            if not warm:
                self.plan_batch(run, sets)  # the first calls pay lazy set-up: planned again each time
            if not warm or sets[0].distribution != "task":
                continue
            if threads_after_warmup is None:
                # Counted after the first timed batch, so threads the runtime starts lazily for timing
                # itself are in the baseline.
                threads_after_warmup = worker.thread_count()
            reply = run.reply
            measured = reply.event_ms if reply.event_ms is not None else reply.wall_ms
            if measured is None:
                raise VerdictReached(
                    Crashed(phase="call", kind="protocol", message="a timed call returned no time")
                )
            why = None
            if reply.event_ms is not None and reply.wall_ms is not None:
                excess_ms.append(run.judge_ms - reply.wall_ms - run.ping_ms)
                windows.append(reply.event_ms)
                if not trusted:
                    why = clock_problem(reply.event_ms, reply.wall_ms, run.judge_ms, self._sync_ms())
                if null is not None and not trusted:
                    null_excess_ms.append(
                        self._null_batch(
                            null, len(sets), reply.event_ms / len(sets), timeout_s, first=not null_excess_ms
                        )
                    )
            if why is not None:
                disagreements += 1
                reasons[why] += 1
            else:
                samples.append(measured / len(sets))
            undecided = (
                null is not None
                and not trusted
                and len(samples) >= policy.min_samples
                and (so_far := hidden_work(excess_ms, null_excess_ms, windows)) is not None
                and so_far.null_too_noisy
            )
            if timing_done(samples, disagreements, policy, time.monotonic() - started, undecided=undecided):
                break
        stat = hidden_work(excess_ms, null_excess_ms, windows) if not trusted else None
        if stat is not None and stat.null_too_noisy:
            raise HarnessFault(f"the machine is too noisy to judge clocks on: {stat.describe()}")
        if not trusted and (
            disagreements > policy.max_disagreeing_fraction * (len(samples) + disagreements)
            or len(samples) < 3
            or (stat is not None and stat.rejects)
        ):
            raise VerdictReached(_timing_disagreement(disagreements, len(samples), reasons, stat))
        threads_now = worker.thread_count()
        if (
            not trusted
            and threads_after_warmup is not None
            and threads_now is not None
            and threads_now > threads_after_warmup
        ):
            # Counted by the kernel (/proc), not reported by the worker: a thread started while being
            # timed can launch work after the clocks stop.
            raise VerdictReached(
                Rejected(
                    reason="background_thread",
                    message=f"the worker had {threads_after_warmup} threads after its first timed call and "
                    f"{threads_now} after the timed calls",
                )
            )
        return summarize(samples, disagreements, excess_ms, stat, self.batch_size), out_bytes

    def _null_batch(
        self, null: Worker, calls: int, spin_per_call_ms: float, timeout_s: float, *, first: bool
    ) -> float:
        """One batch of the null worker like the candidate's last (calls, output shapes, device time per
        call); returns the judge's excess on it. Its first batch (mapping, first exports) is run twice."""
        inputs = [[self._null_probe] for _ in range(calls)]
        spin = min(max(spin_per_call_ms, 0.0), 1000.0 / calls)
        try:
            for _ in range(NULL_WARMUP_BATCHES + 1 if first else 1):
                run = self.run_batch(
                    null,
                    inputs,
                    timeout_s=self._batch_timeout(calls, timeout_s),
                    echo=self._null_echo,
                    spin_ms=spin,
                )
        except (VerdictReached, TransportError) as failed:
            # The null runs no candidate code: whatever goes wrong in it is the harness's, never a verdict.
            detail = failed.verdict if isinstance(failed, VerdictReached) else failed
            raise HarnessFault(f"the null worker failed: {detail}"[:2000]) from None
        reply = run.reply
        if reply.wall_ms is None:
            raise HarnessFault("the null worker returned no wall clock")
        if reply.event_ms is not None:
            self._null_sync_ms.append(reply.wall_ms - reply.event_ms)
        return run.judge_ms - reply.wall_ms - run.ping_ms

    def _sync_ms(self) -> float:
        """The wall clock's latency beyond the events, from the null's batches so far (capped)."""
        if not self._null_sync_ms:
            return 0.0
        return min(max(statistics.median(self._null_sync_ms), 0.0), MAX_SYNC_MS)

    @cached_property
    def _null_probe(self) -> torch.Tensor:
        return torch.rand(1 << 16, device=self.device)

    @cached_property
    def _null_echo(self) -> list[EchoOutput]:
        """The task's output shapes, which the null's echo allocates and shares like the candidate's."""
        return [
            EchoOutput(shape=list(shape), dtype=dtype_name(dtype))
            for shape, dtype in meta_output_shapes(self.reference)
        ]

    def _batch_timeout(self, calls: int, per_call_s: float | None = None) -> float:
        """A batch of `calls` calls gets the per-call limit for each (a hung kernel is still killed)."""
        return (per_call_s or self.job.timeouts.call_s) * max(1, min(calls, 4))

    def close(self) -> None:
        """Give the job's memory pools back for later evaluations (its workers are closed by now)."""
        if "candidate_memory" in self.__dict__:
            self.candidate_memory.close()
        self.stage.close()
        for pool in self._weight_pools:
            give_back(pool)
        self._weight_pools = []


def _timing_disagreement(
    disagreements: int, samples: int, reasons: Counter[str], stat: HiddenWork | None
) -> Rejected:
    counts = ", ".join(f"{reason}: {count}" for reason, count in reasons.most_common())
    detail = stat.describe() if stat is not None else "no null to compare the judge's clock with"
    evidence = {"discarded_batches": float(disagreements), "kept_batches": float(samples)}
    if stat is not None:
        evidence |= {
            "hidden_fraction": round(stat.hidden_fraction, 6),
            "candidate_excess_ms": round(stat.candidate_excess_ms, 6),
            "null_excess_ms": round(stat.null_excess_ms, 6),
            "standard_error_ms": round(stat.standard_error_ms, 6),
            "window_ms": round(stat.window_ms, 6),
        }
    return Rejected(
        evidence=evidence,
        reason="timing_disagreement",
        message=f"{disagreements} of {samples + disagreements} timed batches reported times their own clocks "
        f"contradict ({counts or 'none singly'}; more than half rejects); {detail}. Time only the work you "
        "launch on the current stream, and finish it before forward() returns.",
    )


def _derived(seed: int, index: int) -> int:
    """The index-th set's seed of a trial: distinct, deterministic, secret as the trial's."""
    return (seed + index * 0x9E3779B97F4A7C15) % (1 << 62) if index else seed


def _scalars(values: list[Any]) -> str:
    scalars = {i: v for i, v in enumerate(values) if not isinstance(v, torch.Tensor)}
    return base64.b64encode(pickle.dumps(scalars)).decode() if scalars else ""


def output_limit_bytes(out_bytes: int) -> int:
    """The most bytes one output's view may cover when the reference's outputs take `out_bytes`:
    room for the hidden sizes (a little larger) and for small outputs, never for their storage."""
    return 4 * out_bytes + (1 << 20)


def _aliases(outputs: list[TensorRef], inputs: list[TensorRef]) -> str | None:
    """An output whose memory is an input's or another output's, from the refs themselves: the same
    CUDA allocation (IPC handle) and overlapping bytes. (CPU tensors cross as fresh files: the worker's
    own check covers those.)"""

    def span(ref: TensorRef) -> tuple[str, int, int] | None:
        if not isinstance(ref.payload, CudaIpcPayload) or not ref.shape or math.prod(ref.shape) == 0:
            return None
        itemsize = _ITEMSIZE.get(ref.dtype, 1)
        extent = 1 + sum((n - 1) * s for n, s in zip(ref.shape, ref.stride, strict=True))
        start = ref.payload.storage_offset_bytes + ref.storage_offset * itemsize
        return ref.payload.handle, start, start + extent * itemsize

    outs = [span(r) for r in outputs]
    ins = [span(r) for r in inputs]
    for i, a in enumerate(outs):
        if a is None:
            continue
        for j, b in enumerate(ins):
            if b is not None and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]:
                return f"output {i} is the memory of input {j}"
        for j, b in enumerate(outs[i + 1 :], start=i + 1):
            if b is not None and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]:
                return f"outputs {i} and {j} share memory"
    return None


_ITEMSIZE = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2}


def _verdict_for(
    problem: Problem, phase: Literal["verify", "timed"], trial: int, distribution: str
) -> ContractViolation | WrongOutput:
    """The same output problem gets the same verdict whether found while verifying or while timing."""
    if problem.check is not None:
        return ContractViolation(check=problem.check, trial=trial, message=problem.message)
    return WrongOutput(
        phase=phase,
        trial=trial,
        distribution=distribution,
        message=problem.message,
        mismatch=problem.mismatch,
    )


def _import_reference(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("cuda_agent_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _to_cpu(values: list[Any]) -> list[Any]:
    return [v.cpu() if isinstance(v, torch.Tensor) else v for v in values]
