"""The filters that read a program without running it: the static task check, exact duplicates, and
nearness to KernelBench and to the set itself.

They run in candidate order, in one process, so a run decides the same way every time and on resume:
a candidate is compared with KernelBench and with every earlier candidate that passed these filters.
(An earlier candidate that a running filter refuses later still counts here: deciding otherwise would
make a candidate's fate depend on which worker finished first.)
"""

from __future__ import annotations

from cuda_agent_mcp.errors import TaskLoadError
from cuda_agent_mcp.synth.candidate import Candidate
from cuda_agent_mcp.synth.filters import FilterOutcome
from cuda_agent_mcp.synth.similarity import Nearest, ReferenceIndex, fingerprint
from cuda_agent_mcp.tasks.static_check import check_reference_source


class StaticFilters:
    """Remembers what passed, so later candidates are compared with it."""

    def __init__(self, references: ReferenceIndex | None, *, threshold: float) -> None:
        self.references = references
        self.threshold = threshold
        self.accepted = ReferenceIndex()
        self.hashes: dict[str, int] = {}

    def check(self, candidate: Candidate) -> list[FilterOutcome]:
        """The outcomes up to the first refusal (all three when it passes)."""
        try:
            check_reference_source(candidate.code, f"candidate {candidate.index}")
            program = fingerprint(candidate.code)
            if program is None:
                raise TaskLoadError(f"candidate {candidate.index}", "does not parse")
        except TaskLoadError as exc:
            where = f"line {exc.line}: " if exc.line is not None else ""
            return [FilterOutcome(name="parse", passed=False, reason=f"{where}{exc.problem}")]
        outcomes = [FilterOutcome(name="parse", passed=True)]

        earlier = self.hashes.get(program.normalized_hash)
        if earlier is not None:
            reason = f"the same code as candidate {earlier} (after formatting and comments)"
            return [*outcomes, FilterOutcome(name="duplicate", passed=False, reason=reason)]
        outcomes.append(FilterOutcome(name="duplicate", passed=True))

        nearest_reference = self.references.nearest(program) if self.references else None
        nearest_earlier = self.accepted.nearest(program)
        measured = {
            **_describe("kernelbench", nearest_reference),
            **_describe("set", nearest_earlier),
        }
        for near in (nearest_reference, nearest_earlier):
            if near is not None and near.similarity >= self.threshold:
                reason = (
                    f"near {near.ref_id}: similarity {near.similarity:.2f} by {near.basis} "
                    f"(ast {near.ast:.2f}, ops {near.ops:.2f}; threshold {self.threshold:g})"
                )
                return [
                    *outcomes,
                    FilterOutcome(name="decontaminate", passed=False, reason=reason, measured=measured),
                ]
        outcomes.append(FilterOutcome(name="decontaminate", passed=True, measured=measured))
        self.hashes[program.normalized_hash] = candidate.index
        self.accepted.add(f"candidate {candidate.index}", program)
        return outcomes


def _describe(prefix: str, near: Nearest | None) -> dict[str, object]:
    if near is None:
        return {f"{prefix}_nearest": None, f"{prefix}_similarity": 0.0}
    return {f"{prefix}_nearest": near.ref_id, f"{prefix}_similarity": round(near.similarity, 3)}
