"""A builder that keeps building CuPy workspaces starts its next NVRTC process ahead (build/warm_compile.py):
the library is loaded before the build asks, and the build's results are those of a fresh process."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.build.nvrtc_compile import GO_FILE, READY_FILE, _source_named_by_go
from cuda_agent_mcp.results import BuildResult
from cuda_agent_mcp.tools import compile_kernels
from tests.languages.cupy_workspaces import SIMPLE_KERNEL, cupy_session

pytestmark = pytest.mark.nvcc


def _waiting(cache: Path) -> set[Path]:
    """Staging directories of NVRTC processes started ahead that have loaded the library."""
    return {ready.parent for ready in cache.glob(f"tmp/*/{READY_FILE}")}


async def _until_one_waits(cache: Path) -> Path:
    with anyio.fail_after(60):
        while not (found := _waiting(cache)):
            await anyio.sleep(0.05)
    assert len(found) == 1
    return found.pop()


def test_from_the_third_build_on_the_nvrtc_process_was_started_ahead(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    session = cupy_session(tmp_path, cache, kernels={"relu.cu": SIMPLE_KERNEL})
    kernel = session.workspace.root / "kernels" / "relu.cu"
    broken = SIMPLE_KERNEL.replace("fmaxf(x[i], 0.f)", "fmaxf(x[i], undefined_value)")

    async def builds() -> tuple[list[BuildResult], list[bool]]:
        results, served = [], []
        for source in (*(SIMPLE_KERNEL.replace("0.f)", f"0.f * {k})") for k in (1, 2, 3)), broken):
            kernel.write_text(source)
            waiting = _waiting(cache)
            results.append(await compile_kernels(session))
            # A process started ahead that served the build is gone with its staging.
            served.append(bool(waiting) and not any(path.exists() for path in waiting))
            if len(results) >= 2:
                await _until_one_waits(cache)
        return results, served

    (first, second, third, failed), served = anyio.run(builds)
    assert all(r.ok for r in (first, second, third)), [r.summary for r in (first, second, third)]
    assert served == [False, False, True, True]
    # The same build as in a fresh process: the kernel, its resources, the generated module's note.
    assert [k.name for k in third.kernels] == [k.name for k in first.kernels] == ["relu_kernel"]
    assert third.kernels[0].registers > 0 and third.files[0].action == "compiled"
    assert third.summary.endswith("kernels: relu_kernel")
    # Its compile time is the build's, not the time it waited.
    assert third.files[0].wall_s < 5
    # A compile error in a process started ahead is reported at its line, as a fresh one reports it.
    assert not failed.ok and failed.failure == "compile_error"
    error = failed.errors[0]
    assert (error.file, error.line) == ("kernels/relu.cu", 3) and "undefined_value" in error.message


def test_a_one_shot_build_leaves_no_process_waiting(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    session = cupy_session(tmp_path, cache, kernels={"relu.cu": SIMPLE_KERNEL})
    assert anyio.run(compile_kernels, session).ok
    assert not _waiting(cache)


@pytest.mark.parametrize(
    "named", ["../outside.cu", "/etc/passwd", "kernels/../../outside.cu", "", "missing.cu"]
)
def test_a_process_started_ahead_compiles_only_a_source_inside_its_staging(
    named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The GO file is the builder's, but the process trusts nothing it reads: a name that leaves staging, or
    # names nothing there, ends it without compiling.
    staging = tmp_path / "staging"
    (staging / "kernels").mkdir(parents=True)
    (staging / "kernels" / "relu.cu").write_text(SIMPLE_KERNEL)
    (tmp_path / "outside.cu").write_text(SIMPLE_KERNEL)
    monkeypatch.chdir(staging)
    (staging / GO_FILE).write_text(named)
    assert _source_named_by_go(1.0) is None
    assert "names no source in staging" in capsys.readouterr().err


def test_a_process_started_ahead_compiles_the_source_its_go_file_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "relu.cu").write_text(SIMPLE_KERNEL)
    monkeypatch.chdir(tmp_path)
    assert _source_named_by_go(0.05) is None  # no GO file yet: it waits, then gives up
    (tmp_path / GO_FILE).write_text("kernels/relu.cu\n")
    assert _source_named_by_go(1.0) == "./kernels/relu.cu"
