"""Caching and phase exploits (catalog section C): outputs reused instead of computed. All on the GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_mcp.results import ContractViolation, Crashed, Passed, WrongOutput
from tests.redteam.workspaces import RELU_KERNEL, forward, launcher, profile, relu_session, verify

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]


def test_a_python_cache_keyed_by_data_ptr_never_hits(tmp_path: Path, shared_build_cache: Path) -> None:
    """Every call's inputs are at a new address (principle 2), so a cache keyed on the pointer never
    answers a call: it computes every time, which is all an honest kernel does. It raises on a hit."""
    cached = forward(
        "        key = (x.data_ptr(), tuple(x.shape))\n"
        "        if key in CACHE:\n            raise RuntimeError('a pointer came back')\n"
        "        CACHE[key] = cuda_extension.relu(x)\n"
        "        return CACHE[key].clone()",
        prelude="CACHE = {}",
    )
    session = relu_session(tmp_path, shared_build_cache, model_new=cached)
    assert isinstance(verify(session).verdict, Passed)
    assert not isinstance(profile(session, baselines="skip").verdict, Crashed)


def test_a_static_pointer_cache_in_the_launcher_never_skips_a_call(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    """The C++ form (wafer.ai's field guide): the input pointer is new every call, so the launcher never
    sees "the same buffers as last time" and runs its kernel every call."""
    skip_repeat = RELU_KERNEL + launcher(
        "  static const float* last_x = nullptr;\n"
        "  if (x == last_x) return;  // same input as last time: keep the old output\n"
        "  last_x = x;\n"
        "  relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);"
    )
    session = relu_session(tmp_path, shared_build_cache, kernel=skip_repeat)
    assert isinstance(verify(session).verdict, Passed)


def test_computing_every_fourth_call_and_replaying_in_between_is_caught(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    batch_and_skip = forward(
        "        STATE['calls'] += 1\n"
        "        if STATE['calls'] % 4 == 1:\n            STATE['last'] = cuda_extension.relu(x)\n"
        "        return STATE['last'].clone()",
        prelude="STATE = {'calls': 0, 'last': None}",
    )
    result = verify(relu_session(tmp_path, shared_build_cache, model_new=batch_and_skip))
    assert isinstance(result.verdict, WrongOutput | ContractViolation), result.verdict


@pytest.mark.parametrize("honest_calls", [10, 12])
def test_honest_only_for_the_first_calls_then_replaying_fails_while_timed(
    honest_calls: int, tmp_path: Path, shared_build_cache: Path
) -> None:
    # Call-count gating and warm-up replay: honest through verify (10 calls), lazy once timing starts.
    gated = forward(
        "        STATE['calls'] += 1\n"
        f"        if STATE['calls'] <= {honest_calls}:\n            STATE['last'] = cuda_extension.relu(x)\n"
        "        return STATE['last'].clone()",
        prelude="STATE = {'calls': 0, 'last': None}",
    )
    session = relu_session(tmp_path, shared_build_cache, model_new=gated)
    result = profile(session, baselines="skip")
    assert not isinstance(result.verdict, Passed)
    assert isinstance(result.verdict, WrongOutput | ContractViolation), result.verdict
    if isinstance(result.verdict, WrongOutput):
        assert result.verdict.phase == "timed"
