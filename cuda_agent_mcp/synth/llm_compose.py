"""The LLM composer: an OpenAI-compatible endpoint (vLLM or any API) writes the program for a sample of
seed operators, as the paper's pipeline does. The prompt is `prompts/compose.md`.

What comes back is untrusted code: it only ever runs in the checking child, inside the isolating
executor. An answer without a program still becomes a candidate, which the parse filter refuses with
what was wrong; an endpoint that fails ends the composition (what was composed is kept)."""

from __future__ import annotations

import hashlib
import os
import random
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

import anyio

from cuda_agent_mcp.errors import EndpointError
from cuda_agent_mcp.synth.candidate import Candidate
from cuda_agent_mcp.synth.compose import PAPER_OP_COUNT_WEIGHTS
from cuda_agent_mcp.synth.ops import SEED_OPS, SeedOp
from cuda_agent_mcp.synth.settings import LlmComposerSettings, SynthesisSettings

_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
_CONCURRENT_REQUESTS = 4


def compose_prompt() -> str:
    return resources.files("cuda_agent_mcp.synth").joinpath("prompts/compose.md").read_text(encoding="utf-8")


def sample_ops(seed: int, index: int, max_ops: int, registry: tuple[SeedOp, ...] = SEED_OPS) -> list[SeedOp]:
    """The operators one candidate is asked for: a count from the Ops-6K distribution, then distinct ops;
    a loss only last (it needs targets and ends the chain)."""
    rng = random.Random(f"llm/{seed}/{index}")
    counts = [n for n in sorted(PAPER_OP_COUNT_WEIGHTS) if n <= max_ops]
    count = rng.choices(counts, weights=[PAPER_OP_COUNT_WEIGHTS[n] for n in counts])[0]
    body = [op for op in registry if op.family != "loss"]
    chosen = rng.sample(body, k=min(count, len(body)))
    losses = [op for op in registry if op.family == "loss"]
    if count > 1 and losses and rng.random() < 0.1:
        chosen[-1] = rng.choice(losses)
    return chosen


def program_from_answer(text: str) -> str:
    """The last fenced block of the answer, or the whole answer when it has none."""
    blocks = _FENCE.findall(text or "")
    return (blocks[-1] if blocks else text or "").strip() + "\n"


async def compose_with_llm(
    settings: SynthesisSettings,
    indices: list[int],
    *,
    keep: Callable[[Candidate], None],
    progress: Callable[[int], None] | None = None,
) -> None:
    """Ask for every index, at most a few requests at once; each answer is kept as it comes."""
    llm = settings.llm
    assert llm is not None  # the settings' validator requires it for this composer
    client = _client(llm)
    template = compose_prompt()
    prompt_digest = hashlib.sha256(template.encode()).hexdigest()[:16]
    limiter = anyio.CapacityLimiter(_CONCURRENT_REQUESTS)
    done = 0

    async def one(index: int) -> None:
        nonlocal done
        ops = sample_ops(settings.seed, index, settings.max_ops)
        prompt = template.format(ops=" -> ".join(op.name for op in ops), dtype=f"torch.{settings.dtype}")
        async with limiter:
            try:
                answer, finish = await _ask(client, llm, prompt, seed=settings.seed * 1_000_003 + index)
            except EndpointError as exc:
                failures.append(exc)
                group.cancel_scope.cancel()  # the endpoint is down: the next requests would fail the same
                return
        code = program_from_answer(answer)
        notes = {"model": llm.model, "prompt_sha256": prompt_digest, "finish_reason": finish or ""}
        if "class Model" not in code:
            notes["compose_error"] = f"the answer holds no program: {' '.join(answer.split())[:120]!r}"
        keep(
            Candidate(
                index=index,
                composer="llm",
                seed=settings.seed,
                code=code,
                ops=tuple(op.name for op in ops),
                vendor_classes=tuple(op.vendor_class for op in ops),
                notes=notes,
            )
        )
        done += 1
        if progress is not None:
            progress(done)

    failures: list[EndpointError] = []
    async with anyio.create_task_group() as group:
        for index in indices:
            group.start_soon(one, index)
    if failures:
        raise failures[0]


def _client(llm: LlmComposerSettings) -> Any:
    try:
        from openai import AsyncOpenAI
    except ImportError:
        raise EndpointError(
            "the LLM composer needs the openai package: pip install 'cuda-agent-mcp[agent]'"
        ) from None
    key = os.environ.get(llm.api_key_env) or "EMPTY"  # a local vLLM needs none
    return AsyncOpenAI(base_url=llm.base_url, api_key=key, timeout=600.0, max_retries=2)


async def _ask(client: Any, llm: LlmComposerSettings, prompt: str, *, seed: int) -> tuple[str, str | None]:
    from openai import OpenAIError

    try:
        response = await client.chat.completions.create(
            model=llm.model,
            messages=[{"role": "user", "content": prompt}],
            temperature=llm.temperature,
            max_tokens=llm.max_tokens,
            seed=seed,
        )
    except OpenAIError as exc:
        raise EndpointError(
            f"the composer's endpoint {llm.base_url} failed: {type(exc).__name__}: {exc}"
        ) from None
    choice = response.choices[0] if response.choices else None
    if choice is None:
        return "", None
    return choice.message.content or "", choice.finish_reason
