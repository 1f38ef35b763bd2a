"""Make the tiny policy and warm it up with SFT until its sampled answers are sometimes right and
sometimes wrong, measured.

The warm-up conversations are the ones TRL's GRPOTrainer will hold with the policy: the prompt TRL
renders (the dataset's instruction, the text `reset` appends, the environment's tools in the system turn,
thinking off), a first answer that writes an answer's files with `write_file` calls, the tool responses
the real environment gave for them, and a short closing turn. Loss is on the assistant turns only.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, Field

from cuda_agent_mcp.adapters.trl import TrlKernelEnvironment, environment_tools
from cuda_agent_mcp.training.answers import Answer, answers, classify
from cuda_agent_mcp.training.rules import RULE_SETS, RuleSetName
from cuda_agent_mcp.training.tiny_policy import TinyPolicySpec, new_model, save, train_tokenizer

INSTRUCTION = "Replace this PyTorch module with faster CUDA kernels.\n\n"
CLOSING = "The files are written; the evaluation decides."
CHAT_KWARGS = {"enable_thinking": False}
REPO = Path(__file__).resolve().parent.parent.parent


class WarmupSettings(BaseModel):
    steps: int = Field(default=400, description="the most SFT steps")
    check_every: int = 50
    learning_rate: float = 3e-3
    samples: int = Field(default=16, description="answers sampled at each check")
    temperature: float = Field(default=1.0, description="the sampling temperature GRPO will use")
    min_well_formed: float = Field(
        default=0.75, description="stop once this share of sampled answers is a known answer"
    )


class WarmupReport(BaseModel):
    rules: RuleSetName
    steps: int
    final_loss: float
    samples: int
    right: int
    wrong: int
    other: int
    right_fraction: float = Field(description="sampled first answers that write a right answer")
    checks: list[dict[str, Any]]
    parameters: int
    spec: TinyPolicySpec


class Conversation(BaseModel):
    """One warm-up example: what TRL renders before each generation, and what the policy should answer."""

    answer: str
    turns: list[tuple[str, str]] = Field(description="(prompt text, response text) per generation")


def _tool_call_text(path: str, content: str) -> str:
    call = {"name": "write_file", "arguments": {"path": path, "content": content}}
    return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"


def _render(tokenizer: Any, messages: list[dict[str, Any]], **options: Any) -> str:
    """Render as GRPOTrainer does with tools: Qwen3's template does not preserve prefixes (it drops
    earlier thinking), so TRL renders with its training variant of the template."""
    from trl.chat_template_utils import get_training_chat_template

    template = get_training_chat_template(tokenizer)
    return str(
        tokenizer.apply_chat_template(
            messages, tokenize=False, chat_template=template, **CHAT_KWARGS, **options
        )
    )


def _tool_suffix(tokenizer: Any, tool_messages: list[dict[str, str]]) -> str:
    """The text TRL appends after a completion that called tools (as `_get_tool_suffix_ids` makes it)."""
    dummy: list[dict[str, Any]] = [
        {"role": "user", "content": "dummy"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "x", "arguments": {}}}],
        },
    ]
    prefix = _render(tokenizer, dummy)
    full = _render(tokenizer, dummy + tool_messages, add_generation_prompt=True)
    cut = prefix.rindex("<|im_end|>") + len("<|im_end|>")
    assert full.startswith(prefix[:cut])
    return str(full[cut:])


async def _conversation(
    env: TrlKernelEnvironment, renderer: Any, task_id: str, answer: Answer
) -> Conversation:
    observation = env.reset(task_id=task_id)
    messages = [{"role": "user", "content": INSTRUCTION + observation}]
    tools = environment_tools(env)
    prompt = _render(renderer, messages, tools=tools, add_generation_prompt=True)
    first = "\n".join(_tool_call_text(p, c) for p, c in answer.files.items()) + "<|im_end|>"
    results = [await env.write_file(path=p, content=c) for p, c in answer.files.items()]  # type: ignore[attr-defined]
    tool_messages = [{"role": "tool", "name": "write_file", "content": str(r)} for r in results]
    second_prompt = prompt + first + _tool_suffix(renderer, tool_messages)
    return Conversation(answer=answer.name, turns=[(prompt, first), (second_prompt, CLOSING + "<|im_end|>")])


def conversations(rules: RuleSetName, workdir: Path, renderer: Any) -> list[Conversation]:
    """The warm-up conversations, through the real environment (its task text and tool responses)."""
    rule_set = RULE_SETS[rules]
    factory = rule_set.trl_environment(workdir / "tasks", workdir / "warmup-envs")

    async def make() -> list[Conversation]:
        return [await _conversation(factory(), renderer, rule_set.task_id, a) for a in answers(rules)]

    return anyio.run(make)


def corpus(examples: list[Conversation]) -> list[str]:
    """What the tokenizer learns from: the warm-up conversations and the project's kernels and guides."""
    texts = [prompt + response for example in examples for prompt, response in example.turns]
    # Fixed files only (not examples/rl/, which changes with the code): the tokenizer, and with it the
    # whole run, stays the same from one commit to the next unless the kernels or the guides change.
    for pattern in (
        "examples/*/kernels/*",
        "examples/*/model*.py",
        "cuda_agent_mcp/workspace/pristine/**/SKILL.md",
    ):
        texts += [path.read_text() for path in sorted(REPO.glob(pattern)) if path.is_file()]
    return texts


