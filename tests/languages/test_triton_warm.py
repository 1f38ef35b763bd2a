"""A builder that keeps building Triton workspaces starts its next compile process ahead: the build's
results are the same, only the imports are paid before the build asks."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.results import BuildResult
from cuda_agent_mcp.tools import compile_kernels
from tests.languages.triton_workspaces import RELU_KERNEL, triton_model_new, triton_session

pytestmark = pytest.mark.nvcc

AHEAD = "compile process started ahead"


def _note(result: BuildResult) -> str:
    return next(d.message for d in result.diagnostics if d.severity == "note")


def test_from_the_third_build_on_the_compile_process_was_started_ahead(tmp_path: Path) -> None:
    session = triton_session(tmp_path, tmp_path / "cache")
    model_new = session.workspace.root / "model_new.py"
    broken = RELU_KERNEL.replace("tl.maximum(x, 0.0)", "tl.maximum(x, undefined_name)")

    async def builds() -> list[BuildResult]:
        results = []
        for block in (256, 512, 1024):
            model_new.write_text(
                triton_model_new(launch=f"relu_kernel[(triton.cdiv(n, {block}),)](x, y, n, BLOCK={block})")
            )
            results.append(await compile_kernels(session))
            await anyio.sleep(0.5)
        await _wait_until_started(tmp_path / "cache")
        model_new.write_text(triton_model_new(kernel=broken))
        results.append(await compile_kernels(session))
        return results

    first, second, third, failed = anyio.run(builds)
    assert all(r.ok for r in (first, second, third)), [r.summary for r in (first, second, third)]
    assert AHEAD not in _note(first) and AHEAD not in _note(second)
    assert AHEAD in _note(third) and "import" not in _note(third)
    assert {k.name for k in third.kernels} == {"relu_kernel"} and third.kernels[0].registers > 0
    # A build in a started-ahead process reports the candidate's errors as a cold one does.
    assert not failed.ok and failed.failure == "compile_error"
    error = failed.errors[0]
    line = next(i for i, text in enumerate(model_new.read_text().splitlines(), 1) if "undefined_name" in text)
    assert (error.file, error.line) == ("model_new.py", line) and "undefined_name" in error.message


async def _wait_until_started(cache: Path) -> None:
    """The spare process has imported torch and Triton (its staging holds Triton's cache by then)."""
    with anyio.fail_after(60):
        while not any(cache.glob("tmp/*/.triton")):
            await anyio.sleep(0.1)
