"""Benchmark: rollouts per minute through `KernelEnv` with the tiny policy, and where their time goes.

    python benchmarks/rollout_throughput.py --policy RUN/policy --episodes 16 --concurrency 2 --out F.json

The policy is the smoke run's warmed tiny policy (examples/rl/smoke_train.py --config
examples/rl/recipe/smoke_gpu.yaml): it samples in milliseconds, so the figure is the environment's cost.
Each episode: reset on the bundled ReLU task, the policy's first answer (its `write_file` calls), `compile`,
then `submit` (verify, profile, reward), as a GRPO rollout of the smoke's single-turn stage runs. The
policy's answers are sampled before the clock starts. The time of each episode is split into the file
writes, the build, and the evaluation's verify and profile (the judge's wait for the GPU is part of them
and reported too). Compare with
`benchmarks/score_throughput.py` (score_batch, evaluations per second without a policy or episodes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from cuda_agent_mcp.env.kernel_env import KernelEnv, ToolCall  # noqa: E402
from cuda_agent_mcp.tasks import TaskCatalog  # noqa: E402
from cuda_agent_mcp.training.answers import classify  # noqa: E402
from cuda_agent_mcp.training.rules import RULE_SETS  # noqa: E402
from cuda_agent_mcp.training.warmup import conversations, sample_written_files  # noqa: E402


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import add_response_schema

    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", type=Path, required=True)
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=0.8, help="the GPU smoke's GRPO temperature")
    parser.add_argument("--work", type=Path, default=Path("/tmp/rollout-throughput"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rules = RULE_SETS["gpu"]
    tokenizer = add_response_schema(AutoTokenizer.from_pretrained(args.policy))
    # On the CPU: the judge refuses to time beside another process's GPU context (see training/grpo.py).
    model = AutoModelForCausalLM.from_pretrained(args.policy).eval()
    prompt = conversations("gpu", args.work / "prompt", tokenizer)[0].turns[0][0]
    task = rules.task_file(args.work / "tasks")
    catalog = TaskCatalog([task], include_bundled=False)
    episodes: list[dict[str, object]] = []
    # The answers are sampled before the clock starts (one batch, on the CPU), so the figure is the
    # environment's cost; the sampling time is reported beside it.
    sampling_started = time.monotonic()
    answers = sample_written_files(model, tokenizer, prompt, args.episodes + 1, args.temperature, 3072)
    policy_s = time.monotonic() - sampling_started

    async def episode(index: int) -> None:
        env = KernelEnv(catalog=catalog, settings=rules.settings, root=args.work / f"env-{index}")
        started = time.monotonic()
        env.start(rules.task_id)
        files = answers[index + 1]
        t0 = time.monotonic()
        for path, content in files.items():
            await env.step(ToolCall(name="write_file", arguments={"path": path, "content": content}))
        writes_s = time.monotonic() - t0
        # The build as its own step (the evaluation then finds it in the cache), so its share is the
        # compile's whole cost, failed builds included.
        t0 = time.monotonic()
        await env.step(ToolCall(name="compile"))
        build_s = time.monotonic() - t0
        t0 = time.monotonic()
        final = await env.step(ToolCall(name="submit"))
        evaluate_s = time.monotonic() - t0
        result = env.last_step.result if env.last_step is not None else None
        verify = getattr(result, "verify", None)
        profile = getattr(result, "profile", None)
        phases = {**(getattr(verify, "phases_s", {}) or {})}
        episodes.append(
            {
                "answer": classify(files, "gpu"),
                "reward": final.reward,
                "mask": final.info.mask,
                "wall_s": time.monotonic() - started,
                "writes_s": writes_s,
                "evaluate_s": evaluate_s,
                "build_s": build_s,
                "verify_s": getattr(verify, "wall_s", 0.0) or 0.0,
                "profile_s": getattr(profile, "wall_s", 0.0) or 0.0,
                "gpu_wait_s": phases.get("gpu_wait", 0.0)
                + ((getattr(profile, "phases_s", {}) or {}).get("gpu_wait", 0.0)),
            }
        )
        env.dispose()

    async def run() -> float:
        await episode(-1)  # warm: the build cache, the judge, the baselines (not counted)
        episodes.clear()
        started = time.monotonic()
        limiter = anyio.CapacityLimiter(args.concurrency)

        async def bounded(i: int) -> None:
            async with limiter:
                await episode(i)

        async with anyio.create_task_group() as group:
            for i in range(args.episodes):
                group.start_soon(bounded, i)
        return time.monotonic() - started

    elapsed = anyio.run(run)
    total = sum(float(e["wall_s"]) for e in episodes)  # type: ignore[arg-type]
    share = {
        k: round(sum(float(e[k]) for e in episodes) / total, 4)
        for k in ("writes_s", "build_s", "verify_s", "profile_s", "gpu_wait_s")
    }  # type: ignore[arg-type]
    summary = {
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "machine": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "episodes": len(episodes),
        "concurrency": args.concurrency,
        "elapsed_s": round(elapsed, 2),
        "policy_sampling_s": round(policy_s, 2),
        "policy_sampling_note": f"{args.episodes + 1} answers in one batch on the CPU, before the clock",
        "episodes_per_minute": round(60 * len(episodes) / elapsed, 2),
        "episode_wall_s_median": round(statistics.median(float(e["wall_s"]) for e in episodes), 3),  # type: ignore[arg-type]
        "share_of_episode_time": share,
        "answers": {k: sum(1 for e in episodes if e["answer"] == k) for k in ("right", "wrong", "other")},
        "rewards": sorted(float(e["reward"]) for e in episodes),  # type: ignore[arg-type]
        "masked": sum(1 for e in episodes if e["mask"]),
        "per_episode": episodes,
    }
    text = json.dumps(summary, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
