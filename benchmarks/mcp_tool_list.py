"""Benchmark: how much an MCP host loads from this server before its first call.

    python benchmarks/mcp_tool_list.py --out benchmarks/results/mcp_tool_list.json

Starts `cuda-agent serve` over stdio as an IDE does, lists the tools with the official SDK client, and
records the size of the compact JSON of `tools/list`'s result (what goes over the wire and, in most
hosts, into every conversation): in all, and per tool split into input schema, output schema and the
rest. The limit the tests hold is 30 KB (`tests/server/test_tool_list.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parent.parent


def _size(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


async def measure(home: Path) -> dict:
    env = {**os.environ, "HOME": str(home), "CUDA_AGENT_CACHE": str(home / "cache")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "cuda_agent_mcp", "serve"], env=env)
    async with Client(params) as client:
        listing = (await client.list_tools()).model_dump(mode="json", by_alias=True, exclude_none=True)
    tools = {
        tool["name"]: {
            "total": _size(tool),
            "input_schema": _size(tool.get("inputSchema", {})),
            "output_schema": _size(tool.get("outputSchema", {})),
        }
        for tool in listing["tools"]
    }
    return {"tools_list_bytes": _size(listing), "tools": len(tools), "per_tool": tools}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        result = anyio.run(measure, Path(home))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False
    ).stdout.strip()
    result = {"commit": commit or "unknown", "transport": "stdio", **result}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"tools/list: {result['tools_list_bytes']} bytes for {result['tools']} tools")


if __name__ == "__main__":
    main()
