"""One scripted agent trajectory end to end on a GPU: a wrong kernel, then the correct fast one.

    python benchmarks/agent_trajectory.py --out DIR

The policy is the scripted OpenAI-wire server of the tests (no language model runs here); everything
else is real: the OpenAI client, the tool layer, nvcc, the judge, the timed baselines. Task: the
bundled bias_add_relu example (relu(x + bias), 8192 x 4096 fp32), where one fused pass beats eager's
two kernels. Script: write the fused kernel with the bias forgotten, compile and verify it (wrong
output), put the bias back with edit_file, evaluate (verify + profile + reward), stop.
Writes DIR/trajectory.jsonl and DIR/agent_trajectory.json (the loop's result and each step's verdict).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

import anyio

from cuda_agent_mcp.agent import EnvironmentSettings, PolicyClient, load_policy, load_trajectory, run_episode
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session
from tests.agent.scripted_llm import ScriptedLLM, serve, tool_call, turn

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "bias_add_relu"
TASK = EXAMPLE / "model.py"
WITH_BIAS = "x[i] + __ldg(bias + i % features)"


def script() -> list[dict]:
    kernel = (EXAMPLE / "kernels" / "bias_add_relu.cu").read_text()
    assert WITH_BIAS in kernel
    files = {
        "kernels/bias_add_relu.cu": kernel.replace(WITH_BIAS, "x[i]"),  # the bug: the bias is forgotten
        "kernels/bias_add_relu_binding.cpp": (EXAMPLE / "kernels" / "bias_add_relu_binding.cpp").read_text(),
        "model_new.py": (EXAMPLE / "model_new.py").read_text(),
    }
    return [
        turn(*(tool_call("write_file", {"path": p, "content": c}) for p, c in files.items())),
        turn(tool_call("compile", {}), tool_call("verify", {"trials": 5})),
        turn(
            tool_call(
                "edit_file",
                {
                    "path": "kernels/bias_add_relu.cu",
                    "old_text": "fmaxf(x[i], 0.f)",
                    "new_text": f"fmaxf({WITH_BIAS}, 0.f)",
                },
            )
        ),
        turn(tool_call("evaluate", {"trials": 5})),
        turn(content="Done: the fused kernel is verified and timed."),
    ]


async def run(out: Path) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="cuda-agent-trajectory-"))
    try:
        session = Session.create(
            load_task_file(TASK, task_id="example/bias_add_relu"), work / "ws", cache_dir=work / "cache"
        )
        with serve(ScriptedLLM(replies=script())) as llm:
            preset = load_policy("cuda-agent")
            client = PolicyClient(preset, base_url=llm.url, api_key="scripted")
            result = await run_episode(
                session,
                preset,
                client,
                out / "trajectory.jsonl",
                settings=EnvironmentSettings(device="cuda", audit=True, baselines="measure"),
                seed=0,
            )
            await client.close()
        steps = [
            {
                "turn": r.turn,
                "tool": r.name,
                "valid": r.valid,
                "wall_s": r.wall_s,
                "verified": r.verified,
                "reward": r.reward,
                "error": r.error,
                "verdict": (r.result or {}).get("verdict")
                or ((r.result or {}).get("verify") or {}).get("verdict"),
            }
            for r in load_trajectory(out / "trajectory.jsonl").tools
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "benchmark": "agent_trajectory",
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "task": "example/bias_add_relu, relu(x + bias), x 8192 x 4096 fp32",
        "result": result.model_dump(mode="json", exclude={"best": {"files"}}),
        "steps": steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result = anyio.run(run, args.out)
    text = json.dumps(result, indent=2)
    (args.out / "agent_trajectory.json").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
