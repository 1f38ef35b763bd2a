"""The synthesis checks on a GPU, started as a judge is (another uid, its own namespaces), each candidate
under its own Landlock domain once CUDA is up: a sound program passes eager, compile and the timed
window's measurement; a program that asks for more GPU memory than its share fails with that reason, and
its chunk goes on."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.synth.checks import CheckSettings, ChunkItem, check_chunk
from cuda_agent_mcp.synth.filters import FilterOutcome
from cuda_agent_mcp.synth.gpu_executor import GpuCheckExecutor
from tests.synth import programs

pytestmark = pytest.mark.gpu

GPU_HOG = programs.SOUND.replace(
    "return torch.relu(self.linear(x))", "return torch.empty(1 << 33, device=x.device)"
)  # 32 GiB of float32


def test_the_checks_run_on_the_gpu_in_the_sandbox(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    lock = tmp_path / "gpu0.lock"
    lock.touch(mode=0o644)
    settings = CheckSettings(
        device="cuda", runtime=True, compile=True, timeout_s=240, gpu_memory_bytes=4 * 1024**3, threads=2
    )
    items = [ChunkItem(index=0, code=programs.SOUND), ChunkItem(index=1, code=GPU_HOG)]

    async def run() -> dict[int, list[FilterOutcome]]:
        executor = GpuCheckExecutor()
        return await check_chunk(executor, items, settings, scratch=tmp_path, lock_path=lock, gpu="0")

    results = anyio.run(run)
    sound = {o.name: o for o in results[0]}
    assert [o.name for o in results[0]] == [
        "shape_probe", "eager", "deterministic", "non_degenerate", "compile", "runtime",
    ]  # fmt: skip
    assert all(o.passed for o in results[0]), results[0]
    assert isinstance(sound["runtime"].measured["eager_ms"], float)
    assert sound["compile"].measured["compile_first_call_s"] > 0
    hog = results[1][-1]
    assert (hog.name, hog.passed) == ("eager", False)
    assert "more GPU memory than a candidate may use (4 GiB)" in hog.reason
