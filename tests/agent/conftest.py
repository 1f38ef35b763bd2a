"""A CPU session on the bias_add_relu example (small inputs) and helpers to script a policy."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_agent_mcp.agent import EnvironmentSettings, load_policy
from cuda_agent_mcp.agent.client import PolicyClient
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session
from tests.agent.scripted_llm import ScriptedLLM, serve
from tests.conftest import EXAMPLES
from tests.evaluator.test_tools_cpu import SMALL_INPUTS, TORCH_CANDIDATE

KERNELS = EXAMPLES / "bias_add_relu" / "kernels"

# PyTorch candidates: the judge runs on the CPU here, where the example's CUDA kernel cannot.
CORRECT = TORCH_CANDIDATE.replace("{suffix}", "")
WRONG = TORCH_CANDIDATE.replace("{suffix}", " * 2")
BROKEN = "class ModelNew(:\n"

# The environment a CPU test can judge in: no GPU, and PyTorch candidates accepted.
CPU = EnvironmentSettings(device="cpu", audit=False, baselines="skip")


def make_session(root: Path, cache: Path, name: str = "ws") -> Session:
    reference = root / "reference.py"
    reference.write_text((EXAMPLES / "bias_add_relu" / "model.py").read_text().replace(*SMALL_INPUTS))
    return Session.create(
        load_task_file(reference, task_id="cpu/bias_add_relu"), root / name, cache_dir=cache
    )


@pytest.fixture
def session(tmp_path: Path, shared_build_cache: Path) -> Session:
    return make_session(tmp_path, shared_build_cache)


@pytest.fixture
def kernel_files() -> dict[str, str]:
    return {f"kernels/{p.name}": p.read_text() for p in KERNELS.iterdir() if p.is_file()}


@pytest.fixture
def scripted():
    """Start a scripted endpoint: `with scripted(replies) as (llm, client): ...`."""

    def start(replies: list[dict], policy: str = "cuda-agent", **llm_options):
        import contextlib

        @contextlib.contextmanager
        def running():
            llm = ScriptedLLM(replies=list(replies), **llm_options)
            with serve(llm):
                preset = load_policy(policy)
                yield llm, preset, PolicyClient(preset, base_url=llm.url, api_key="test")

        return running()

    return start


def copy_example_kernels(session: Session) -> None:
    shutil.copytree(KERNELS, session.workspace.root / "kernels", dirs_exist_ok=True)
