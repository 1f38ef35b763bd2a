"""Keeping the conversation inside the model's context: long tool outputs are truncated with a marker,
and when the prompt nears its budget the oldest tool outputs are replaced by a short note (the system
prompt, the task and the recent turns are always kept)."""

from __future__ import annotations

from typing import Any

TRUNCATED = "\n[... {dropped} characters truncated ...]\n"
DROPPED = "[output dropped to fit the context budget; call the tool again if you need it]"
# Text-format policies get each evaluation back as a user message starting with this.
FEEDBACK_PREFIX = "Evaluation of your answer"


def truncate(text: str, limit: int) -> str:
    """Head and tail of `text` within `limit` characters, with a marker saying how much went."""
    if len(text) <= limit:
        return text
    keep = max(limit - 60, 0)
    head, tail = keep * 2 // 3, keep - keep * 2 // 3
    return text[:head] + TRUNCATED.format(dropped=len(text) - head - tail) + (text[-tail:] if tail else "")


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """A rough count (4 characters a token): good enough to decide when to trim, never billed."""
    total = 0
    for message in messages:
        total += len(str(message.get("content") or "")) // 4 + 4
        for call in message.get("tool_calls") or []:
            total += len(str(call.get("function", {}).get("arguments", ""))) // 4 + 8
    return total


def trim(messages: list[dict[str, Any]], budget_tokens: int, keep_recent_turns: int) -> int:
    """Drop the oldest tool outputs (in place) until the estimate fits; returns how many were dropped.
    Assistant messages keep their tool calls, so every tool result still answers a call."""
    assistant_at = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    protected_from = assistant_at[-keep_recent_turns] if len(assistant_at) >= keep_recent_turns else 0
    dropped = 0
    for index, message in enumerate(messages[:protected_from]):
        if estimate_tokens(messages) <= budget_tokens:
            break
        content = str(message.get("content") or "")
        feedback = message.get("role") == "user" and content.startswith(FEEDBACK_PREFIX)
        if (message.get("role") == "tool" or feedback) and content != DROPPED:
            messages[index] = {**message, "content": DROPPED}
            dropped += 1
    return dropped
