"""Wall time per named phase of a job, so callers (and benchmarks) see where an evaluation's time went."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class PhaseClock:
    """Sums the wall time of every `with clock.phase(name)` block by name."""

    def __init__(self) -> None:
        self._totals: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)

    def add(self, name: str, seconds: float) -> None:
        self._totals[name] = self._totals.get(name, 0.0) + seconds

    def as_dict(self) -> dict[str, float]:
        return {name: round(seconds, 4) for name, seconds in self._totals.items()}
