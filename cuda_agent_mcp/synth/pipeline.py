"""`synthesize`: compose candidates, filter them, write the dataset (docs/synthesis.md).

Composition and the static filters run in order in this process (cheap, and deterministic on resume);
the running filters run in chunks on `workers` isolated processes at once; the judge's task audit, when
asked, runs on each task that passed everything else. Every decision is appended to the run directory
as it is made, so an interrupted run carries on where it stopped.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.executors import Executor, SandboxedExecutor, SandboxPolicy
from cuda_agent_mcp.synth.candidate import Candidate
from cuda_agent_mcp.synth.checks import CheckSettings, ChunkItem, check_chunk
from cuda_agent_mcp.synth.compose import compose_programmatic
from cuda_agent_mcp.synth.dataset_out import write_dataset
from cuda_agent_mcp.synth.filters import FILTER_ORDER, FilterName, FilterOutcome
from cuda_agent_mcp.synth.gpu_executor import GpuCheckExecutor
from cuda_agent_mcp.synth.rundir import CandidateOutcome, RunDirectory
from cuda_agent_mcp.synth.settings import SynthesisSettings
from cuda_agent_mcp.synth.similarity import ReferenceIndex, fingerprint, kernelbench_programs
from cuda_agent_mcp.synth.sizes import guessed_cpu_sizes, with_sizes
from cuda_agent_mcp.synth.static_filters import StaticFilters
from cuda_agent_mcp.synth.task_audit import audit_candidate
from cuda_agent_mcp.tools.gpu import gpu_specs

Phase = Literal["compose", "static", "check", "write"]


class SynthesisProgress(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    phase: Phase
    done: int
    total: int
    accepted: int = 0
    dropped: dict[str, int] = Field(default_factory=dict, description="candidates each filter dropped so far")


class FilterCount(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: FilterName
    entered: int
    passed: int
    dropped: int
    skipped: int
    top_reasons: list[str] = Field(default_factory=list, description="the commonest reasons it dropped one")


class SynthesisReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    out: str
    settings: SynthesisSettings
    candidates: int
    accepted: int
    resumed: int = Field(description="candidates already decided by an earlier run in this directory")
    filters: list[FilterCount]
    seconds: dict[str, float] = Field(description="wall time per phase of this run, and total")
    seconds_per_candidate: float
    seconds_per_accepted: float | None
    files: dict[str, str | None]
    notes: list[str] = Field(default_factory=list)


ProgressCallback = Callable[[SynthesisProgress], None]


async def synthesize(
    settings: SynthesisSettings,
    out: Path,
    *,
    workers: int | None = None,
    gpus: Sequence[str] = (),
    executor: Executor | None = None,
    progress: ProgressCallback | None = None,
    stop_after_s: float | None = None,
) -> SynthesisReport:
    """Run (or resume) a synthesis into `out`. `gpus`: the GPU indices the checks may use (device cuda).
    `stop_after_s`: start no chunk after this many seconds (the rest waits for the next run, which
    resumes); the report counts what was decided."""
    started = time.monotonic()
    seconds: dict[str, float] = {}
    run = RunDirectory(out)
    run.open(settings)
    notify = progress or (lambda _: None)

    # 1. compose (what an earlier run composed is kept: an LLM is never asked twice)
    clock = time.monotonic()
    candidates = run.candidates()
    missing = [i for i in range(settings.count) if i not in candidates]

    def keep(made: Candidate) -> None:
        run.add_candidate(made)
        candidates[made.index] = made

    await _compose(settings, missing, notify, keep, already=len(candidates))
    seconds["compose"] = time.monotonic() - clock

    # 2. the static filters, in order
    clock = time.monotonic()
    references = _references(settings)
    static = StaticFilters(references, threshold=settings.near_threshold)
    static_outcomes = {}
    for number, index in enumerate(range(settings.count), start=1):
        static_outcomes[index] = _with_compose_error(candidates[index], static.check(candidates[index]))
        if number % 200 == 0 or number == settings.count:
            notify(SynthesisProgress(phase="static", done=number, total=settings.count))
    seconds["static"] = time.monotonic() - clock

    # 3. the running filters, in parallel; decisions appended as they come
    clock = time.monotonic()
    decided = run.outcomes()
    resumed = len(decided)
    tally = _Tally(decided.values())
    for index, outcomes in static_outcomes.items():
        if index not in decided and any(o.passed is False for o in outcomes):
            decision = CandidateOutcome(index=index, accepted=False, outcomes=outcomes)
            run.add_outcome(decision)
            decided[index] = decision
            tally.add(decision)
    to_check = [i for i in range(settings.count) if i not in decided]
    notify(tally.progress("check", settings.count))
    checker = _Checker(settings, run, candidates, static_outcomes, executor, gpus, workers)
    checker.deadline = started + stop_after_s if stop_after_s is not None else None
    async for decision in checker.decide(to_check):
        decided[decision.index] = decision
        tally.add(decision)
        notify(tally.progress("check", settings.count))
    seconds["check"] = time.monotonic() - clock

    # 4. the dataset
    clock = time.monotonic()
    notify(tally.progress("write", settings.count))
    files = write_dataset(run, settings, candidates, decided)
    seconds["write"] = time.monotonic() - clock
    seconds["total"] = time.monotonic() - started
    report = _report(settings, out, candidates, decided, resumed, seconds, files)
    if len(decided) < settings.count:
        note = f"stopped early: {len(decided)} of {settings.count} candidates decided; run again to continue"
        report = report.model_copy(update={"notes": [*report.notes, note]})
    run.write_json("report.json", report.model_dump(mode="json"))
    return report


async def _compose(
    settings: SynthesisSettings,
    indices: list[int],
    notify: ProgressCallback,
    keep: Callable[[Candidate], None],
    *,
    already: int,
) -> None:
    """Compose the missing indices; each candidate is kept (written down) as soon as it is made."""

    def composed(done: int) -> None:
        if done % 200 == 0 or done == len(indices) or settings.composer == "llm":
            notify(SynthesisProgress(phase="compose", done=already + done, total=settings.count))

    if settings.composer == "llm":
        from cuda_agent_mcp.synth.llm_compose import compose_with_llm

        await compose_with_llm(settings, indices, keep=keep, progress=composed)
        return
    for number, index in enumerate(indices, start=1):
        try:
            keep(compose_programmatic(settings.seed, index, max_ops=settings.max_ops, dtype=settings.dtype))
        except Exception as exc:  # a registry bug costs one candidate, with its reason
            keep(_unmade(settings, index, f"{type(exc).__name__}: {exc}"))
        composed(number)


def _unmade(settings: SynthesisSettings, index: int, reason: str) -> Candidate:
    return Candidate(
        index=index, composer=settings.composer, seed=settings.seed, code="", ops=(),
        notes={"compose_error": reason[:500]},
    )  # fmt: skip


def _with_compose_error(candidate: Candidate, outcomes: list[FilterOutcome]) -> list[FilterOutcome]:
    error = candidate.notes.get("compose_error")
    if error:
        return [FilterOutcome(name="parse", passed=False, reason=f"the composer failed: {error}")]
    return outcomes


def _references(settings: SynthesisSettings) -> ReferenceIndex | None:
    if not settings.against:
        return None
    index = ReferenceIndex()
    for root in settings.against:
        for ref_id, code in kernelbench_programs(Path(root)):
            if (program := fingerprint(code)) is not None:
                index.add(ref_id, program)
    if not len(index):
        raise UsageError(f"no KernelBench programs (level*/*.py) under {', '.join(settings.against)}")
    return index


class _Checker:
    """The running filters over the static survivors: chunks on parallel isolated processes."""

    def __init__(
        self,
        settings: SynthesisSettings,
        run: RunDirectory,
        candidates: dict[int, Candidate],
        static_outcomes: dict[int, list[FilterOutcome]],
        executor: Executor | None,
        gpus: Sequence[str],
        workers: int | None,
    ) -> None:
        self.settings = settings
        self.run = run
        self.candidates = candidates
        self.static_outcomes = static_outcomes
        self.gpus = list(gpus) or ["0"]
        cpus = os.cpu_count() or 1
        self.workers = workers or (min(8, cpus) if settings.device == "cuda" else cpus)
        self.check = CheckSettings(
            device=settings.device,
            runtime=settings.runtime,
            compile=settings.compile,
            seed=settings.seed,
            timeout_s=settings.timeout_s,
            host_memory_bytes=settings.host_memory_bytes,
            gpu_memory_bytes=self._gpu_share(settings.gpu_memory_bytes),
            threads=max(1, cpus // self.workers) if settings.device == "cpu" else 2,
        )
        # A GPU run starts its checks as the judge starts (CUDA does not initialise in the sandbox's view).
        self.executor = executor or (
            GpuCheckExecutor()
            if settings.device == "cuda"
            else SandboxedExecutor(SandboxPolicy(max_processes=512))
        )
        self.audit_lock = anyio.Lock()
        self.deadline: float | None = None

    def _gpu_share(self, cap: int) -> int:
        """At most `cap` per candidate, and no more than the workers sharing a GPU leave each other."""
        if self.settings.device != "cuda":
            return cap
        memory = [g.memory_mib for g in gpu_specs().gpus if g.memory_mib]
        if not memory:
            return cap
        sharing = max(1, -(-self.workers // len(self.gpus)))
        return min(cap, int(min(memory) * 1024**2 * 0.9 / sharing))

    def chunk_size(self) -> int:
        if not self.settings.runtime:
            return 32
        return 4 if self.settings.device == "cuda" else 8

    async def decide(self, indices: list[int]):  # type: ignore[no-untyped-def]  # an async generator
        size = self.chunk_size()
        # Small chunks spread over the workers; never more chunks in flight than workers.
        chunks = [indices[i : i + size] for i in range(0, len(indices), size)]
        send, receive = anyio.create_memory_object_stream[CandidateOutcome](max_buffer_size=len(indices) + 1)
        limiter = anyio.CapacityLimiter(self.workers)
        with tempfile.TemporaryDirectory(prefix="cuda-agent-synth-") as scratch_name:
            scratch = Path(scratch_name)
            os.chmod(scratch, 0o755)
            locks = {gpu: scratch / f"gpu{gpu}.lock" for gpu in self.gpus}
            for path in locks.values():
                path.touch(mode=0o644)

            async def one(number: int, chunk: list[int]) -> None:
                gpu = self.gpus[number % len(self.gpus)]
                async with limiter:
                    if self.deadline is not None and time.monotonic() > self.deadline:
                        return  # left for the next run
                    for decision in await self._decide_chunk(chunk, scratch, locks[gpu], gpu):
                        self.run.add_outcome(decision)
                        await send.send(decision)

            async with anyio.create_task_group() as group:

                async def close_when_done() -> None:
                    async with anyio.create_task_group() as inner:
                        for number, chunk in enumerate(chunks):
                            inner.start_soon(one, number, chunk)
                    await send.aclose()

                group.start_soon(close_when_done)
                async with receive:
                    async for decision in receive:
                        yield decision

    async def _decide_chunk(
        self, chunk: list[int], scratch: Path, lock: Path, gpu: str
    ) -> list[CandidateOutcome]:
        items, sizes = [], {}
        for index in chunk:
            candidate = self.candidates[index]
            code = candidate.code
            if self.settings.device == "cpu" and self.settings.runtime:
                sizes[index] = candidate.cpu_sizes or guessed_cpu_sizes(code)
                try:
                    code = with_sizes(code, sizes[index])
                except (ValueError, SyntaxError):
                    sizes[index] = {}
            probe_code = candidate.code if code != candidate.code else None
            items.append(ChunkItem(index=index, code=code, probe_code=probe_code))
        started = time.monotonic()
        ran = await check_chunk(
            self.executor,
            items,
            self.check,
            scratch=scratch,
            lock_path=lock if self.settings.device == "cuda" else None,
            gpu=gpu,
        )
        each = (time.monotonic() - started) / max(1, len(chunk))
        decisions = []
        for index in chunk:
            outcomes = [*self.static_outcomes[index], *self._completed(ran[index])]
            if self.settings.task_audit and not any(o.passed is False for o in outcomes):
                async with (
                    self.audit_lock
                ):  # one judge at a time: the audit times nothing, but shares the GPU
                    outcomes = [o for o in outcomes if o.name != "task_audit"]
                    outcomes.append(
                        await audit_candidate(
                            self.candidates[index], items[chunk.index(index)].code, self.settings
                        )
                    )
            accepted = not any(o.passed is False for o in outcomes)
            decisions.append(
                CandidateOutcome(
                    index=index,
                    accepted=accepted,
                    outcomes=outcomes,
                    ran_at_sizes=sizes.get(index, {}),
                    seconds=round(each, 3),
                )
            )
        return decisions

    def _completed(self, ran: list[FilterOutcome]) -> list[FilterOutcome]:
        """The child's outcomes, with the window applied and every filter it did not run said as skipped."""
        outcomes = [self._windowed(o) if o.name == "runtime" else o for o in ran]
        if any(o.passed is False for o in outcomes):
            return outcomes
        done = {o.name for o in outcomes}
        for name in FILTER_ORDER[FILTER_ORDER.index("eager") :]:
            if name not in done:
                outcomes.append(FilterOutcome(name=name, passed=None, reason=self._why_skipped(name)))
        return outcomes

    def _windowed(self, outcome: FilterOutcome) -> FilterOutcome:
        low, high = self.settings.window_ms
        eager = outcome.measured.get("eager_ms")
        if not outcome.passed or not isinstance(eager, int | float):
            return outcome
        if low <= eager <= high:
            return outcome
        reason = f"eager takes {eager:.3g} ms on the GPU, outside the {low:g}-{high:g} ms window"
        return outcome.model_copy(update={"passed": False, "reason": reason})

    def _why_skipped(self, name: FilterName) -> str:
        if not self.settings.runtime:
            return "not run (--no-runtime: the static filters and the meta probe only)"
        if name == "compile":
            return "off (--compile runs it: about 15 s a candidate on the CPU)"
        if name == "runtime":
            return "the window is measured on the GPU only; this run had none"
        if name == "task_audit":
            return "not asked (--task-audit: the judge's null candidates through verify, about 5 s a task at CPU sizes)"
        return "not run"


