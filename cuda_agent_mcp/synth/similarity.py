"""How near a composed program is to KernelBench's programs and to the rest of the synthesized set.

Two measures, and a program is near another when either reaches the threshold:

- `ast_similarity`: the Dice coefficient of the multisets of normalized statements (names, self attributes and
  constants replaced by placeholders, torch API names spelled in full). It catches copies renamed, reordered or
  resized, even where no ops could be read. Statements, not a token sequence: programs made from one template share
  most tokens, so a token ratio calls `conv2d -> relu` and `conv2d -> gelu` near-duplicates; a changed statement
  is a whole element of the multiset.
- `op_similarity`: SequenceMatcher's ratio of forward's canonical operator sequences. It catches the same
  computation written in another style (F.relu for nn.ReLU, `@` for torch.matmul) or at other sizes.

`paper_ast_similarity` is a stand-in for the CUDA Agent paper's rule, for comparison only. Standard library only:
the programs are read, never run.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cuda_agent_mcp.synth._op_sequence import OpExtractor
from cuda_agent_mcp.synth._program_ast import drop_docstrings, import_aliases, normalized_statements

DEFAULT_NEAR_THRESHOLD = 0.9


@dataclass(frozen=True)
class ProgramFingerprint:
    """What the similarity measures compare; built by `fingerprint`."""

    statements: tuple[str, ...]  # the multiset of normalized statements, sorted
    ops: tuple[str, ...]  # forward's canonical operator sequence, in execution order
    normalized_hash: str  # sha256 of the code unparsed without comments, formatting and docstrings


@dataclass(frozen=True)
class Nearest:
    """The most similar reference to a program, with both measures; `basis` names the one that is higher."""

    ref_id: str
    similarity: float
    ast: float
    ops: float
    basis: Literal["ast", "ops"]


def fingerprint(code: str) -> ProgramFingerprint | None:
    """The program's statements, ops and normalized hash; None when the code does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    drop_docstrings(tree)
    normalized_hash = hashlib.sha256(ast.unparse(tree).encode()).hexdigest()
    aliases = import_aliases(tree)
    statements = tuple(sorted(normalized_statements(tree, aliases)))
    try:
        ops = tuple(OpExtractor(tree, aliases).ops())
    except RecursionError:  # a pathological nesting; the statements still stand for the program
        ops = ()
    return ProgramFingerprint(statements=statements, ops=ops, normalized_hash=normalized_hash)


def _dice(a: Counter[str], b: Counter[str]) -> float:
    total = sum(a.values()) + sum(b.values())
    return 2 * sum((a & b).values()) / total if total else 0.0


def ast_similarity(a: ProgramFingerprint, b: ProgramFingerprint) -> float:
    """Dice coefficient of the statement multisets: 2|A ∩ B| / (|A| + |B|), in [0, 1]."""
    return _dice(Counter(a.statements), Counter(b.statements))


def op_similarity(a: ProgramFingerprint, b: ProgramFingerprint) -> float:
    """SequenceMatcher ratio of the op sequences; two programs with no ops are not similar (0)."""
    if not a.ops and not b.ops:
        return 0.0
    return difflib.SequenceMatcher(None, a.ops, b.ops, autojunk=False).ratio()


def _nearest_of(ref_id: str, ast_sim: float, ops_sim: float) -> Nearest:
    basis: Literal["ast", "ops"] = "ops" if ops_sim > ast_sim else "ast"
    return Nearest(ref_id=ref_id, similarity=max(ast_sim, ops_sim), ast=ast_sim, ops=ops_sim, basis=basis)


def similarity(a: ProgramFingerprint, b: ProgramFingerprint) -> Nearest:
    """Both measures of two programs, as a `Nearest` with an empty ref_id."""
    return _nearest_of("", ast_similarity(a, b), op_similarity(a, b))


