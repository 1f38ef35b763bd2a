"""The verl recipe (examples/rl/recipe/verl) as verl 0.9.1 itself reads it: Hydra composes each file with
verl's own ppo_trainer config, verl's validate_config and config dataclasses check it, verl's tool registry
builds our tools from the path it names, and verl's reward loader and reward manager score with our
compute_score. None of this needs a GPU, Ray or a rollout server; running the recipe needs all three (a
vLLM or SGLang server above all), so it only ever runs on a real cluster."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("verl")

import numpy as np
import torch
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf
from verl import DataProto
from verl.tools.tool_registry import load_all_tools
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo.reward import get_custom_reward_fn, resolve_reward_manager_cls
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import omega_conf_to_dataclass, validate_config
from verl.utils.import_utils import resolve_config_path
from verl.workers.config import FSDPActorConfig, FSDPCriticConfig, HFModelConfig, RolloutConfig

from cuda_agent_mcp.adapters import verl as verl_adapter
from cuda_agent_mcp.adapters.verl import VerlKernelTool
from cuda_agent_mcp.agent import load_policy
from cuda_agent_mcp.evaluation.reward import FAIL
from tests.agent.conftest import CORRECT, KERNELS, SMALL_INPUTS
from tests.conftest import EXAMPLES, REPO
from tests.env.verl_calls import call_tool

RECIPE = REPO / "examples" / "rl" / "recipe" / "verl"
TOOLS_YAML = REPO / "examples" / "rl" / "verl_tools.yaml"
FULL = ("qwen3_8b", "qwen3_32b")
RUNNABLE = (*FULL, "smoke")
# What the full recipes must say (paper section 4.1).
PAPER_CONTEXT = 131_072
PAPER_BATCH = 1024
PAPER_TURNS = 150
PAPER_PPO_STEPS = 150


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local model directory verl's HFModelConfig can read: a 1-layer Qwen3 config and a word-level
    tokenizer (no weights; nothing here loads them)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    path = tmp_path_factory.mktemp("tiny-policy")
    vocab = {token: i for i, token in enumerate(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "[UNK]"])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.save_pretrained(path)
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 8,
        "vocab_size": len(vocab),
        "max_position_embeddings": 256,
    }
    (path / "config.json").write_text(json.dumps(config))
    return path


def _compose(name: str, overrides: Sequence[str] = ()) -> DictConfig:
    """`python -m verl.trainer.main_ppo --config-path=RECIPE --config-name=NAME OVERRIDES`, up to the
    config verl's main receives, resolved as verl's TaskRunner resolves it."""
    with initialize_config_dir(config_dir=str(RECIPE), version_base=None):
        config = compose(config_name=name, overrides=list(overrides))
    OmegaConf.resolve(config)
    return config


@pytest.fixture(scope="module")
def recipes(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, DictConfig]:
    """Each runnable file composed as its README command runs it: the full ones with the model and data
    on the command line, the smoke one from its environment variables."""
    data = tmp_path_factory.mktemp("data")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CUDA_AGENT_REPO", str(REPO))
        env.setenv("CUDA_AGENT_TINY_POLICY", str(tiny_model))
        env.setenv("CUDA_AGENT_SMOKE_DATA", str(data))
        command_line = [
            f"actor_rollout_ref.model.path={tiny_model}",
            f"data.train_files={data}/train.parquet",
            f"data.val_files={data}/val.parquet",
        ]
        return {name: _compose(name, command_line if name in FULL else []) for name in RUNNABLE}


def _dataclasses(config: DictConfig) -> SimpleNamespace:
    """The sections verl turns into its dataclasses (ray trainer, workers, agent loop), converted the way
    verl converts them, so a wrong type or an unknown key fails here."""
    return SimpleNamespace(
        actor=omega_conf_to_dataclass(config.actor_rollout_ref.actor),
        critic=omega_conf_to_dataclass(config.critic),
        rollout=omega_conf_to_dataclass(config.actor_rollout_ref.rollout),
        model=omega_conf_to_dataclass(config.actor_rollout_ref.model),
        algorithm=omega_conf_to_dataclass(config.algorithm),
    )


def _critic_only_steps(config: DictConfig) -> int:
    """Value-pretraining steps under verl's rule (trainer/ppo/v1/trainer_base.py): steps count from 1 and
    the actor is updated once critic_warmup <= step, so critic_warmup=1 means no warm-up at all."""
    trainer = config.trainer
    return sum(1 for step in range(1, trainer.total_training_steps + 1) if step < trainer.critic_warmup)


@pytest.mark.parametrize("name", RUNNABLE)
def test_each_recipe_passes_verls_own_validation(recipes: dict[str, DictConfig], name: str) -> None:
    config = recipes[name]
    assert need_critic(config) and not need_reference_policy(config)  # GAE with a critic, no KL
    validate_config(config, use_reference_policy=False, use_critic=True)
    parts = _dataclasses(config)
    assert isinstance(parts.actor, FSDPActorConfig) and isinstance(parts.critic, FSDPCriticConfig)
    assert isinstance(parts.rollout, RolloutConfig) and isinstance(parts.algorithm, AlgoConfig)
    assert isinstance(parts.model, HFModelConfig) and isinstance(parts.critic.model, HFModelConfig)
    assert parts.critic.model.path == parts.model.path  # the critic starts from the actor's checkpoint

    # What verl only finds out at run time. A whole trajectory fits in a micro-batch (verl's
    # rearrange_micro_batches asserts it) for the actor, its log-prob pass and the critic, each with the
    # sequence-parallel size its FSDP engine really gets; the engine workers assert the two dynamic-batch
    # switches agree; and vLLM's context holds prompt and response.
    longest = config.data.max_prompt_length + config.data.max_response_length
    actor_sp = parts.actor.engine.ulysses_sequence_parallel_size
    critic_sp = parts.critic.engine.ulysses_sequence_parallel_size
    assert parts.actor.use_dynamic_bsz and parts.critic.use_dynamic_bsz
    assert parts.rollout.log_prob_use_dynamic_bsz == parts.actor.use_dynamic_bsz
    assert parts.actor.ppo_max_token_len_per_gpu * actor_sp >= longest
    assert parts.rollout.log_prob_max_token_len_per_gpu * actor_sp >= longest
    assert parts.critic.ppo_max_token_len_per_gpu * critic_sp >= longest
    assert parts.rollout.max_model_len >= longest
    gpus = config.trainer.nnodes * config.trainer.n_gpus_per_node
    assert (
        gpus % actor_sp == 0
        and gpus % critic_sp == 0
        and gpus % parts.rollout.tensor_model_parallel_size == 0
    )


@pytest.mark.parametrize("name", FULL)
def test_the_full_recipes_carry_the_papers_numbers(recipes: dict[str, DictConfig], name: str) -> None:
    config = recipes[name]
    parts = _dataclasses(config)
    actor, critic, rollout, algorithm = parts.actor, parts.critic, parts.rollout, parts.algorithm
    assert actor.optim.lr == 3e-6 and critic.optim.lr == 6e-6
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == (0.2, 0.28)
    assert actor.loss_agg_mode == critic.loss_agg_mode == "seq-mean-token-mean"
    assert (algorithm.adv_estimator, algorithm.gamma, algorithm.lam) == ("gae", 1.0, 0.95)
    assert not actor.use_kl_loss and not algorithm.use_kl_in_reward and actor.entropy_coeff == 0
    assert rollout.multi_turn.enable and rollout.multi_turn.max_assistant_turns == PAPER_TURNS
    assert rollout.prompt_length + rollout.response_length == rollout.max_model_len == PAPER_CONTEXT
    # 1,024 trajectories a step, all in one PPO mini-batch: one optimizer step per rollout batch.
    assert config.data.train_batch_size * rollout.n == PAPER_BATCH
    assert actor.ppo_mini_batch_size == critic.ppo_mini_batch_size == config.data.train_batch_size
    assert actor.ppo_epochs == critic.ppo_epochs == 1
    # Value pretraining, then the paper's 150 PPO steps.
    warmup = _critic_only_steps(config)
    assert warmup > 0 and config.trainer.total_training_steps - warmup == PAPER_PPO_STEPS


def test_the_smoke_recipe_is_the_same_algorithm_on_one_gpu_for_two_steps(
    recipes: dict[str, DictConfig], tiny_model: Path
) -> None:
    smoke, full = recipes["smoke"], recipes["qwen3_8b"]
    assert smoke.trainer.nnodes * smoke.trainer.n_gpus_per_node == 1
    assert smoke.actor_rollout_ref.model.path == str(tiny_model)  # from CUDA_AGENT_TINY_POLICY
    assert smoke.trainer.total_training_steps == 2 and _critic_only_steps(smoke) == 1  # VP, then PPO
    assert smoke.algorithm == full.algorithm
    assert smoke.reward.custom_reward_function == full.reward.custom_reward_function
    shared = ("clip_ratio_low", "clip_ratio_high", "loss_agg_mode", "use_kl_loss", "entropy_coeff", "optim")
    for key in shared:
        assert smoke.actor_rollout_ref.actor[key] == full.actor_rollout_ref.actor[key], key
    assert smoke.critic.optim == full.critic.optim
    assert smoke.actor_rollout_ref.rollout.multi_turn.tool_config_path == str(TOOLS_YAML)


def test_verls_tool_registry_builds_our_tools_from_the_recipes_path(
    monkeypatch: pytest.MonkeyPatch, tiny_model: Path
) -> None:
    # Without CUDA_AGENT_REPO the path is relative; verl's agent-loop worker resolves it against the
    # working directory, which the README's command makes the repository.
    monkeypatch.delenv("CUDA_AGENT_REPO", raising=False)
    monkeypatch.setenv("CUDA_AGENT_TINY_POLICY", str(tiny_model))
    monkeypatch.chdir(REPO)
    path = resolve_config_path(_compose("smoke").actor_rollout_ref.rollout.multi_turn.tool_config_path)
    assert Path(path) == TOOLS_YAML

    tools = load_all_tools(tool_config_path=path, function_tool_path=None)  # as AgentLoopWorker does
    assert all(isinstance(tool, VerlKernelTool) for tool in tools)
    assert [tool.name for tool in tools] == load_policy("cuda-agent").tools
    assert all(tool.get_openai_tool_schema().function.name == tool.name for tool in tools)
    judged = {
        tool.name: tool.settings.device for tool in tools if tool.name in ("verify", "profile", "evaluate")
    }
    assert judged == {"verify": "cuda", "profile": "cuda", "evaluate": "cuda"}  # the cluster's settings
    assert {tool.max_turns for tool in tools} == {150}  # the environment's budget is the paper's too


@pytest.fixture
def cpu_tools(tmp_path: Path) -> Iterator[tuple[list[Any], dict[str, Any]]]:
    """The example's tools as a CPU smoke config would load them (its yaml with device cpu, no audit,
    no baselines on every tool), through verl's loader, and the tools_kwargs of a dataset row whose task
    is the bias+ReLU example with small inputs."""
    config = yaml.safe_load(TOOLS_YAML.read_text())
    for entry in config["tools"]:
        entry["config"].update(device="cpu", audit=False, baselines="skip")
    (tmp_path / "tools.yaml").write_text(yaml.safe_dump(config))
    task = tmp_path / "bias_add_relu.py"
    task.write_text((EXAMPLES / "bias_add_relu" / "model.py").read_text().replace(*SMALL_INPUTS))
    tools = load_all_tools(tool_config_path=str(tmp_path / "tools.yaml"), function_tool_path=None)
    yield tools, {tool.name: {"create_kwargs": {"task_id": str(task)}} for tool in tools}


@pytest.mark.nvcc
def test_a_trajectory_through_the_tools_verl_loaded_earns_the_recipes_reward(
    recipes: dict[str, DictConfig], cpu_tools: tuple[list[Any], dict[str, Any]]
) -> None:
    tools, tools_kwargs = cpu_tools
    by_name = {tool.name: tool for tool in tools}
    agent_data = SimpleNamespace(request_id="trajectory-recipe")  # what the adapter reads of AgentData
    tool_rewards: list[float] = []

    async def call(name: str, arguments: dict[str, Any]) -> str:
        create_kwargs = tools_kwargs[name]["create_kwargs"]
        text, reward = await call_tool(by_name[name], create_kwargs, arguments, agent_data)
        tool_rewards.append(reward)
        return text

    files = {"model_new.py": CORRECT, **{f"kernels/{p.name}": p.read_text() for p in KERNELS.iterdir()}}

    async def trajectory() -> list[str]:
        texts = [await call("write_file", {"path": p, "content": c}) for p, c in files.items()]
        texts.append(await call("compile", {}))
        texts.append(await call("evaluate", {"trials": 2}))
        return texts

    texts = asyncio.run(trajectory())
    assert '"ok":true' in texts[-2] and '"status":"passed"' in texts[-1]
    assert tool_rewards[:-1] == [0.0] * (len(files) + 1) and tool_rewards[-1] == -1.0  # untimed on CPU
    score = get_custom_reward_fn(recipes["smoke"])
    extra_info = {"tool_rewards": tool_rewards}  # what verl's agent loop hands the reward function
    result = score(data_source="kernelbench", solution_str="", ground_truth="", extra_info=extra_info)
    assert result == {"score": tool_rewards[-1], "evaluated": True}


def test_verls_tool_agent_loop_calls_the_tools_within_the_recipes_limits(
    recipes: dict[str, DictConfig], cpu_tools: tuple[list[Any], dict[str, Any]]
) -> None:
    """verl's own ToolAgentLoop._call_tool (its module needs fastapi, which verl 0.9.1 does not declare)."""
    agent_loop = pytest.importorskip("verl.experimental.agent_loop.tool_agent_loop")
    from verl.experimental.agent_loop.tool_parser import FunctionCall

    tools, tools_kwargs = cpu_tools
    multi_turn = omega_conf_to_dataclass(recipes["qwen3_8b"].actor_rollout_ref.rollout).multi_turn
    # The attributes _call_tool reads of the loop, which verl's constructor takes from the same config.
    loop = SimpleNamespace(
        tools={tool.name: tool for tool in tools},
        max_tool_response_length=multi_turn.max_tool_response_length,
        tool_response_truncate_side=multi_turn.tool_response_truncate_side,
    )
    agent_data = agent_loop.AgentData(
        messages=[], image_data=None, video_data=None, audio_data=None, mm_processor_kwargs=None, metrics={},
        request_id="trajectory-loop", tools_kwargs=tools_kwargs,
    )  # fmt: skip

    async def call(name: str, arguments: dict[str, Any]) -> tuple[str, float]:
        response, reward, _ = await agent_loop.ToolAgentLoop._call_tool(
            loop, FunctionCall(name=name, arguments=json.dumps(arguments)), tools_kwargs, agent_data
        )
        return response.text or "", reward

    async def trajectory() -> list[tuple[str, float]]:
        return [
            await call("write_file", {"path": "notes.txt", "content": "x" * 20_000}),
            await call("read_file", {"path": "notes.txt"}),
            await call("list_files", {}),
            await call("no_such_tool", {}),
        ]

    try:
        (written, _), (read, _), (listed, _), (unknown, reward) = asyncio.run(trajectory())
    finally:  # the adapter keeps an episode until it is evaluated; this one never is
        episode = verl_adapter._EPISODES.pop("trajectory-loop", None)
        if episode is not None:
            episode.dispose()
    assert json.loads(written)["bytes_written"] == 20_000 and '"notes.txt"' in listed
    # The environment shortened the long output itself; verl's cut (256 characters by default) left it be.
    assert "characters truncated" in read and "(truncated)" not in read and len(read) > 5_000
    assert unknown.startswith("Unknown function 'no_such_tool'") and reward == 0.0