class _Tally:
    def __init__(self, decided: object) -> None:
        self.done = 0
        self.accepted = 0
        self.dropped: dict[str, int] = {}
        for decision in decided:  # type: ignore[attr-defined]
            self.add(decision)

    def add(self, decision: CandidateOutcome) -> None:
        self.done += 1
        self.accepted += decision.accepted
        refusal = next((o for o in decision.outcomes if o.passed is False), None)
        if refusal is not None:
            self.dropped[refusal.name] = self.dropped.get(refusal.name, 0) + 1

    def progress(self, phase: Phase, total: int) -> SynthesisProgress:
        return SynthesisProgress(
            phase=phase, done=self.done, total=total, accepted=self.accepted, dropped=dict(self.dropped)
        )


def _report(
    settings: SynthesisSettings,
    out: Path,
    candidates: dict[int, Candidate],
    decided: dict[int, CandidateOutcome],
    resumed: int,
    seconds: dict[str, float],
    files: dict[str, str | None],
) -> SynthesisReport:
    counts = []
    for name in FILTER_ORDER:
        entered = passed = dropped = skipped = 0
        reasons: dict[str, int] = {}
        for decision in decided.values():
            outcome = next((o for o in decision.outcomes if o.name == name), None)
            if outcome is None:
                continue
            entered += 1
            if outcome.passed is None:
                skipped += 1
            elif outcome.passed:
                passed += 1
            else:
                dropped += 1
                key = _reason_kind(outcome.reason)
                reasons[key] = reasons.get(key, 0) + 1
        top = [f"{n} x {r}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:3]]
        counts.append(
            FilterCount(
                name=name, entered=entered, passed=passed, dropped=dropped, skipped=skipped, top_reasons=top
            )
        )
    accepted = sum(d.accepted for d in decided.values())
    notes = []
    if not settings.against:
        notes.append("not decontaminated against KernelBench (no tree given)")
    if not settings.runtime:
        notes.append("the programs were not run (--no-runtime): the tasks passed the static filters only")
    elif settings.device == "cpu":
        notes.append(
            "run on the CPU at smaller sizes (each row's provenance names them); the GPU window was not measured"
        )
    checked = max(1, len(decided) - resumed)
    return SynthesisReport(
        out=str(out),
        settings=settings,
        candidates=len(candidates),
        accepted=accepted,
        resumed=resumed,
        filters=counts,
        seconds={k: round(v, 2) for k, v in seconds.items()},
        seconds_per_candidate=round(seconds["total"] / checked, 3),
        seconds_per_accepted=round(seconds["total"] / accepted, 3) if accepted else None,
        files=files,
        notes=notes,
    )


def _reason_kind(reason: str) -> str:
    """A reason without what follows its first colon and with its numbers as N, so alike reasons count
    together ("near candidate 50" and "near candidate 183" are one kind)."""
    head = reason.split(":", 1)[0]
    return re.sub(r"\d+(\.\d+)?", "N", head)[:80]
