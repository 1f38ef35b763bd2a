"""Benchmark: does the synthesis decontamination rule catch disguised copies of KernelBench tasks?

    python benchmarks/synth_decontamination.py [--kernelbench DIR] [--out PATH] [--threshold 0.9]
    python benchmarks/synth_decontamination.py --dataset tasks.jsonl [--out PATH]

For every KernelBench task of levels 1-3 it makes perturbed copies with AST transforms (names renamed; independent
top-level statements and __init__ statements reordered; integer size globals scaled; all three at once) and checks
each one (a) against the index without its original (flagged? near what? other tasks can be near: matmul
variants), and (b) against its original: it must be near it (the count that are not is the figure to keep at 0).
The paper-rule stand-in (`paper_ast_similarity > 0.9` against the original) is measured on the same copies. Also:
the distribution of each KernelBench task's similarity to its nearest other task, and the time per query.

--dataset: for each row's `code` of a JSONL file, the nearest KernelBench task and its similarity.
Standard library plus the package; CPU only, a minute or two on one core.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cuda_agent_mcp.synth.similarity import (  # noqa: E402
    DEFAULT_NEAR_THRESHOLD,
    ProgramFingerprint,
    ReferenceIndex,
    fingerprint,
    kernelbench_programs,
    paper_ast_similarity,
    similarity,
)

PAPER_THRESHOLD = 0.9  # the paper removes a program whose similarity exceeds 0.9 (strictly)


# --- perturbations -----------------------------------------------------------------------------------------


def _imported_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def rename(code: str, rng: random.Random) -> str:
    """Locals, arguments, self attributes and module globals get fresh names, consistently over the module."""
    tree = ast.parse(code)
    imported = _imported_names(tree)
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }
    keep = imported | defined | {"self", "cls", "__name__"}
    names: list[str] = []
    attrs: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in keep:
            names.append(node.id)
        elif isinstance(node, ast.arg) and node.arg not in keep:
            names.append(node.arg)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            attrs.append(node.attr)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "omega",
        "sigma",
        "kappa",
        "theta",
        "zeta",
        "lam",
        "rho",
        "tau",
    ]
    rng.shuffle(words)
    mapping: dict[str, str] = {}
    for i, old in enumerate(dict.fromkeys(names + attrs)):
        new = f"{words[i % len(words)]}_{i}"
        while new in taken:
            new += "_"
        mapping[old] = new

    class Renamer(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            node.id = mapping.get(node.id, node.id)
            return node

        def visit_arg(self, node: ast.arg) -> ast.arg:
            node.arg = mapping.get(node.arg, node.arg)
            self.generic_visit(node)
            return node

        def visit_Attribute(self, node: ast.Attribute) -> ast.Attribute:
            if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in attrs:
                node.attr = mapping[node.attr]
            self.generic_visit(node)
            return node

        def visit_Call(self, node: ast.Call) -> ast.Call:
            # keyword arguments of the module's own classes and functions follow their parameters' new names
            if isinstance(node.func, ast.Name) and node.func.id in defined:
                for keyword in node.keywords:
                    if keyword.arg is not None:
                        keyword.arg = mapping.get(keyword.arg, keyword.arg)
            self.generic_visit(node)
            return node

    return ast.unparse(Renamer().visit(tree))


def _definition_names(stmt: ast.stmt) -> tuple[set[str], set[str], bool]:
    """(names it binds, names it reads when it runs, whether it must stay in place); self.x counts as a name.

    A def or class reads at definition time only (bases, decorators, defaults, annotations), not its bodies.
    """
    binds: set[str] = set()
    reads: set[str] = set()
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return binds, reads, True
    if isinstance(stmt, ast.Expr):  # a call run for its effect (super().__init__(), layers.append): a barrier
        return binds, reads, True

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            binds.add(node.name)
            for child in [*node.decorator_list, node.args, *([node.returns] if node.returns else [])]:
                visit(child)
            return
        if isinstance(node, ast.ClassDef):
            binds.add(node.name)
            for child in [*node.decorator_list, *node.bases, *node.keywords, *node.body]:
                visit(child)
            return
        if isinstance(node, ast.Name):
            (binds if isinstance(node.ctx, ast.Store) else reads).add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            (binds if isinstance(node.ctx, ast.Store) else reads).add(f"self.{node.attr}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(stmt)
    return binds, reads, False


def _shuffled(body: list[ast.stmt], rng: random.Random) -> list[ast.stmt]:
    """A random order of body that keeps every dependence (and every barrier) in place: a random topological sort."""
    info = [_definition_names(stmt) for stmt in body]
    before: list[set[int]] = [set() for _ in body]
    for j, (binds_j, reads_j, fixed_j) in enumerate(info):
        for i in range(j):
            binds_i, reads_i, fixed_i = info[i]
            if fixed_i or fixed_j or binds_i & (reads_j | binds_j) or reads_i & binds_j:
                before[j].add(i)
    placed: list[int] = []
    while len(placed) < len(body):
        ready = [j for j in range(len(body)) if j not in placed and before[j] <= set(placed)]
        placed.append(rng.choice(ready))
    return [body[j] for j in placed]


def reorder(code: str, rng: random.Random) -> str:
    """Independent top-level statements (defs, classes, globals) and independent __init__ statements reordered."""
    tree = ast.parse(code)
    docstring_free = tree.body
    tree.body = _shuffled(docstring_free, rng)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            node.body = _shuffled(node.body, rng)
    return ast.unparse(tree)


def resize(code: str, rng: random.Random) -> str:
    """Every integer above 1 in a module-level assignment (the size globals) doubled or halved."""
    tree = ast.parse(code)
    for stmt in tree.body:
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
            continue
        for node in ast.walk(stmt.value):
            if isinstance(node, ast.Constant) and type(node.value) is int and node.value > 1:
                node.value = node.value * 2 if rng.random() < 0.5 else max(1, node.value // 2)
    return ast.unparse(tree)


def all_three(code: str, rng: random.Random) -> str:
    return rename(reorder(resize(code, rng), rng), rng)


PERTURBATIONS: dict[str, Callable[[str, random.Random], str]] = {
    "renamed": rename,
    "reordered": reorder,
    "resized": resize,
    "all_three": all_three,
}


def perturbed(code: str, kind: str, task_id: str, seed: str) -> str:
    """The copy of kind; a few tries for one that differs from the original (a task may have nothing to move)."""
    original = ast.unparse(ast.parse(code))
    copy = original
    for attempt in range(8):
        copy = PERTURBATIONS[kind](code, random.Random(f"{seed}:{task_id}:{kind}:{attempt}"))
        if copy != original:
            break
    return copy


# --- measurements -------------------------------------------------------------------------------------------


def histogram(values: list[float]) -> dict[str, int]:
    bins = Counter(min(int(v * 10), 9) for v in values)
    return {f"[{b / 10:.1f},{(b + 1) / 10:.1f}{']' if b == 9 else ')'}": bins.get(b, 0) for b in range(10)}


def timed_nearest(index: ReferenceIndex, fp: ProgramFingerprint, exclude: frozenset[str], times: list[float]):
    started = time.perf_counter()
    found = index.nearest(fp, exclude=exclude)
    times.append((time.perf_counter() - started) * 1000)
    return found


def ms_summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "queries": len(ordered),
        "mean_ms": round(statistics.fmean(ordered), 3),
        "median_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
        "max_ms": round(ordered[-1], 3),
    }


def run_kernelbench(root: Path, threshold: float, seed: str) -> dict:
    programs = [
        (ref_id, code) for ref_id, code in kernelbench_programs(root) if ref_id.split("/")[1] in LEVELS
    ]
    fps = {ref_id: fingerprint(code) for ref_id, code in programs}
    codes = dict(programs)
    index = ReferenceIndex()
    for ref_id, fp in fps.items():
        if fp is not None:
            index.add(ref_id, fp)
    task_ids = [ref_id for ref_id, fp in fps.items() if fp is not None]

    # KernelBench against itself: each task's nearest other task
    self_times: list[float] = []
    self_rows = []
    for ref_id in task_ids:
        found = timed_nearest(index, fps[ref_id], frozenset({ref_id}), self_times)  # type: ignore[arg-type]
        self_rows.append(
            {
                "task": ref_id,
                "nearest": found.ref_id if found else None,
                "similarity": found.similarity if found else 0.0,
            }
        )
    self_sims = [row["similarity"] for row in self_rows]

    kinds: dict[str, dict] = {}
    rows = []
    loo_times: list[float] = []
    members: list[tuple[str, ProgramFingerprint]] = []
    for kind in PERTURBATIONS:
        stats = Counter()
        not_near_original = []
        paper_misses = []
        basis = Counter()
        flagged_near_other: Counter[str] = Counter()
        for ref_id in task_ids:
            code = perturbed(codes[ref_id], kind, ref_id, seed)
            fp = fingerprint(code)
            assert fp is not None, f"{kind} copy of {ref_id} does not parse"
            original = fps[ref_id]
            assert original is not None
            members.append((f"{kind}/{ref_id}", fp))
            stats["copies"] += 1
            stats["unchanged_copies"] += ast.unparse(ast.parse(codes[ref_id])) == code
            # (a) without its original
            other = timed_nearest(index, fp, frozenset({ref_id}), loo_times)
            if other is not None and other.similarity >= threshold:
                stats["flagged_without_original"] += 1
                flagged_near_other[other.ref_id] += 1
            # (b) against its original, and the full index's nearest
            versus = similarity(fp, original)
            near = versus.similarity >= threshold
            stats["near_original"] += near
            basis[versus.basis if near else "none"] += 1
            if not near:
                not_near_original.append(
                    {"task": ref_id, "ast": round(versus.ast, 4), "ops": round(versus.ops, 4)}
                )
            full = index.nearest(fp)
            stats["nearest_is_original"] += full is not None and full.ref_id == ref_id
            stats["nearest_ties_original"] += full is not None and full.similarity <= versus.similarity
            paper = paper_ast_similarity(code, codes[ref_id])
            paper_near = paper > PAPER_THRESHOLD
            stats["paper_rule_near_original"] += paper_near
            if not paper_near:
                paper_misses.append({"task": ref_id, "paper_similarity": round(paper, 4)})
            rows.append(
                {
                    "kind": kind,
                    "task": ref_id,
                    "ast": round(versus.ast, 4),
                    "ops": round(versus.ops, 4),
                    "paper": round(paper, 4),
                    "nearest_other": other.ref_id if other else None,
                    "nearest_other_similarity": round(other.similarity, 4) if other else 0.0,
                }
            )
        kinds[kind] = {
            **dict(sorted(stats.items())),
            "not_near_original": len(not_near_original),
            "not_near_original_tasks": not_near_original,
            "near_original_by_basis": dict(sorted(basis.items())),
            "paper_rule_not_near_original": len(paper_misses),
            "paper_rule_misses": paper_misses,
            "flagged_without_original_most_common_nearest": flagged_near_other.most_common(10),
        }

    # scale: the KernelBench index plus every perturbed copy as set members, queried with other copies
    scaled = ReferenceIndex()
    for ref_id in task_ids:
        scaled.add(ref_id, fps[ref_id])  # type: ignore[arg-type]
    for member_id, fp in members:
        scaled.add(member_id, fp)
    scaled_times: list[float] = []
    for ref_id in task_ids:
        for kind in PERTURBATIONS:
            fp = fingerprint(perturbed(codes[ref_id], kind, ref_id, seed + ":queries"))
            assert fp is not None
            timed_nearest(scaled, fp, frozenset(), scaled_times)

    return {
        "kernelbench_tasks": len(programs),
        "unparsable": len(programs) - len(task_ids),
        "threshold": threshold,
        "perturbations": kinds,
        "kernelbench_self_similarity": {
            "histogram_max_similarity": histogram(self_sims),
            "at_or_above_threshold": sum(s >= threshold for s in self_sims),
            "median": round(statistics.median(self_sims), 4),
            "pairs_at_or_above_threshold": [r for r in self_rows if r["similarity"] >= threshold],
        },
        "time_per_query": {
            "kernelbench_index_leave_one_out": ms_summary(loo_times + self_times),
            f"index_of_{len(scaled)}_programs": ms_summary(scaled_times),
        },
        "rows": rows,
    }


def run_dataset(root: Path, dataset: Path, threshold: float) -> dict:
    index = ReferenceIndex()
    for ref_id, code in kernelbench_programs(root):
        fp = fingerprint(code)
        if fp is not None:
            index.add(ref_id, fp)
    rows = []
    for line_number, line in enumerate(dataset.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        record = json.loads(line)
        name = next((record[k] for k in ("id", "name", "task_id", "index") if k in record), line_number)
        fp = fingerprint(record.get("code", "")) if isinstance(record.get("code"), str) else None
        if fp is None:
            rows.append({"row": name, "parsed": False})
            continue
        found = index.nearest(fp)
        rows.append(
            {
                "row": name,
                "parsed": True,
                "nearest": found.ref_id if found else None,
                "similarity": round(found.similarity, 4) if found else 0.0,
                "ast": round(found.ast, 4) if found else 0.0,
                "ops": round(found.ops, 4) if found else 0.0,
                "near": bool(found and found.similarity >= threshold),
            }
        )
    parsed = [r for r in rows if r["parsed"]]
    return {
        "dataset": str(dataset),
        "rows": len(rows),
        "unparsable": len(rows) - len(parsed),
        "threshold": threshold,
        "near_kernelbench": sum(r["near"] for r in parsed),
        "histogram_max_similarity": histogram([r["similarity"] for r in parsed]),
        "results": rows,
    }


LEVELS = ("level1", "level2", "level3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--kernelbench", type=Path, default=REPO.parent / "shared" / "benchmarks" / "kernelbench"
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--threshold", type=float, default=DEFAULT_NEAR_THRESHOLD)
    parser.add_argument("--seed", default="synth-decontamination")
    parser.add_argument("--dataset", type=Path, default=None, help="a JSONL file with a `code` column")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.dataset is not None:
        result = run_dataset(args.kernelbench, args.dataset, args.threshold)
        out = args.out or REPO / "benchmarks" / "results" / "synth_decontamination_dataset.json"
        print(
            f"{result['rows']} rows, {result['unparsable']} unparsable, {result['near_kernelbench']} near KernelBench"
        )
        print("max similarity to KernelBench:", result["histogram_max_similarity"])
    else:
        result = run_kernelbench(args.kernelbench, args.threshold, args.seed)
        out = args.out or REPO / "benchmarks" / "results" / "synth_decontamination.json"
        n = result["kernelbench_tasks"] - result["unparsable"]
        print(f"{n} KernelBench tasks, threshold {args.threshold}")
        print(f"{'copy':<10} {'near orig':>9} {'NOT near':>8} {'paper>0.9':>9} {'flagged w/o orig':>16}")
        for kind, stats in result["perturbations"].items():
            print(
                f"{kind:<10} {stats['near_original']:>9} {stats['not_near_original']:>8} "
                f"{stats['paper_rule_near_original']:>9} {stats['flagged_without_original']:>16}"
            )
        self_sim = result["kernelbench_self_similarity"]
        print("KernelBench vs the others, max similarity:", self_sim["histogram_max_similarity"])
        for name, timing in result["time_per_query"].items():
            print(f"time per query, {name}: median {timing['median_ms']} ms, p95 {timing['p95_ms']} ms")
    result["seconds"] = round(time.perf_counter() - started, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
