"""The GPU acceptance run's corpus part: honest kernels must pass, forgeries must be rejected (issue 23).

    python benchmarks/acceptance.py --kernelbench DIR --out acceptance.json [--corpus sample|all]
    python benchmarks/acceptance.py --kernelbench DIR --out cupy.json --language cupy   (issue 28)
    python benchmarks/acceptance.py --kernelbench DIR --out triton.json --language triton

Honest: the fixtures of tests/fixtures/honest and the KernelBench workspaces of benchmarks/suites (their
references from `--kernelbench`), built in parallel, then verified and profiled one at a time through the
tool layer with one warm judge pool (baselines measured for the tasks in MEASURE_BASELINES, skipped for
the rest: this is about false rejects). Forged: the ReLU example with its clocks forged in the ways the
red team knows. For every profile the timing rule's statistic is recorded, so the threshold can be set
against the largest honest value and the smallest forged one. Prints one table; exits 1 on any false
reject, crash, infrastructure or task error, or missed forgery.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import anyio

from cuda_agent_mcp.errors import CudaAgentError
from cuda_agent_mcp.judge.timing import HIDDEN_FRACTION_LIMIT
from cuda_agent_mcp.results import KernelLanguage, Passed, Rejected
from cuda_agent_mcp.tasks import load_kernelbench
from cuda_agent_mcp.tools import (
    EvaluateRequest,
    ProfileRequest,
    Session,
    VerifyRequest,
    compile_kernels,
    evaluate_kernels,
    profile_kernels,
    verify_kernels,
)

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "honest"
SUITES = REPO / "benchmarks" / "suites" / "workspaces" / "kernelbench"
# Each kernel language's honest KernelBench suite (the CUDA one also has fixtures and forgeries).
LANGUAGE_SUITES: dict[KernelLanguage, Path] = {
    "cuda": SUITES,
    "cupy": SUITES.with_name("kernelbench_cupy"),
    "triton": SUITES.with_name("kernelbench_triton"),
}
EXAMPLES = REPO / "examples"
# Baselines measured (the reference's outputs cross the transport from clean workers, and the reward is
# computed): the loss tasks whose 0-dim outputs keep a large storage, and the bundled examples.
MEASURE_BASELINES = {"kernelbench/level1/94", "kernelbench/level1/96", "kernelbench/level1/100"}
# The sample: every fixture, and these suite tasks (19 and 46 over 6 GB of inputs, 99 a side stream).
SAMPLE_SUITE = {
    "level1/19",
    "level1/23",
    "level1/46",
    "level1/47",
    "level1/94",
    "level1/96",
    "level1/99",
    "level1/100",
    "level2/9",
}

# Forgeries of the ReLU example's clocks (prepended to its model_new.py). `scale` forges both worker
# clocks consistently: the judge's clock alone sees the hidden (1 - scale) of each window.
FORGERIES = {
    "forge_both_clocks_frozen": (
        "import time\n"
        "torch.cuda.Event.elapsed_time = lambda self, end: 0.0001\n"
        "_frozen = time.perf_counter()\n"
        "time.perf_counter = lambda: _frozen\n"
    ),
    **{
        f"forge_both_clocks_x{scale}": (
            "import time\n"
            "_elapsed = torch.cuda.Event.elapsed_time\n"
            f"torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) * {scale}\n"
            "_counter = time.perf_counter\n"
            f"time.perf_counter = lambda: _counter() * {scale}\n"
        )
        for scale in (0.5, 0.8)
    },
    "forge_event_timer_only": "torch.cuda.Event.elapsed_time = lambda self, end: 0.0001\n",
}
# Not a forgery that must fail: 5% hidden is inside the rule's tolerance; recorded to show where it sits.
PROBES = {
    "forge_both_clocks_x0.95": (
        "import time\n"
        "_elapsed = torch.cuda.Event.elapsed_time\n"
        "torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) * 0.95\n"
        "_counter = time.perf_counter\n"
        "time.perf_counter = lambda: _counter() * 0.95\n"
    ),
}


@dataclass
class Row:
    name: str
    kind: str  # honest, forged, probe
    status: str = ""
    reason: str = ""
    ok: bool = False
    hidden_fraction: float | None = None
    candidate_excess_ms: float | None = None
    null_excess_ms: float | None = None
    window_ms: float | None = None
    median_ms: float | None = None
    reward: float | None = None
    wall_s: float = 0.0
    message: str = ""
    phases_s: dict[str, float] = field(default_factory=dict)


def honest_sessions(
    work: Path, cache: Path, kernelbench: Path | None, corpus: str, language: KernelLanguage = "cuda"
) -> list[tuple[str, Session]]:
    sessions = (
        [(f"fixture/{p.name}", _copy_open(p, work / "fixtures" / p.name, cache)) for p in _dirs(FIXTURES)]
        if language == "cuda"
        else []
    )
    if kernelbench is None:
        return sessions
    tasks = {t.id.removeprefix("kernelbench/"): t for t in load_kernelbench(kernelbench)}
    suites = LANGUAGE_SUITES[language]
    for level in sorted(p for p in suites.iterdir() if p.is_dir()):
        for solution in sorted(level.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 0):
            key = f"{level.name}/{solution.name}"
            if key not in tasks or (language == "cuda" and corpus == "sample" and key not in SAMPLE_SUITE):
                continue
            session = Session.create(
                tasks[key], work / "suites" / key.replace("/", "-"), cache_dir=cache, language=language
            )
            for path in solution.rglob("*"):
                if path.is_file():
                    target = session.workspace.root / path.relative_to(solution)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
            sessions.append(
                (f"kernelbench/{key}" + ("" if language == "cuda" else f" ({language})"), session)
            )
    return sessions


def forged_sessions(work: Path, cache: Path) -> list[tuple[str, str, Session]]:
    found = []
    for kind, table in (("forged", FORGERIES), ("probe", PROBES)):
        for name, prelude in table.items():
            session = _copy_open(EXAMPLES / "relu", work / "forged" / name, cache)
            model_new = session.workspace.root / "model_new.py"
            text = model_new.read_text()
            # After the module's own imports (torch among them).
            head, sep, tail = text.partition("\n\n")
            model_new.write_text(f"{head}\n{prelude}{sep}{tail}")
            found.append((kind, name, session))
    return found


def _dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if (p / "model.py").exists())


def _copy_open(source: Path, target: Path, cache: Path) -> Session:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.so", ".cuda-agent", "__pycache__"))
    return Session.open(target, cache_dir=cache)


async def evaluate(name: str, kind: str, session: Session, baselines: str) -> Row:
    row = Row(name=name, kind=kind)
    started = time.monotonic()
    try:
        if baselines == "measure":
            result = await evaluate_kernels(
                session,
                EvaluateRequest(verify=VerifyRequest(), profile=ProfileRequest(baselines="measure")),
            )
            verdict = result.profile.verdict if result.profile is not None else result.verify.verdict
            profile = result.profile
            row.reward = result.reward
        else:
            verified = await verify_kernels(session, VerifyRequest())
            verdict, profile = verified.verdict, None
            if isinstance(verdict, Passed) or kind != "honest":
                profile = await profile_kernels(session, ProfileRequest(baselines="skip"))
                verdict = profile.verdict
        row.status = verdict.status
        row.reason = (
            getattr(verdict, "reason", "") or getattr(verdict, "check", "") or getattr(verdict, "kind", "")
        )
        row.message = (getattr(verdict, "message", "") or getattr(verdict, "summary", ""))[:400]
        if isinstance(verdict, Rejected) and verdict.evidence:
            row.hidden_fraction = verdict.evidence.get("hidden_fraction")
            row.candidate_excess_ms = verdict.evidence.get("candidate_excess_ms")
            row.null_excess_ms = verdict.evidence.get("null_excess_ms")
            row.window_ms = verdict.evidence.get("window_ms")
        if profile is not None and profile.candidate is not None:
            stats = profile.candidate
            row.hidden_fraction = stats.hidden_fraction
            row.candidate_excess_ms = stats.judge_excess_median_ms
            row.null_excess_ms = stats.harness_excess_ms
            row.median_ms = stats.median_ms
            row.window_ms = stats.median_ms * stats.batch_calls
            row.phases_s = profile.phases_s
    except CudaAgentError as exc:
        row.status, row.reason, row.message = "error", type(exc).__name__, str(exc)[:600]
    except Exception as exc:  # a harness bug: recorded, and the run fails
        row.status, row.reason = "error", type(exc).__name__
        row.message = "".join(traceback.format_exception(exc))[-1500:]
    row.wall_s = round(time.monotonic() - started, 2)
    if kind == "honest":
        row.ok = row.status == "passed" and (row.reward is None or row.reward >= 1)
    elif kind == "forged":
        row.ok = row.status == "rejected"
    else:
        row.ok = True
    return row


def build_all(sessions: list[Session]) -> dict[str, str]:
    def build(session: Session) -> tuple[str, str]:
        result = anyio.run(compile_kernels, session)
        return str(session.workspace.root), "" if result.ok else result.summary

    with ThreadPoolExecutor(max_workers=max(1, min(12, (os.cpu_count() or 2) - 2))) as pool:
        return dict(pool.map(build, sessions))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernelbench", type=Path)
    parser.add_argument("--corpus", choices=("sample", "all"), default="sample")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--no-forgeries", action="store_true")
    parser.add_argument("--build-only", action="store_true", help="fill the build cache and stop")
    parser.add_argument(
        "--language",
        choices=("cuda", "cupy", "triton"),
        default="cuda",
        help="whose honest suite (cupy, triton: no forgeries)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cuda-agent-acceptance-"))
    cache = Path(os.environ.get("CUDA_AGENT_CACHE", work / "cache"))
    honest = honest_sessions(work, cache, args.kernelbench, args.corpus, args.language)
    forged = [] if args.no_forgeries or args.language != "cuda" else forged_sessions(work, cache)
    started = time.monotonic()
    failures = build_all([s for _, s in honest] + [s for *_, s in forged])
    build_s = time.monotonic() - started
    print(f"built {len(honest) + len(forged)} workspaces in {build_s:.0f} s", flush=True)
    if args.build_only:
        shutil.rmtree(work, ignore_errors=True)
        return
    rows: list[Row] = []
    plan = [("honest", n, s) for n, s in honest] + forged
    for kind, name, session in plan:
        if failures.get(str(session.workspace.root)):
            rows.append(
                Row(
                    name=name,
                    kind=kind,
                    status="compile_failed",
                    message=failures[str(session.workspace.root)][:400],
                )
            )
            continue
        baselines = "measure" if session.task.id in MEASURE_BASELINES else "skip"
        row = anyio.run(evaluate, name, kind, session, baselines)
        rows.append(row)
        args.out.write_text(json.dumps({"rows": [asdict(r) for r in rows]}, indent=1))  # as it goes
        print(
            f"{'ok ' if row.ok else 'BAD'} {kind:6} {name:44} {row.status:18} {row.reason:20} "
            f"stat={_fmt(row.hidden_fraction)} excess={_fmt(row.candidate_excess_ms)} null={_fmt(row.null_excess_ms)} "
            f"window={_fmt(row.window_ms)} reward={row.reward} {row.wall_s:.1f}s",
            flush=True,
        )
    honest_stats = [r.hidden_fraction for r in rows if r.kind == "honest" and r.hidden_fraction is not None]
    forged_stats = [r.hidden_fraction for r in rows if r.kind == "forged" and r.hidden_fraction is not None]
    summary = {
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "language": args.language,
        "honest": sum(r.kind == "honest" for r in rows),
        "honest_passed": sum(r.ok for r in rows if r.kind == "honest"),
        "forged": sum(r.kind == "forged" for r in rows),
        "forged_rejected": sum(r.ok for r in rows if r.kind == "forged"),
        "threshold": HIDDEN_FRACTION_LIMIT,
        "largest_honest_statistic": max(honest_stats, default=None),
        "median_honest_statistic": statistics.median(honest_stats) if honest_stats else None,
        "smallest_forged_statistic": min(forged_stats, default=None),
        "build_s": round(build_s, 1),
        "evaluate_s": round(time.monotonic() - started - build_s, 1),
    }
    args.out.write_text(json.dumps({"summary": summary, "rows": [asdict(r) for r in rows]}, indent=1))
    print(json.dumps(summary, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    raise SystemExit(0 if all(r.ok for r in rows) else 1)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


if __name__ == "__main__":
    main()
