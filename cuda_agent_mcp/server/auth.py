"""Bearer tokens for the HTTP transport: a fixed set of clients, each with its own token.

Tokens come from a file (one `CLIENT_ID TOKEN` pair per line, `#` comments) or from
$CUDA_AGENT_MCP_TOKEN (one client, `default`). The client id a token maps to owns the sessions started
with it: other clients cannot see or touch them.
"""

from __future__ import annotations

import hmac
import os
from pathlib import Path

from mcp.server.auth.provider import AccessToken

from cuda_agent_mcp.errors import UsageError

TOKEN_ENV = "CUDA_AGENT_MCP_TOKEN"


class StaticTokens:
    """A TokenVerifier over a fixed token table."""

    def __init__(self, tokens: dict[str, str]) -> None:
        if not tokens:
            raise UsageError("no bearer tokens configured")
        self._tokens = dict(tokens)  # token -> client id

    @classmethod
    def load(cls, path: Path | None) -> StaticTokens | None:
        """From `path`, else from $CUDA_AGENT_MCP_TOKEN, else None (no tokens configured)."""
        if path is not None:
            table = {}
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                parts = line.split()
                if len(parts) != 2 or len(parts[1]) < 16:
                    raise UsageError(
                        f"{path}:{number}: want 'CLIENT_ID TOKEN' with a token of 16+ characters"
                    )
                table[parts[1]] = parts[0]
            return cls(table)
        if token := os.environ.get(TOKEN_ENV):
            if len(token) < 16:
                raise UsageError(f"${TOKEN_ENV} must be at least 16 characters")
            return cls({token: "default"})
        return None

    async def verify_token(self, token: str) -> AccessToken | None:
        client = None
        for known, client_id in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                client = client_id
        return AccessToken(token=token, client_id=client, scopes=[]) if client else None
