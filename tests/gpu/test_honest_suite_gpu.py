"""On the GPU: honest kernels of different op types pass verify and profile (the judge's false positives
would show here). Each is a workspace under tests/fixtures/honest/."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.results import Passed
from cuda_agent_mcp.tools import EvaluateRequest, Session, evaluate_kernels
from tests.conftest import REPO

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

HONEST = REPO / "tests" / "fixtures" / "honest"


@pytest.mark.parametrize("name", sorted(p.name for p in HONEST.iterdir() if (p / "model.py").exists()))
def test_an_honest_kernel_passes_verify_and_profile(name: str, shared_build_cache: Path) -> None:
    session = Session.open(HONEST / name, cache_dir=shared_build_cache)
    result = anyio.run(lambda: evaluate_kernels(session, EvaluateRequest()))
    assert isinstance(result.verify.verdict, Passed), result.verify.verdict
    assert result.profile is not None and isinstance(result.profile.verdict, Passed), result.profile.verdict
    assert result.reward >= 1