class ReferenceIndex:
    """Programs to compare against, with inverted indexes so a query touches only references sharing something.

    The statement Dice is exact from the statement postings; the op ratio is bounded above by the op-multiset
    overlap (SequenceMatcher's quick_ratio), so SequenceMatcher runs only on references that could still win.
    """

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._fps: list[ProgramFingerprint] = []
        self._n_statements: list[int] = []
        self._n_ops: list[int] = []
        self._statement_postings: dict[str, list[tuple[int, int]]] = {}
        self._op_postings: dict[str, list[tuple[int, int]]] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, ref_id: str, fp: ProgramFingerprint) -> None:
        slot = len(self._ids)
        self._ids.append(ref_id)
        self._fps.append(fp)
        self._n_statements.append(len(fp.statements))
        self._n_ops.append(len(fp.ops))
        for statement, count in sorted(Counter(fp.statements).items()):
            self._statement_postings.setdefault(statement, []).append((slot, count))
        for op, count in sorted(Counter(fp.ops).items()):
            self._op_postings.setdefault(op, []).append((slot, count))

    @staticmethod
    def _overlaps(items: tuple[str, ...], postings: dict[str, list[tuple[int, int]]]) -> dict[int, int]:
        shared: dict[int, int] = {}
        for item, count in Counter(items).items():
            for slot, ref_count in postings.get(item, ()):
                shared[slot] = shared.get(slot, 0) + min(count, ref_count)
        return shared

    def nearest(self, fp: ProgramFingerprint, *, exclude: frozenset[str] = frozenset()) -> Nearest | None:
        """The most similar reference (ties: the one added first), or None when none shares anything with fp.

        `exclude` leaves references out by id (a leave-one-out check, or a set member against the others).
        """
        statement_overlap = self._overlaps(fp.statements, self._statement_postings)
        op_overlap = self._overlaps(fp.ops, self._op_postings)
        n_statements, n_ops = len(fp.statements), len(fp.ops)
        # (upper bound of the similarity, slot, exact ast Dice): the bound is exact for ast, quick_ratio for ops
        # per reference: (upper bound, slot, exact ast Dice, op bound); the op bound is quick_ratio's multiset overlap
        candidates: list[tuple[float, int, float, float]] = []
        for slot in sorted(statement_overlap.keys() | op_overlap.keys()):
            if self._ids[slot] in exclude:
                continue
            ast_total = n_statements + self._n_statements[slot]
            ast_sim = 2 * statement_overlap.get(slot, 0) / ast_total if ast_total else 0.0
            op_total = n_ops + self._n_ops[slot]
            op_bound = 2 * op_overlap.get(slot, 0) / op_total if op_total else 0.0
            candidates.append((max(ast_sim, op_bound), slot, ast_sim, op_bound))
        candidates.sort(key=lambda c: (-c[0], c[1]))
        best: tuple[float, int] | None = None  # (similarity, slot)
        for bound, slot, ast_sim, op_bound in candidates:
            if best is not None and bound < best[0]:
                break  # sorted by bound: nothing further can beat the best
            # the ops can lift it above its Dice only where their bound is higher: measure them only there
            sim = max(ast_sim, op_similarity(fp, self._fps[slot])) if op_bound > ast_sim else ast_sim
            if sim > 0 and (best is None or sim > best[0] or (sim == best[0] and slot < best[1])):
                best = (sim, slot)
        if best is None:
            return None
        slot = best[1]
        ref_fp = self._fps[slot]
        return _nearest_of(self._ids[slot], ast_similarity(fp, ref_fp), op_similarity(fp, ref_fp))

    def near(
        self,
        fp: ProgramFingerprint,
        threshold: float = DEFAULT_NEAR_THRESHOLD,
        *,
        exclude: frozenset[str] = frozenset(),
    ) -> Nearest | None:
        """The nearest reference when its similarity is at or above the threshold, else None."""
        found = self.nearest(fp, exclude=exclude)
        return found if found is not None and found.similarity >= threshold else None


def kernelbench_programs(root: Path) -> list[tuple[str, str]]:
    """(id, code) of every level*/*.py under a KernelBench tree, ids like kernelbench/level1/19_ReLU, sorted."""
    programs = []
    for path in sorted(root.glob("level*/*.py")):
        programs.append((f"kernelbench/{path.parent.name}/{path.stem}", path.read_text(encoding="utf-8")))
    return programs


def kernelbench_index(root: Path) -> ReferenceIndex:
    """An index of every parsable KernelBench program under root."""
    index = ReferenceIndex()
    for ref_id, code in kernelbench_programs(root):
        fp = fingerprint(code)
        if fp is not None:
            index.add(ref_id, fp)
    return index


def _model_class(tree: ast.Module) -> ast.AST:
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == "Model":
            return stmt
    return tree


_DUMP_TOKEN = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\d[\w.]*|\w+|[^\w\s]""")


def _raw_ast_tokens(code: str) -> list[str] | None:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    return _DUMP_TOKEN.findall(ast.dump(_model_class(tree)))


def paper_ast_similarity(a_code: str, b_code: str) -> float:
    """OUR STAND-IN for the CUDA Agent paper's "PythonASTSimilarity" (its code is not released), for comparison.

    The paper drops a training program whose similarity with any KernelBench program exceeds 0.9, on the raw
    Model class AST: no normalization of names or constants. Here: SequenceMatcher's ratio over the tokens of
    `ast.dump` of the Model class (node types, field names, identifiers and constants, in source order; the
    whole module where there is no Model class). 0 when either does not parse.
    """
    a, b = _raw_ast_tokens(a_code), _raw_ast_tokens(b_code)
    if not a or not b:
        return 0.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
