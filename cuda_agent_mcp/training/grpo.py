"""TRL's GRPOTrainer driving `KernelEnv` through the `environment_factory` adapter, for a few real
optimizer steps, and the evidence that they learned: per step, the rewards' spread within groups, the
gradient norm, and how far the weights moved (weight decay off, so any move is the gradient's)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from cuda_agent_mcp.training.rules import RULE_SETS, RuleSetName
from cuda_agent_mcp.training.warmup import CHAT_KWARGS, INSTRUCTION
from cuda_agent_mcp.training.weights import l2_change, snapshot


class GrpoSettings(BaseModel):
    steps: int = Field(default=2, ge=1, description="optimizer steps of the first run")
    resume_steps: int = Field(default=1, ge=0, description="steps a second run adds from the last checkpoint")
    num_generations: int = Field(default=4, ge=2, description="rollouts per group (one prompt)")
    groups_per_step: int = Field(default=2, ge=1)
    learning_rate: float = Field(default=5e-5, description="1e-3 collapsed the tiny policy in two steps")
    temperature: float = 1.0
    max_completion_length: int = 2048
    seed: int = 0


class StepRecord(BaseModel):
    step: int
    reward_mean: float
    reward_std: float
    groups_with_spread: float = Field(description="share of groups whose rewards were not all equal")
    grad_norm: float
    weight_change: float = Field(description="L2 norm of the change of all weights over this step")
    loss: float | None = None
    seconds: float | None = None


class GrpoReport(BaseModel):
    rules: RuleSetName
    steps: list[StepRecord]
    resumed_from: str | None = None
    checkpoints: list[str]
    episodes: int


def _trainer(
    policy: Path,
    rules: RuleSetName,
    out: Path,
    settings: GrpoSettings,
    max_steps: int,
    callbacks: list[Any],
    envs: str,
) -> Any:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    rule_set = RULE_SETS[rules]
    factory = rule_set.trl_environment(out / "tasks", out / envs)
    batch = settings.num_generations * settings.groups_per_step
    rows = [{"prompt": [{"role": "user", "content": INSTRUCTION}], "task_id": rule_set.task_id}] * (
        batch * (max_steps + 1)
    )
    args = GRPOConfig(
        output_dir=str(out / "checkpoints"),
        max_steps=max_steps,
        per_device_train_batch_size=batch,
        num_generations=settings.num_generations,
        learning_rate=settings.learning_rate,
        weight_decay=0.0,
        beta=0.0,
        temperature=settings.temperature,
        max_completion_length=settings.max_completion_length,
        max_tool_calling_iterations=1,
        chat_template_kwargs=dict(CHAT_KWARGS),
        logging_steps=1,
        save_steps=1,
        save_only_model=False,
        report_to="none",
        seed=settings.seed,
        data_seed=settings.seed,
        # The policy trains on the CPU: the judge times candidates only on a GPU no other process uses
        # (it refuses next to foreign work), so a trainer sharing one GPU with it would mask every
        # rollout. A real run gives the judge GPUs of its own (docs/training.md).
        use_cpu=True,
        bf16=False,
        shuffle_dataset=False,
        lr_scheduler_type="constant",
        disable_tqdm=True,
    )
    return GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(policy),
        processing_class=AutoTokenizer.from_pretrained(policy),
        train_dataset=Dataset.from_list(rows),
        environment_factory=factory,
        args=args,
        callbacks=callbacks,
    )


def _weight_tracker():  # type: ignore[no-untyped-def]
    """A callback recording, per optimizer step, the L2 norm of the change of all weights."""
    import time

    from transformers import TrainerCallback

    class WeightTracker(TrainerCallback):
        def __init__(self) -> None:
            self.changes: dict[int, float] = {}
            self.seconds: dict[int, float] = {}
            self._before: list[Any] = []
            self._started = 0.0

        def on_step_begin(self, args, state, control, model=None, **kwargs):  # type: ignore[no-untyped-def]
            self._before = snapshot(model)
            self._started = time.monotonic()

        def on_step_end(self, args, state, control, model=None, **kwargs):  # type: ignore[no-untyped-def]
            self.changes[state.global_step] = l2_change(model, self._before)
            self.seconds[state.global_step] = time.monotonic() - self._started

    return WeightTracker()


def _records(log_history: list[dict[str, Any]], tracker: Any, after: int = 0) -> list[StepRecord]:
    records = []
    for entry in log_history:
        step = int(entry.get("step", 0))
        if "reward" not in entry or step <= after:
            continue
        records.append(
            StepRecord(
                step=step,
                reward_mean=entry["reward"],
                reward_std=entry.get("reward_std", 0.0),
                groups_with_spread=1.0 - entry.get("frac_reward_zero_std", 1.0),
                grad_norm=entry.get("grad_norm", 0.0),
                weight_change=tracker.changes.get(step, 0.0),
                loss=entry.get("loss"),
                seconds=tracker.seconds.get(step),
            )
        )
    return records


def run_grpo(policy: Path, rules: RuleSetName, out: Path, settings: GrpoSettings | None = None) -> GrpoReport:
    """`settings.steps` steps from `policy`, then a second trainer resuming from the last checkpoint for
    `settings.resume_steps` more. Checkpoints in out/checkpoints."""
    settings = settings or GrpoSettings()
    first = _weight_tracker()
    trainer = _trainer(policy, rules, out, settings, settings.steps, [first], "envs")
    trainer.train()
    records = _records(trainer.state.log_history, first)
    checkpoint = out / "checkpoints" / f"checkpoint-{settings.steps}"
    resumed_from = None
    if settings.resume_steps:
        second = _weight_tracker()
        total = settings.steps + settings.resume_steps
        resumed = _trainer(policy, rules, out, settings, total, [second], "envs-resumed")
        resumed.train(resume_from_checkpoint=str(checkpoint))
        records += _records(resumed.state.log_history, second, after=settings.steps)
        resumed_from = str(checkpoint)
    checkpoints = sorted(p.name for p in (out / "checkpoints").glob("checkpoint-*"))
    episodes = settings.num_generations * settings.groups_per_step * len(records)
    return GrpoReport(
        rules=rules, steps=records, resumed_from=resumed_from, checkpoints=checkpoints, episodes=episodes
    )
