"""The policy's endpoint: OpenAI-compatible chat completions with tool calling (vLLM, hosted APIs,
any local server speaking the wire format)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from cuda_agent_mcp.agent.policy import PolicyPreset
from cuda_agent_mcp.errors import EndpointError


@dataclass
class Completion:
    message: dict[str, Any]
    usage: dict[str, int] = field(default_factory=dict)
    finish_reason: str | None = None
    latency_s: float = 0.0


class PolicyClient:
    def __init__(self, preset: PolicyPreset, base_url: str | None = None, api_key: str | None = None) -> None:
        try:
            from openai import AsyncOpenAI
        except ImportError:
            raise EndpointError(
                "the agent loop needs the openai package: pip install 'cuda-agent-mcp[agent]'"
            ) from None
        url = base_url or preset.base_url
        if not url:
            raise EndpointError(f"policy {preset.name} names no endpoint: pass --base-url")
        self.preset = preset
        self.base_url = url
        key = api_key or os.environ.get(preset.api_key_env) or "EMPTY"  # local vLLM needs none
        self._client = AsyncOpenAI(base_url=url, api_key=key, timeout=600.0, max_retries=2)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        *,
        seed: int | None,
        temperature: float,
    ) -> Completion:
        from openai import OpenAIError

        sampling = self.preset.sampling
        options: dict[str, Any] = {}
        if tools:
            options.update(tools=tools, tool_choice="auto")
        if seed is not None:
            options["seed"] = seed
        started = time.monotonic()
        try:
            response = await self._client.chat.completions.create(
                model=self.preset.endpoint_model,
                messages=messages,  # type: ignore[arg-type]  # OpenAI message dicts, not its TypedDicts
                temperature=temperature,
                top_p=sampling.top_p,
                max_completion_tokens=sampling.max_completion_tokens,
                **options,
            )
        except OpenAIError as exc:
            raise EndpointError(f"the policy endpoint {self.base_url} failed: {exc}") from None
        if not response.choices:
            raise EndpointError(f"the policy endpoint {self.base_url} returned no choices")
        choice = response.choices[0]
        message = choice.message.model_dump(exclude_none=True, exclude={"refusal", "annotations", "audio"})
        message.setdefault("content", "")
        usage = (
            response.usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"})
            if response.usage
            else {}
        )
        return Completion(message, usage, choice.finish_reason, time.monotonic() - started)

    async def close(self) -> None:
        await self._client.close()
