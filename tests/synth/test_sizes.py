"""Size globals read and rewritten, so a CPU run can shrink a program without changing what it computes."""

from __future__ import annotations

import pytest

from cuda_agent_mcp.synth.sizes import guessed_cpu_sizes, size_globals, with_sizes
from tests.synth import programs


def test_size_globals_are_the_top_level_integer_assignments() -> None:
    assert size_globals(programs.SOUND) == {"batch_size": 64, "features": 32}


def test_with_sizes_rewrites_only_the_named_globals() -> None:
    smaller = with_sizes(programs.SOUND, {"batch_size": 2})
    assert size_globals(smaller) == {"batch_size": 2, "features": 32}
    assert smaller.replace("batch_size = 2", "batch_size = 64") == programs.SOUND


def test_an_unknown_size_name_is_an_error_not_a_silent_no_op() -> None:
    with pytest.raises(ValueError, match="no top-level integer global named height"):
        with_sizes(programs.SOUND, {"height": 4})


def test_a_program_without_cpu_sizes_gets_its_batch_shrunk() -> None:
    assert guessed_cpu_sizes(programs.SOUND) == {"batch_size": 2}
    assert guessed_cpu_sizes(programs.SOUND.replace("batch_size", "rows")) == {}
    assert guessed_cpu_sizes(programs.NOT_PYTHON) == {}
