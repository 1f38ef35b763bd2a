"""Rejection fine-tuning (the paper's actor warm-up): the rows `cuda-agent trajectories export` writes
(kept trajectories as chat conversations with their tools) train the policy with TRL's SFTTrainer."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from cuda_agent_mcp.env.sft import FilterPolicy, export_sft
from cuda_agent_mcp.training.weights import l2_change, snapshot


class RftReport(BaseModel):
    trajectories: int
    rows: int
    dropped: dict[str, str]
    steps: int
    losses: list[float]
    weight_change: float


def export_rows(
    trajectories: list[Path], out: Path, policy: FilterPolicy | None = None
) -> tuple[int, dict[str, str]]:
    """`trajectories export`: the kept rows in `out`; the dropped trajectories with their reasons."""
    verdicts = export_sft(trajectories, out, policy)
    return sum(v.kept for v in verdicts), {v.path: v.reason for v in verdicts if not v.kept}


def _load_rows(path: Path) -> list[dict[str, object]]:
    """The rows as SFTTrainer's conversational format takes them: messages and tools (metadata left out:
    its keys differ between rows)."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        rows.append({"messages": row["messages"], "tools": row["tools"]})
    return rows


def run_rft(
    policy: Path,
    trajectories: list[Path],
    out: Path,
    steps: int = 3,
    learning_rate: float = 1e-3,
    seed: int = 0,
) -> RftReport:
    """Export, then `steps` SFT steps from `policy`; the model is saved in out/model."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    rows_file = out / "rft_rows.jsonl"
    kept, dropped = export_rows(trajectories, rows_file)
    if kept == 0:
        raise ValueError(f"no trajectory was kept for fine-tuning: {dropped}")
    model = AutoModelForCausalLM.from_pretrained(policy)
    before = snapshot(model)
    args = SFTConfig(
        output_dir=str(out / "rft"),
        max_steps=steps,
        per_device_train_batch_size=1,
        learning_rate=learning_rate,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=seed,
        use_cpu=True,  # beside the judge's GPU, as in grpo.py
        bf16=False,
        max_length=None,
        assistant_only_loss=True,  # the paper's Eq. 2: the policy's actions, not the observations
        disable_tqdm=True,
    )
    trainer = SFTTrainer(
        model=model,
        processing_class=AutoTokenizer.from_pretrained(policy),
        train_dataset=Dataset.from_list(_load_rows(rows_file)),
        args=args,
    )
    trainer.train()
    trainer.save_model(str(out / "model"))
    change = l2_change(model, before)
    losses = [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]
    return RftReport(
        trajectories=len(trajectories),
        rows=kept,
        dropped=dropped,
        steps=trainer.state.global_step,
        losses=losses,
        weight_change=change,
    )
