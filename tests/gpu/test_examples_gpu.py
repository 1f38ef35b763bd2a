"""On a GPU: every bundled example builds and its ModelNew matches Model on fresh random inputs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.tools import Session, compile_kernels
from tests.conftest import EXAMPLES, REPO

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

# Run in a child process per example: each extension is the module `cuda_extension`, importable once per process.
CHECK = r"""
import sys, torch
sys.path.insert(0, sys.argv[1])
import model, model_new
torch.manual_seed(int(sys.argv[2]))
init = model.get_init_inputs()
ref = model.Model(*init).cuda().eval()
new = model_new.ModelNew(*init).cuda().eval()
new.load_state_dict(ref.state_dict())
worst = 0.0
with torch.no_grad():
    for trial in range(3):
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in model.get_inputs()]
        expected, actual = ref(*inputs), new(*inputs)
        torch.cuda.synchronize()
        assert actual.shape == expected.shape and actual.dtype == expected.dtype, (actual.shape, expected.shape)
        torch.testing.assert_close(actual, expected, atol=1e-2, rtol=1e-2)
        worst = max(worst, (actual - expected).abs().max().item())
print(f"max abs error {worst:.3g}")
"""


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.iterdir() if (p / "model.py").exists()))
def test_bundled_example_builds_and_matches_its_reference_on_the_gpu(
    name: str, shared_build_cache: Path
) -> None:
    session = Session.open(EXAMPLES / name, cache_dir=shared_build_cache)
    result = anyio.run(compile_kernels, session)
    assert result.ok, result.summary
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(session.workspace.root), "1234"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "max abs error" in done.stdout
