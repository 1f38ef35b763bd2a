"""A local HTTP server speaking the OpenAI chat-completions wire format, replaying scripted assistant
turns: the stand-in for a language model, which cannot run on these machines. Every request body is
kept so tests can check what the loop sent (tools, tool results, trimmed context, seeds)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str | None = None) -> dict[str, Any]:
    """One assistant tool call; a str `arguments` is sent verbatim (for malformed JSON)."""
    return {
        "id": call_id or f"call_{name}_{time.monotonic_ns()}",
        "type": "function",
        "function": {
            "name": name,
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }


def turn(*calls: dict[str, Any], content: str = "") -> dict[str, Any]:
    return (
        {"role": "assistant", "content": content, "tool_calls": list(calls)}
        if calls
        else {
            "role": "assistant",
            "content": content,
        }
    )


@dataclass
class ScriptedLLM:
    """Replies in order; after the script ends, a plain 'done' answer (which ends a tools-format run)."""

    replies: list[dict[str, Any]]
    # Scripts per request seed, for parallel samples that would otherwise race for one queue.
    by_seed: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    tokens_per_reply: int = 100
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(body)
            queue = self.by_seed.get(body.get("seed"), self.replies) if self.by_seed else self.replies
            message = queue.pop(0) if queue else {"role": "assistant", "content": "done"}
            index = len(self.requests)
        return {
            "id": f"chatcmpl-{index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": self.tokens_per_reply // 2,
                "completion_tokens": self.tokens_per_reply - self.tokens_per_reply // 2,
                "total_tokens": self.tokens_per_reply,
            },
        }


@contextmanager
def serve(llm: ScriptedLLM) -> Iterator[ScriptedLLM]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if not self.path.endswith("/chat/completions"):
                self.send_error(404)
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            payload = json.dumps(llm.next_reply(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    llm.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield llm
    finally:
        server.shutdown()
        server.server_close()
