"""The verifiers (v1) taskset: tasks from the catalog, and its reward scoring a trace's last answer for real."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

# verifiers pins packages the MCP server does not accept: CI runs this file in an environment of its own
# (.ci/run); elsewhere it is skipped.
vf = pytest.importorskip("verifiers.v1")
from verifiers.v1.graph import MessageNode  # noqa: E402
from verifiers.v1.trace import AgentInfo, TraceTask  # noqa: E402
from verifiers.v1.types import AssistantMessage  # noqa: E402

from cuda_agent_mcp.adapters.verifiers import KernelTask, KernelTaskset, load_taskset  # noqa: E402
from tests.agent.conftest import BROKEN, CORRECT, KERNELS, SMALL_INPUTS, WRONG  # noqa: E402
from tests.conftest import EXAMPLES  # noqa: E402

pytestmark = pytest.mark.nvcc

CPU_JUDGING = {"device": "cpu", "audit": False, "baselines": "skip", "trials": 2}


@pytest.fixture
def task(tmp_path: Path) -> KernelTask:
    source = tmp_path / "small_bias_add_relu.py"
    source.write_text((EXAMPLES / "bias_add_relu" / "model.py").read_text().replace(*SMALL_INPUTS))
    taskset = load_taskset(tasks=[str(source)], task=CPU_JUDGING)
    (found,) = [t for t in taskset if "small_bias_add_relu" in t.data.task_id]
    return found


def _answer(model_new: str) -> str:
    files = {"model_new.py": model_new, **{f"kernels/{p.name}": p.read_text() for p in KERNELS.iterdir()}}
    return "Here are the files.\n" + "".join(f"```python {path}\n{text}```\n" for path, text in files.items())


def _scored(task: KernelTask, answer: str) -> vf.Trace:
    trace = vf.Trace(
        task=TraceTask(type=type(task).__name__, data=task.data),
        agent=AgentInfo(config=vf.AgentConfig()),
        nodes=[MessageNode(message=AssistantMessage(content=answer), sampled=True)],
    )
    anyio.run(task.score, trace)
    return trace


def test_verifiers_loads_the_example_taskset_by_id_and_it_lists_the_catalog(monkeypatch) -> None:
    from verifiers.v1.utils.loaders import taskset_class

    monkeypatch.syspath_prepend(str(EXAMPLES.parent / "examples" / "rl"))
    assert taskset_class("cuda_agent_kernels") is KernelTaskset
    tasks = list(load_taskset())
    assert {t.data.task_id for t in tasks} >= {"examples/relu", "examples/bias_add_relu", "examples/row_sum"}
    first = tasks[0]
    assert "```python" in first.data.prompt and "fenced block" in first.data.prompt
    assert first.data.system_prompt


def test_a_correct_answer_verifies_and_a_wrong_one_does_not(task: KernelTask) -> None:
    correct = _scored(task, _answer(CORRECT))
    assert correct.metrics["compile_ok"] == 1.0 and correct.metrics["verify_ok"] == 1.0
    # On the CPU there are no baselines to beat: the milestone schedule fails closed.
    assert correct.rewards["kernel_reward"].score == -1.0
    wrong = _scored(task, _answer(WRONG))
    assert wrong.metrics["compile_ok"] == 1.0 and wrong.metrics["verify_ok"] == 0.0
    assert wrong.rewards["kernel_reward"].score == -1.0


def test_an_answer_without_files_or_that_does_not_compile_scores_the_failure_reward(task: KernelTask) -> None:
    empty = _scored(task, "I think the kernel should use shared memory.")
    assert empty.rewards["kernel_reward"].score == -1.0 and empty.metrics["compile_ok"] == 0.0
    broken = _scored(task, _answer(BROKEN))
    assert broken.rewards["kernel_reward"].score == -1.0 and broken.metrics["verify_ok"] == 0.0


def test_a_cupy_taskset_asks_for_cupy_answers(tmp_path: Path) -> None:
    source = tmp_path / "small_bias_add_relu.py"
    source.write_text((EXAMPLES / "bias_add_relu" / "model.py").read_text().replace(*SMALL_INPUTS))
    taskset = load_taskset(tasks=[str(source)], task={**CPU_JUDGING, "language": "cupy"})
    (found,) = [t for t in taskset if "small_bias_add_relu" in t.data.task_id]
    assert found.config.language == "cupy"
    assert "**cupy**" in found.data.system_prompt and "REGISTER_BINDING" not in found.data.system_prompt
    assert "_binding.cpp" not in found.data.prompt and "kernels/my_op.cu" in found.data.prompt


def test_a_triton_taskset_asks_for_triton_answers(tmp_path: Path) -> None:
    source = tmp_path / "small_bias_add_relu.py"
    source.write_text((EXAMPLES / "bias_add_relu" / "model.py").read_text().replace(*SMALL_INPUTS))
    taskset = load_taskset(tasks=[str(source)], task={**CPU_JUDGING, "language": "triton"})
    (found,) = [t for t in taskset if "small_bias_add_relu" in t.data.task_id]
    assert found.config.language == "triton"
    assert "**triton**" in found.data.system_prompt and "REGISTER_BINDING" not in found.data.system_prompt
    assert "```python model_new.py (its @triton.jit kernels and ModelNew)" in found.data.prompt
    assert "kernels/" not in found.data.prompt and "_binding.cpp" not in found.data.prompt
