"""The trusted side of an evaluation: inputs, reference outputs, comparisons, clocks and verdicts.

Runs in its own process (see __main__). It imports the pristine reference, never the candidate: the
candidate runs in a Worker and only tensors cross, through `transport`.
"""

from __future__ import annotations

import base64
import importlib.util
import pickle
import secrets
import statistics
import time
from collections import Counter
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import torch

from cuda_agent_mcp.evaluator.compare import Problem, check_outputs, errors, unchanged
from cuda_agent_mcp.evaluator.job import EvalJob
from cuda_agent_mcp.evaluator.kernels import breakdown
from cuda_agent_mcp.evaluator.ops import forbidden_ops
from cuda_agent_mcp.evaluator.phases import PhaseClock
from cuda_agent_mcp.evaluator.protocol import (
    CallRequest,
    CallResult,
    Failure,
    Loaded,
    LoadRequest,
    ReleaseRequest,
)
from cuda_agent_mcp.evaluator.refs import TensorRef, release_shm
from cuda_agent_mcp.evaluator.sizes import Size, resized, size_globals
from cuda_agent_mcp.evaluator.timing import (
    disagreement,
    median_rse,
    paused_garbage_collection,
    summarize,
    systematic_excess,
)
from cuda_agent_mcp.evaluator.transport import TransportError, open_ref, share
from cuda_agent_mcp.evaluator.worker_client import ForkedWorkerPool, Worker, WorkerLost, WorkerPool
from cuda_agent_mcp.results import (
    AuditFinding,
    ContractViolation,
    Crashed,
    KernelBreakdown,
    Passed,
    Rejected,
    TimedOut,
    TimingStats,
    Verdict,
    WrongOutput,
)

POISON_VALUES = (float("nan"), -7.77e7)
CALIBRATION_CALLS = 8
MAX_HARNESS_EXCESS_MS = 2.0
_FULL_PRECISION = (torch.float32, torch.float64)


