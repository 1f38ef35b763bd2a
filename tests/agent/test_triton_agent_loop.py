"""The agent loop in a Triton workspace, against the scripted OpenAI-wire server: the policy is taught the
workspace's language, writes model_new.py with its @triton.jit kernel, and compiles it through the same
tools; `cuda-agent optimize --language triton` lays such a workspace out. Verification needs a GPU (a
Triton kernel launches on CUDA tensors only), so these runs stop at compile."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import anyio
import pytest

from cuda_agent_mcp.agent import best_of, load_policy, load_trajectory, run_episode
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session
from cuda_agent_mcp.workspace import Workspace
from tests.agent.conftest import CPU
from tests.agent.scripted_llm import ScriptedLLM, serve, tool_call, turn
from tests.conftest import EXAMPLES
from tests.languages.triton_workspaces import triton_model_new

pytestmark = pytest.mark.skipif(
    find_spec("triton") is None, reason="needs triton (CUDA builds of torch bring it)"
)

TRITON_GUIDE = "This workspace's language is\n**triton**"
CUDA_GUIDE = "REGISTER_BINDING"  # the CUDA language's binding macro: its guide teaches it
CUPY_GUIDE = "**cupy**"


def _triton_session(root: Path, cache: Path) -> Session:
    task = load_task_file(EXAMPLES / "relu" / "model.py", task_id="examples/relu")
    return Session.create(task, root, cache_dir=cache, language="triton")


def _write_and_compile() -> list[dict]:
    return [
        turn(tool_call("write_file", {"path": "model_new.py", "content": triton_model_new()})),
        turn(tool_call("compile", {})),
    ]


def _compiled(trajectory: Path) -> dict:
    (record,) = [r for r in load_trajectory(trajectory).tools if r.name == "compile"]
    assert record.valid and record.result is not None, record.error
    return record.result


def test_a_policy_in_a_triton_workspace_is_taught_triton_and_builds_its_kernel(
    scripted: Callable[..., Any], tmp_path: Path, shared_build_cache: Path
) -> None:
    session = _triton_session(tmp_path / "ws", shared_build_cache)
    skeleton = (session.workspace.root / "model_new.py").read_text()
    with scripted(_write_and_compile()) as (llm, preset, client):
        result = anyio.run(lambda: run_episode(session, preset, client, tmp_path / "t.jsonl", settings=CPU))

    assert result.stop_reason == "policy_finished" and not result.truncated, result
    system, task = (m["content"] for m in llm.requests[0]["messages"][:2])
    assert TRITON_GUIDE in system and CUDA_GUIDE not in system and CUPY_GUIDE not in system
    # The default preset's Triton prompt: no kernels/ directory or binding harness to tell of.
    assert "hand-written Triton kernels" in system and "kernels/" not in system
    assert "binding harness" not in system
    assert "Triton kernels (@triton.jit) in model_new.py" in task
    assert "kernels/" not in task and "_binding.cpp" not in task
    built = _compiled(tmp_path / "t.jsonl")
    assert built["ok"] and built["language"] == "triton", built["summary"]
    assert [k["name"] for k in built["kernels"]] == ["relu_kernel"]
    # Nothing verified: the workspace is back as it was, and the trajectory keeps what was written.
    assert (session.workspace.root / "model_new.py").read_text() == skeleton
    trajectory = load_trajectory(tmp_path / "t.jsonl")
    assert trajectory.end is not None and trajectory.end.last_files["model_new.py"] == triton_model_new()
    assert trajectory.header.environment["language"] == "triton"


def test_parallel_samples_of_a_triton_workspace_are_triton_workspaces(
    scripted: Callable[..., Any], tmp_path: Path, shared_build_cache: Path
) -> None:
    session = _triton_session(tmp_path / "ws", shared_build_cache)
    scripts = {seed: _write_and_compile() for seed in (0, 1)}
    with scripted([], by_seed=scripts) as (llm, preset, client):
        winner, results = anyio.run(
            lambda: best_of(session, preset, client, 2, tmp_path / "samples", settings=CPU, seed=0)
        )

    assert winner is None and len(results) == 2  # compiled, never verified
    for index in (0, 1):
        built = _compiled(tmp_path / "samples" / f"sample-{index}.jsonl")
        assert built["ok"] and built["language"] == "triton", built["summary"]
    first_prompts = [r["messages"][0]["content"] for r in llm.requests if len(r["messages"]) == 2]
    assert len(first_prompts) == 2 and all(TRITON_GUIDE in p for p in first_prompts)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent_mcp", *args], capture_output=True, text=True, timeout=600, cwd=cwd
    )


def test_optimize_lays_out_a_triton_workspace_and_an_existing_one_keeps_its_language(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    common = ["--device", "cpu", "--baselines", "skip", "--json"]
    with serve(ScriptedLLM(replies=_write_and_compile())) as llm:
        done = _cli(
            "optimize", "examples/relu", "--language", "triton", "--base-url", llm.url,
            "--workspace", str(workspace), "--trajectory-dir", str(tmp_path / "runs"), *common, cwd=tmp_path,
        )  # fmt: skip
    # Compiled, not verified (that needs a GPU): the run ends without a winner, its report printed.
    assert done.returncode == 1, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["best"] is None and report["samples"][0]["stop_reason"] == "policy_finished"
    assert Workspace.open(workspace).language == "triton"
    assert TRITON_GUIDE in (workspace / "SKILL.md").read_text()
    assert not (workspace / "binding.cpp").exists() and not (workspace / "kernels").exists()
    built = _compiled(tmp_path / "runs" / "trajectory.jsonl")
    assert built["ok"] and [k["name"] for k in built["kernels"]] == ["relu_kernel"], built["summary"]
    system = llm.requests[0]["messages"][0]["content"]
    assert TRITON_GUIDE in system and CUDA_GUIDE not in system

    # A workspace directory keeps the language it was laid out in: asking for another is refused early.
    cupy = tmp_path / "cupy-ws"
    laid_out = _cli("workspace", "new", "examples/relu", str(cupy), "--language", "cupy", cwd=tmp_path)
    assert laid_out.returncode == 0, laid_out.stderr
    refused = _cli(
        "optimize", str(cupy), "--language", "triton", "--base-url", "http://127.0.0.1:9/v1",
        "--runs-dir", str(tmp_path / "refused"), *common, cwd=tmp_path,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert "is a workspace for cupy kernels" in line and "triton" in line, line
    assert not (tmp_path / "refused").exists()
    assert Workspace.open(cupy).language == "cupy"


@pytest.mark.parametrize("policy", ["kevin-32b", "cudallm-8b"])
def test_a_text_format_preset_has_a_triton_prompt_that_asks_for_model_new_only(policy: str) -> None:
    preset = load_policy(policy)  # cudallm-8b shares kevin-32b's prompt file, and so its siblings
    triton, cupy, cuda = (preset.system_prompt(language) for language in ("triton", "cupy", "cuda"))
    assert triton != cupy and triton != cuda
    # The preset's own Triton sibling, with the Triton guide in place of the mark.
    assert "{{SKILL_GUIDE}}" not in triton and TRITON_GUIDE in triton
    assert "```python model_new.py" in triton and "@triton.jit" in triton
    assert "kernels/" not in triton and "_binding.cpp" not in triton and CUDA_GUIDE not in triton


def test_a_text_format_policy_in_a_triton_workspace_is_asked_for_model_new_and_its_answer_is_built(
    scripted: Callable[..., Any], tmp_path: Path, shared_build_cache: Path
) -> None:
    session = _triton_session(tmp_path / "ws", shared_build_cache)
    answer = f"Here it is.\n```python model_new.py\n{triton_model_new()}```"
    with scripted([turn(content=answer)], policy="kevin-32b") as (llm, preset, client):
        anyio.run(lambda: run_episode(session, preset, client, tmp_path / "t.jsonl", settings=CPU))

    system, task = (m["content"] for m in llm.requests[0]["messages"][:2])
    assert TRITON_GUIDE in system and CUDA_GUIDE not in system and CUPY_GUIDE not in system
    assert "```python model_new.py (its @triton.jit kernels and ModelNew)" in task
    assert "kernels/" not in task and "_binding.cpp" not in task
    # The answer was written, built with Triton and judged (running it needs a GPU, not here).
    feedback = llm.requests[1]["messages"][-1]["content"]
    assert feedback.startswith("Evaluation of your answer (turn 1)")
    assert '"build_key"' in feedback and "compile_error" not in feedback
    trajectory = load_trajectory(tmp_path / "t.jsonl")
    assert trajectory.header.environment["language"] == "triton"