def test_verls_reward_loader_and_manager_score_the_final_evaluation(recipes: dict[str, DictConfig]) -> None:
    config = recipes["qwen3_8b"]
    score = get_custom_reward_fn(config)  # from reward.custom_reward_function: pkg://...adapters.verl

    def episode(tool_rewards: list[float]) -> dict[str, Any]:
        return score(
            data_source="kernelbench",
            solution_str="",
            ground_truth="",
            extra_info={"tool_rewards": tool_rewards},
        )

    assert episode([0.0, 0.0, 2.0]) == {"score": 2.0, "evaluated": True}  # the final evaluation's reward
    assert episode([]) == {"score": FAIL, "evaluated": False}  # never evaluated

    # The reward manager the recipe selects, fed a trajectory the way verl's agent loop hands it over:
    # the loop's extra fields (tool_rewards among them) in tool_extra_fields.
    manager_cls = resolve_reward_manager_cls(config)
    response_length = 4
    data = DataProto.from_dict(
        tensors={
            "prompts": torch.ones(1, 3, dtype=torch.long),
            "responses": torch.ones(1, response_length, dtype=torch.long),
            "attention_mask": torch.tensor([[1, 1, 1, 1, 1, 1, 0]]),  # 3 response tokens, 1 pad
        },
        non_tensors={
            "data_source": np.array(["kernelbench"], dtype=object),
            "reward_model": np.array([{"ground_truth": ""}], dtype=object),
            "extra_info": np.array([{"index": 0}], dtype=object),
            "tool_extra_fields": np.array(
                [{"tool_rewards": [0.0, 0.0, 3.0], "turn_scores": []}], dtype=object
            ),
            "__num_turns__": np.array([7]),
        },
    )
    tokenizer = SimpleNamespace(decode=lambda ids, skip_special_tokens=True: "")

    async def run() -> dict[str, Any]:
        manager = manager_cls(config, tokenizer, score)  # inside the loop it runs its scoring in
        return await manager.run_single(data)

    result = asyncio.run(run())
    assert result["reward_score"] == 3.0 and result["reward_extra_info"] == {"score": 3.0, "evaluated": True}
    # The outcome reward sits on the trajectory's last token, 0 before it (paper: r_t = 0 for t < T-1).
    token_rewards = manager_cls.assemble_rm_scores(data, [result["reward_score"]])
    assert token_rewards.tolist() == [[0.0, 0.0, 3.0, 0.0]]
