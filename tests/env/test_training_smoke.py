"""Training for real at smoke scale (issue 29): the tiny policy is made and warmed up here, then TRL's own
GRPOTrainer drives KernelEnv for real optimizer steps (resumed from its checkpoint) and SFTTrainer runs
rejection fine-tuning on the committed trajectories, under the CPU rule set that admits pure-PyTorch
candidates. The checks are the run's own: rewards that differ within a group, a non-zero gradient and
weights that moved, every step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("trl")

from cuda_agent_mcp.training.answers import classify
from cuda_agent_mcp.training.smoke import SmokeConfig, run_smoke
from tests.conftest import REPO

pytestmark = pytest.mark.timeout(600)


def test_the_cpu_smoke_trains_with_grpo_through_kernel_env_and_rft(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # never the user's Hugging Face cache
    config = SmokeConfig.model_validate(
        yaml.safe_load((REPO / "examples/rl/recipe/smoke_cpu.yaml").read_text())
    )
    assert config.rules == "cpu-pure-pytorch"  # named as such: not the product's rules
    report = run_smoke(config, tmp_path, log=lambda line: None)

    assert report.problems == [], report.problems
    assert [s.step for s in report.grpo.steps] == [1, 2, 3]
    assert report.grpo.resumed_from is not None and report.grpo.resumed_from.endswith("checkpoint-2")
    assert all(
        s.groups_with_spread > 0 and s.grad_norm > 0 and s.weight_change > 0 for s in report.grpo.steps
    )
    # The warm-up's sampled answers were sometimes right and sometimes wrong (rewards can vary).
    assert report.warmup.right > 0 and report.warmup.wrong > 0
    # The policy is a Hugging Face checkpoint with the Qwen3 chat format and TRL's tool parsing.
    policy = tmp_path / "policy"
    tokenizer_config = json.loads((policy / "tokenizer_config.json").read_text())
    assert (policy / "config.json").exists() and "<tool_call>" in (policy / "tokenizer.json").read_text()
    assert tokenizer_config.get("eos_token") == "<|im_end|>"
    # RFT trained on exported rows; the trajectory written before tool answers were recorded was dropped.
    assert report.rft.rows >= 1 and report.rft.steps == 3
    assert any("no tool message" in reason for reason in report.rft.dropped.values())


def test_known_answers_are_classified_and_anything_else_is_other() -> None:
    from cuda_agent_mcp.training.answers import answers

    for rules in ("cpu-pure-pytorch", "gpu"):
        for answer in answers(rules):
            assert classify(answer.files, rules) == ("right" if answer.right else "wrong")
        assert classify({"model_new.py": "garbage"}, rules) == "other"


@pytest.mark.parametrize(
    "path", sorted((REPO / "examples/rl/recipe").glob("stage*.yaml")), ids=lambda p: p.name
)
def test_the_recipes_trl_stages_load_in_their_trainers_configs(path: Path) -> None:
    from trl import GRPOConfig, SFTConfig

    recipe = yaml.safe_load(path.read_text())
    kinds = {"single_turn_grpo": GRPOConfig, "rft": SFTConfig}
    trainer = dict(recipe["trainer"])
    trainer.update(bf16=False, use_cpu=True)  # the config object is built here, on a CPU
    args = kinds[recipe["stage"]](**trainer)
    assert args.learning_rate == 3e-6 and args.weight_decay == 0.0
    if recipe["stage"] == "single_turn_grpo":
        assert (args.epsilon, args.epsilon_high, args.beta) == (0.2, 0.28, 0.0)
        assert recipe["tools"] == ["write_file"]  # single turn: no execution feedback


def test_the_tokenizer_is_the_same_from_one_run_to_the_next(tmp_path: Path) -> None:
    """Every seed is fixed and the corpus is fixed files: the tokenizer (and so the token ids the policy
    learns) does not depend on the run."""
    from cuda_agent_mcp.training.tiny_policy import TinyPolicySpec, train_tokenizer
    from cuda_agent_mcp.training.warmup import conversations, corpus

    spec = TinyPolicySpec(vocab_size=1024)
    renderer = train_tokenizer(["bootstrap"], spec.model_copy(update={"vocab_size": 300}))
    texts = [corpus(conversations("cpu-pure-pytorch", tmp_path / name, renderer)) for name in ("a", "b")]
    assert texts[0] == texts[1]
    first, second = (train_tokenizer(t, spec).get_vocab() for t in texts)
    assert first == second
    assert {"<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>"} <= set(first)