def _encode(tokenizer: Any, example: Conversation) -> list[tuple[list[int], list[int]]]:
    return [
        (
            tokenizer(prompt, add_special_tokens=False)["input_ids"],
            tokenizer(response, add_special_tokens=False)["input_ids"],
        )
        for prompt, response in example.turns
    ]


def _batch(pairs: list[tuple[list[int], list[int]]], pad: int):  # type: ignore[no-untyped-def]
    import torch

    length = max(len(p) + len(r) for p, r in pairs)
    ids = torch.full((len(pairs), length), pad)
    labels = torch.full((len(pairs), length), -100)
    mask = torch.zeros((len(pairs), length), dtype=torch.long)
    for row, (prompt, response) in enumerate(pairs):
        sequence = prompt + response
        ids[row, : len(sequence)] = torch.tensor(sequence)
        labels[row, len(prompt) : len(sequence)] = torch.tensor(response)
        mask[row, : len(sequence)] = 1
    return ids, labels, mask


def sample_written_files(
    model: Any, tokenizer: Any, prompt: str, count: int, temperature: float, max_new: int
) -> list[dict[str, str]]:
    """`count` first answers sampled in one batch, each as the files its `write_file` calls write, parsed
    as GRPOTrainer parses them (TRL's `parse_response`; a malformed answer writes nothing)."""
    import torch
    from trl.chat_template_utils import parse_response

    prompt_ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"].to(
        model.device
    )
    training = model.training
    model.eval()
    with torch.no_grad():
        out = model.generate(
            prompt_ids,
            do_sample=True,
            temperature=temperature,
            max_new_tokens=max_new,
            num_return_sequences=count,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    model.train(training)
    answers = []
    for row in out[:, prompt_ids.shape[1] :].tolist():
        ids = row[: row.index(tokenizer.eos_token_id) + 1] if tokenizer.eos_token_id in row else row
        message = parse_response(tokenizer, ids, prefix=prompt_ids[0].tolist())
        files = {}
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            arguments = function.get("arguments") or {}
            if function.get("name") == "write_file" and isinstance(arguments, dict):
                files[str(arguments.get("path"))] = str(arguments.get("content"))
        answers.append(files)
    return answers


def sample_first_answers(
    model: Any, tokenizer: Any, prompt: str, rules: RuleSetName, settings: WarmupSettings, max_new: int
) -> dict[str, int]:
    """Sample first answers and sort them into right, wrong and other (a malformed or unknown answer)."""
    counts = {"right": 0, "wrong": 0, "other": 0}
    for files in sample_written_files(
        model, tokenizer, prompt, settings.samples, settings.temperature, max_new
    ):
        counts[classify(files, rules)] += 1
    return counts


def build_tiny_policy(
    out: Path,
    rules: RuleSetName,
    workdir: Path,
    spec: TinyPolicySpec | None = None,
    settings: WarmupSettings | None = None,
    log: Any = print,
) -> WarmupReport:
    """Make the tokenizer and the model, warm the model up, measure, save to `out` (HF format)."""
    import torch
    from trl.chat_template_utils import add_response_schema

    spec = spec or TinyPolicySpec()
    settings = settings or WarmupSettings()
    random.seed(spec.seed)
    torch.manual_seed(spec.seed)
    renderer = train_tokenizer(
        ["bootstrap"], spec.model_copy(update={"vocab_size": 300})
    )  # renders text only
    examples = conversations(rules, workdir, renderer)
    tokenizer = add_response_schema(train_tokenizer(corpus(examples) * 4, spec))
    model = new_model(spec, len(tokenizer), tokenizer.eos_token_id, tokenizer.pad_token_id)
    pairs = [pair for example in examples for pair in _encode(tokenizer, example)]
    log(
        f"warm-up: {len(pairs)} turns of {len(examples)} answers, sequences of {max(len(p) + len(r) for p, r in pairs)} tokens"
    )
    # On the CPU even where a GPU is: a CUDA context in this process would stay for its life, and the
    # judge refuses to time next to another process's GPU work (fail closed).
    ids, labels, mask = _batch(pairs, tokenizer.pad_token_id)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=0.0)
    first_prompt = examples[0].turns[0][0]
    max_new = max(len(r) for _, r in pairs) + 16
    checks: list[dict[str, Any]] = []
    loss_value = float("nan")
    step = 0
    counts = {"right": 0, "wrong": 0, "other": settings.samples}
    model.train()
    while step < settings.steps:
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        step += 1
        loss_value = float(loss.detach())
        if step % settings.check_every == 0 or step == settings.steps:
            counts = sample_first_answers(model, tokenizer, first_prompt, rules, settings, max_new)
            checks.append({"step": step, "loss": round(loss_value, 4), **counts})
            log(f"warm-up step {step}: loss {loss_value:.4f}, sampled {counts}")
            known = (counts["right"] + counts["wrong"]) / settings.samples
            if known >= settings.min_well_formed and counts["right"] > 0 and counts["wrong"] > 0:
                break
    save(model, tokenizer, out)
    report = WarmupReport(
        rules=rules,
        steps=step,
        final_loss=loss_value,
        samples=settings.samples,
        right_fraction=counts["right"] / settings.samples,
        checks=checks,
        parameters=sum(p.numel() for p in model.parameters()),
        spec=spec,
        **counts,
    )
    (out / "warmup.json").write_text(report.model_dump_json(indent=2))
    return report