class VerdictReached(Exception):
    """Raised inside the judge to stop at the first failing check, carrying its verdict."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        super().__init__(verdict.status)


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
            self.state = {k: v.detach().contiguous() for k, v in self.model.state_dict().items()}
        self.distributions_used: list[str] = []
        self._persistent: dict[int, tuple[torch.Tensor, TensorRef]] = {}
        self._buffers: list[Any] = []
        self._harness_excess: dict[Worker, float] = {}

    # -- inputs and reference ------------------------------------------------------------------

    @cached_property
    def hidden_sizes(self) -> dict[str, Size]:
        """The reference's size globals for the resized trial (evaluator/sizes.py); worked out on first
        use, so profile and baseline jobs never pay for it."""
        return size_globals(self.reference)

    def make_inputs(self, seed: int, distribution: str) -> list[Any]:
        with self.clock.phase("inputs"):
            return self._make_inputs(seed, distribution)

    def _make_inputs(self, seed: int, distribution: str) -> list[Any]:
        torch.manual_seed(seed)
        sizes = self.hidden_sizes if distribution == "resized" else {}
        with torch.device(self.device), resized(self.reference, sizes):
            inputs = [
                x.to(self.device) if isinstance(x, torch.Tensor) else x for x in self.reference.get_inputs()
            ]
        if distribution == "shifted":
            # Centre and widen every float input: signs flip, so kernels that assume the task's
            # own range (e.g. a ReLU skipped on non-negative inputs) are found out.
            inputs = [
                (x - x.mean()) * 4 if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                for x in inputs
            ]
        return inputs

    def staged(self, fresh: list[Any]) -> list[Any]:
        """`fresh` written into the judge's persistent input buffers (made on first use, and again if the
        shapes change). The worker maps them once, so calls carry no mapping cost, and a cache keyed by
        pointer sees the same pointers holding new contents."""

        def same(buffer: Any, value: Any) -> bool:
            if isinstance(value, torch.Tensor):
                return (
                    isinstance(buffer, torch.Tensor)
                    and buffer.shape == value.shape
                    and buffer.dtype == value.dtype
                    and buffer.stride() == value.stride()
                )
            return not isinstance(buffer, torch.Tensor)

        if len(self._buffers) != len(fresh) or not all(map(same, self._buffers, fresh)):
            self._persistent.clear()
            self._buffers = [x.clone() if isinstance(x, torch.Tensor) else x for x in fresh]
            return list(self._buffers)
        staged = []
        for buffer, value in zip(self._buffers, fresh, strict=True):
            if isinstance(value, torch.Tensor):
                buffer.copy_(value)
                staged.append(buffer)
            else:
                staged.append(value)
        return staged

    def reference_outputs(self, inputs: list[Any]) -> tuple[str, list[torch.Tensor]]:
        with self.clock.phase("reference"):
            clones = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            with torch.no_grad():
                output = self.model(*clones)
        if isinstance(output, torch.Tensor):
            return "tensor", [output]
        return ("tuple" if isinstance(output, tuple) else "list"), list(output)

    # -- talking to workers ----------------------------------------------------------------------

    def start_worker(
        self,
        directory: Path,
        module: str,
        class_name: str,
        *,
        compile_model: bool = False,
        for_timing: bool = False,
    ) -> Worker:
        """Load a model into a fresh worker (forked: its interpreter and torch import are paid). A worker
        that fails to load is closed here: the caller never gets it. A worker `for_timing` first
        calibrates the harness's own cost (see `calibrate`)."""
        with self.clock.phase("worker_start"):
            worker = self.workers.take()
        try:
            if for_timing:
                self._harness_excess[worker] = self.calibrate(worker, self.job.timeouts.call_s)
            return self._load(worker, directory, module, class_name, compile_model)
        except BaseException:
            worker.close()
            raise

    def _load(
        self, worker: Worker, directory: Path, module: str, class_name: str, compile_model: bool
    ) -> Worker:
        # Whatever is loaded from the candidate's directory runs in the filesystem view.
        confine = Path(directory) == Path(self.job.candidate_dir)
        directory = worker.stage(directory)
        state = {k: share(v) for k, v in self.state.items()}
        request = LoadRequest(
            directory=str(directory),
            module=module,
            class_name=class_name,
            init_args_pickle=base64.b64encode(pickle.dumps(_to_cpu(self.init_args))).decode(),
            state_dict=state,
            compile_model=compile_model,
            device=self.job.device,
            confine_filesystem=confine,
        )
        try:
            with self.clock.phase("worker_load"):
                reply = self._ask(worker, request, "load", self.job.timeouts.load_s)
        finally:
            for ref in state.values():
                release_shm(ref)
        if not isinstance(reply, Loaded):
            raise VerdictReached(
                Crashed(phase="load", kind="protocol", message=f"unexpected reply {reply.op}")
            )
        return worker

    def call(
        self,
        worker: Worker,
        inputs: list[Any],
        *,
        timed: bool,
        poison: float | None,
        out_bytes: int,
        timeout_s: float,
        persistent: bool = False,
        trace_kernels: bool = False,
    ) -> tuple[CallResult, list[torch.Tensor], float, list[Any]]:
        """One call. Returns the reply, private copies of the outputs, the judge's clock in ms, and the
        inputs as the worker saw them (the same memory on the GPU; the shared copies on the CPU)."""
        refs = [self._share(x, persistent) if isinstance(x, torch.Tensor) else None for x in inputs]
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the worker reads these bytes from another context
        seen = [
            open_ref(ref, max_bytes=1 << 40) if ref is not None and not x.is_cuda else x
            for x, ref in zip(inputs, refs, strict=True)
        ]
        scalars = {i: x for i, x in enumerate(inputs) if not isinstance(x, torch.Tensor)}
        request = CallRequest(
            inputs=refs,
            scalars_pickle=base64.b64encode(pickle.dumps(scalars)).decode() if scalars else "",
            timed=timed,
            poison=poison,
            poison_bytes=2 * out_bytes if poison is not None else 0,
            record_ops=self.job.op_audit and not timed,
            trace_kernels=trace_kernels,
        )
        started = time.perf_counter()
        reply = self._ask(worker, request, "call", timeout_s)
        judge_ms = (time.perf_counter() - started) * 1e3
        self.clock.add("candidate_calls", judge_ms / 1e3)
        if not isinstance(reply, CallResult):
            raise VerdictReached(
                Crashed(phase="call", kind="protocol", message=f"unexpected reply {reply.op}")
            )
        try:
            with self.clock.phase("output_copy"):
                limit = 4 * out_bytes + (1 << 20)
                copies = [open_ref(r, max_bytes=limit).clone() for r in reply.outputs]
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
        except TransportError as exc:
            raise VerdictReached(ContractViolation(check="transport", trial=0, message=str(exc))) from None
        with self.clock.phase("release"):
            self._ask(worker, ReleaseRequest(), "call", timeout_s)
        for ref in refs:
            if ref is not None and not persistent:
                release_shm(ref)
        return reply, copies, judge_ms, seen

    def _share(self, tensor: torch.Tensor, persistent: bool) -> TensorRef:
        """Share a tensor; persistent buffers are shared once, so the worker sees the same reference
        (and keeps its mapping) on every call."""
        if not persistent or not tensor.is_cuda:
            return share(tensor)
        key = id(tensor)
        if key not in self._persistent:
            self._persistent[key] = (tensor, share(tensor))
        return self._persistent[key][1]

    def _round_trip_ms(self, worker: Worker, timeout_s: float) -> float:
        """The judge's clock around a request that does nothing (a release): the protocol's own cost."""
        started = time.perf_counter()
        self._ask(worker, ReleaseRequest(), "call", timeout_s)
        return (time.perf_counter() - started) * 1e3

    def _ask(self, worker: Worker, request: Any, phase: str, timeout_s: float) -> Any:
        try:
            reply = worker.request(request, timeout_s=timeout_s)
        except WorkerLost as lost:
            if lost.reason == "timeout":
                raise VerdictReached(TimedOut(phase=phase, limit_s=timeout_s)) from None  # type: ignore[arg-type]
            kind = "process_exited" if lost.reason == "exited" else "protocol"
            raise VerdictReached(
                Crashed(phase=phase, kind=kind, message=lost.detail, log_tail=lost.log_tail)  # type: ignore[arg-type]
            ) from None
        if isinstance(reply, Failure):
            raise VerdictReached(
                Crashed(phase=reply.phase, kind=reply.kind, message=reply.message, log_tail=worker.log_tail())
            )
        return reply

    # -- verify ----------------------------------------------------------------------------------

    def trial_inputs(self, seed: int, distribution: str) -> tuple[str, list[Any], str, list[torch.Tensor]]:
        """Inputs of one trial and the reference's outputs on them. A distribution the reference cannot
        use (non-finite outputs on shifted inputs, an error at other sizes, a task without size globals)
        falls back to the task's own."""
        if distribution == "resized" and not self.hidden_sizes:
            distribution = "task"
        inputs = self.staged(self.make_inputs(seed, distribution))
        try:
            structure, expected = self.reference_outputs(inputs)
        except Exception:
            if distribution != "resized":
                raise
            return self.trial_inputs(seed, "task")
        if distribution != "task" and not all(
            bool(torch.isfinite(e).all()) for e in expected if e.is_floating_point()
        ):
            return self.trial_inputs(seed, "task")
        return distribution, inputs, structure, expected

    def verify(self, worker: Worker) -> Verdict:
        worst_abs = worst_rel = 0.0
        for trial, seed in enumerate(self.job.seeds):
            distribution, inputs, structure, expected = self.trial_inputs(
                seed, self.job.distributions[trial % len(self.job.distributions)]
            )
            self.distributions_used.append(distribution)
            pristine = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            out_bytes = sum(e.numel() * e.element_size() for e in expected)
            first: list[torch.Tensor] = []
            for attempt, poison in enumerate(POISON_VALUES):
                reply, actual, _, seen = self.call(
                    worker,
                    inputs,
                    timed=False,
                    poison=poison,
                    out_bytes=out_bytes,
                    timeout_s=self.job.timeouts.call_s,
                    persistent=True,
                )
                if forbidden := forbidden_ops(reply.ops):
                    return Rejected(
                        reason="forbidden_op",
                        message=f"forward() dispatched PyTorch compute: {', '.join(forbidden[:8])}",
                        findings=[
                            AuditFinding(
                                file="model_new.py",
                                line=None,
                                rule="runtime_op",
                                message=f"forward() ran {op}",
                            )
                            for op in forbidden
                        ],
                    )
                with self.clock.phase("compare"):
                    problem = check_outputs(
                        actual, reply.structure, expected, structure, atol=self.job.atol, rtol=self.job.rtol
                    )
                if problem is not None:
                    return _verdict_for(problem, "verify", trial, distribution)
                with self.clock.phase("compare"):
                    mutated = [
                        index
                        for index, (before, after) in enumerate(zip(pristine, seen, strict=True))
                        if isinstance(before, torch.Tensor) and not unchanged(before, after)
                    ]
                if mutated:
                    return ContractViolation(
                        check="input_mutated",
                        trial=trial,
                        message=f"input {mutated[0]} was modified by forward()",
                    )
                if attempt == 0:
                    first = actual
                elif check_outputs(
                    actual, reply.structure, first, structure, atol=self.job.atol, rtol=self.job.rtol
                ):
                    return ContractViolation(
                        check="nondeterministic",
                        trial=trial,
                        message="two calls on the same inputs, with freed memory filled differently, disagree: "
                        "the output depends on memory it did not write",
                    )
            for index, (out, ref) in enumerate(zip(first, expected, strict=True)):
                abs_error, rel_error, norm_error = errors(out, ref)
                worst_abs, worst_rel = max(worst_abs, abs_error), max(worst_rel, rel_error)
                limit = self.job.max_error_norm
                if limit is not None and ref.dtype in _FULL_PRECISION and norm_error > limit:
                    return Rejected(
                        reason="precision_downgrade",
                        message=f"output {index} has a relative error norm of {norm_error:.2g} (trial {trial}), "
                        f"typical of fp16/bf16/TF32 arithmetic; this {str(ref.dtype).removeprefix('torch.')} "
                        f"task accepts at most {limit:g}. Compute in the task's precision.",
                    )
        return Passed(trials=len(self.job.seeds), max_abs_error=worst_abs, max_rel_error=worst_rel)

    # -- profile ---------------------------------------------------------------------------------

    def calibrate(self, worker: Worker, timeout_s: float) -> float:
        """How far the judge's clock runs beyond the worker's wall clock and the round trip when no
        candidate code is in the worker (timed calls of its built-in echo model, before loading): the
        harness's own cost, which the clock rules then allow for. Without it, honest kernels and the
        baselines on the H200 ran ~0.45 ms per call beyond, right at the rules' fixed margin
        (benchmarks/results/timing_excess_h200_032c830.json). Capped, so a machine noisy enough to
        calibrate high cannot open a large hiding place."""
        excess: list[float] = []
        inputs = self.staged(self.make_inputs(secrets.randbits(62), "task"))
        for call in range(CALIBRATION_CALLS):
            reply, _, judge_ms, _ = self.call(
                worker,
                inputs,
                timed=True,
                poison=None,
                out_bytes=4 << 20,
                timeout_s=timeout_s,
                persistent=True,
            )
            ping_ms = self._round_trip_ms(worker, timeout_s)
            if call >= 2 and reply.wall_ms is not None:  # the first calls map the inputs
                excess.append(judge_ms - reply.wall_ms - ping_ms)
        return min(max(statistics.median(excess), 0.0), MAX_HARNESS_EXCESS_MS) if excess else 0.0

    def trace_kernels(self, worker: Worker, timeout_s: float) -> KernelBreakdown:
        """One call on fresh inputs under the profiler (after the timed calls, so it disturbs none);
        its outputs are checked like any other call's."""
        inputs = self.staged(self.make_inputs(secrets.randbits(62), "task"))
        structure, expected = self.reference_outputs(inputs)
        out_bytes = sum(e.numel() * e.element_size() for e in expected)
        reply, actual, _, _ = self.call(
            worker,
            inputs,
            timed=False,
            poison=None,
            out_bytes=out_bytes,
            timeout_s=timeout_s,
            persistent=True,
            trace_kernels=True,
        )
        with self.clock.phase("compare"):
            problem = check_outputs(
                actual, reply.structure, expected, structure, atol=self.job.atol, rtol=self.job.rtol
            )
        if problem is not None:
            raise VerdictReached(_verdict_for(problem, "timed", 0, "task"))
        return breakdown(reply.kernels, self.job.workspace_kernels, self.job.vendor_libraries)

    def time_worker(self, worker: Worker, timeout_s: float) -> tuple[TimingStats, int]:
        """Time fresh-input calls until the median is stable or the budget ends; every output is checked.
        The judge's garbage collector is paused meanwhile: a collection inside the judge's clock would
        look like hidden work of the candidate's."""
        with paused_garbage_collection():
            return self._time_worker(worker, timeout_s, self._harness_excess.get(worker, 0.0))

    def _time_worker(self, worker: Worker, timeout_s: float, harness_ms: float) -> tuple[TimingStats, int]:
        policy = self.job.timing
        samples: list[float] = []
        disagreements = 0
        round_trips: list[float] = []
        excess_ms: list[float] = []
        reasons: Counter[str] = Counter()
        contradicted: list[tuple[float, float, float, float]] = []
        started = time.monotonic()
        calls = 0
        threads_after_warmup: int | None = None
        while True:
            # Fresh content every call, written into the same shared buffers: the worker maps them
            # once, so the judge's clock carries no mapping cost, and a cache keyed by pointer fails.
            inputs = self.staged(self.make_inputs(secrets.randbits(62), "task"))
            structure, expected = self.reference_outputs(inputs)
            out_bytes = sum(e.numel() * e.element_size() for e in expected)
            timed = calls >= policy.warmup_calls
            reply, actual, judge_ms, _ = self.call(
                worker,
                inputs,
                timed=timed,
                poison=None,
                out_bytes=out_bytes,
                timeout_s=timeout_s,
                persistent=True,
            )
            calls += 1
            with self.clock.phase("compare"):
                problem = check_outputs(
                    actual, reply.structure, expected, structure, atol=self.job.atol, rtol=self.job.rtol
                )
            if problem is not None:
                raise VerdictReached(_verdict_for(problem, "timed", calls - 1, "task"))
            round_trips.append(self._round_trip_ms(worker, timeout_s))
            if not timed:
                continue
            if threads_after_warmup is None:
                # Counted after the first timed call, so threads the runtime starts lazily for timing
                # itself are in the baseline.
                threads_after_warmup = worker.thread_count()
            measured = reply.event_ms if reply.event_ms is not None else reply.wall_ms
            if measured is None:
                raise VerdictReached(
                    Crashed(phase="call", kind="protocol", message="a timed call returned no time")
                )
            overhead = sorted(round_trips)[len(round_trips) // 2] + harness_ms
            if reply.event_ms is not None and reply.wall_ms is not None:
                excess_ms.append(judge_ms - reply.wall_ms - overhead)
            why = (
                disagreement(reply.event_ms, reply.wall_ms, judge_ms, overhead)
                if reply.event_ms is not None
                else None
            )
            if why is not None:
                disagreements += 1
                reasons[why] += 1
                contradicted.append((reply.event_ms or 0.0, reply.wall_ms or 0.0, judge_ms, overhead))
            else:
                samples.append(measured)
            done = len(samples) + disagreements
            enough = len(samples) >= policy.min_samples and (
                median_rse(samples) < policy.target_rse or time.monotonic() - started > policy.budget_s
            )
            if enough or done >= policy.max_samples:
                break
        if (
            disagreements > policy.max_disagreeing_fraction * (len(samples) + disagreements)
            or len(samples) < 3
            or systematic_excess(excess_ms, samples)
        ):
            raise VerdictReached(
                Rejected(
                    reason="timing_disagreement",
                    message=f"{disagreements} of {len(samples) + disagreements} timed calls reported device times "
                    "that the judge's own clock around the call contradicts"
                    + _contradictions(reasons, contradicted),
                )
            )
        threads_now = worker.thread_count()
        if (
            threads_after_warmup is not None
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
        return summarize(samples, disagreements, excess_ms, harness_ms), sum(
            e.numel() * e.element_size() for e in expected
        )


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


def _contradictions(reasons: Counter[str], calls: list[tuple[float, float, float, float]]) -> str:
    """Which clocks disagreed and by how much (medians over the contradicted calls), for the message."""
    if not calls:
        return ""
    event, wall, judge, overhead = (statistics.median(values) for values in zip(*calls, strict=True))
    counts = ", ".join(f"{reason}: {count}" for reason, count in reasons.most_common())
    return (
        f" ({counts}; medians: events {event:.4f} ms, worker wall {wall:.4f} ms, judge {judge:.4f} ms, "
        f"round-trip overhead {overhead:.4f} ms)"
    )
