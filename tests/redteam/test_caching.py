"""Caching and phase exploits (catalog section C): outputs reused instead of computed. All on the GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_mcp.results import ContractViolation, Passed, WrongOutput
from tests.redteam.workspaces import RELU_KERNEL, forward, launcher, profile, relu_session, verify

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]


def test_a_python_cache_keyed_by_data_ptr_fails_on_new_contents(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    cached = forward(
        "        key = (x.data_ptr(), tuple(x.shape))\n"
        "        if key not in CACHE:\n            CACHE[key] = cuda_extension.relu(x)\n"
        "        return CACHE[key].clone()",
        prelude="CACHE = {}",
    )
    result = verify(relu_session(tmp_path, shared_build_cache, model_new=cached))
    assert isinstance(result.verdict, WrongOutput), result.verdict
    assert result.verdict.trial >= 1  # honest the first time; the judge reuses its buffers with new contents


def test_a_static_pointer_cache_in_the_launcher_is_caught(tmp_path: Path, shared_build_cache: Path) -> None:
    skip_repeat = RELU_KERNEL + launcher(
        "  static const float* last_x = nullptr; static float* last_y = nullptr;\n"
        "  if (x == last_x && y == last_y) return;  // same buffers as last time: keep the old output\n"
        "  last_x = x; last_y = y;\n"
        "  relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);"
    )
    result = verify(relu_session(tmp_path, shared_build_cache, kernel=skip_repeat))
    assert isinstance(result.verdict, WrongOutput | ContractViolation), result.verdict


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
