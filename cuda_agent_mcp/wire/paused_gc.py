"""No garbage collection inside a clock: used around the worker's timed calls and the judge's own clock."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_garbage_collection() -> Iterator[None]:
    """No collection runs inside a clock: a pause of a millisecond or more, at random, would be charged
    to whatever the clock is timing. Garbage made meanwhile waits for the next collection after it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
