"""Benchmark: what an assistant reads back from the MCP server in one session, against the full results.

    python benchmarks/mcp_answer_size.py [--device cuda] --out results.json

`cuda-agent serve` over stdio with the official SDK client, as an IDE runs it: a session on the bundled
ReLU example with its kernels written in, `compile`, `evaluate` (following `wait_job` past the tool budget), then a kernel with a
syntax error compiled. For each answer: the bytes of its text (what the model reads), its summary line,
and the bytes of the full result the resource `session://{id}/result/{kind}` keeps. Also the tool list.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
BROKEN = '#include <cuda_runtime.h>\nextern "C" void relu_launch(const float* x, float* y, int n) {\n  int i = 0\n}\n'


async def _finish(client: Client, answer: Any) -> tuple[Any, float]:
    """Follow a job handle to its end; the last answer and how long wait_job took in all."""
    waited = 0.0
    while (answer.structured_content or {}).get("status") == "running":
        job = answer.structured_content["job"]["job_id"] if "job" in answer.structured_content else None
        started = time.monotonic()
        answer = await client.call_tool("wait_job", {"job_id": job or answer.structured_content["job_id"]})
        waited += time.monotonic() - started
    return answer, waited


async def session(device: str, home: Path) -> dict[str, Any]:
    env = {**os.environ, "HOME": str(home), "CUDA_AGENT_CACHE": str(home / "cache")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "cuda_agent_mcp", "serve"], env=env)
    rows: dict[str, Any] = {}
    async with Client(params) as client:
        listing = (await client.list_tools()).model_dump(mode="json", by_alias=True, exclude_none=True)
        rows["tools_list_bytes"] = len(json.dumps(listing, separators=(",", ":")).encode())
        started = await client.call_tool("start_session", {"task_id": "examples/relu"})
        sid = started.structured_content["session_id"]
        for path in ("kernels/relu.cu", "kernels/relu_binding.cpp", "model_new.py"):
            content = (REPO / "examples" / "relu" / path).read_text()
            await client.call_tool("write_file", {"session_id": sid, "path": path, "content": content})
        calls = [
            ("compile", "compile", {}),
            (
                "evaluate",
                "evaluate",
                {"request": {"verify": {"device": device}, "profile": {"device": device}}},
            ),
        ]
        for name, tool, arguments in calls:
            t0 = time.monotonic()
            answer, _ = await _finish(client, await client.call_tool(tool, {"session_id": sid, **arguments}))
            wall = time.monotonic() - t0
            full = await client.read_resource(f"session://{sid}/result/{tool}")
            result = (answer.structured_content or {}).get("result") or {}
            rows[name] = {
                "wall_s": round(wall, 2),
                "is_error": answer.is_error,
                "answer_text_bytes": len(answer.content[0].text.encode()),
                "full_result_bytes": len(full.contents[0].text.encode()),
                "summary": result.get("summary"),
                "reward": result.get("reward"),
            }
        await client.call_tool(
            "write_file", {"session_id": sid, "path": "kernels/relu.cu", "content": BROKEN}
        )
        answer, _ = await _finish(client, await client.call_tool("compile", {"session_id": sid}))
        full = await client.read_resource(f"session://{sid}/result/compile")
        result = answer.structured_content["result"]
        rows["compile_error"] = {
            "answer_text_bytes": len(answer.content[0].text.encode()),
            "full_result_bytes": len(full.contents[0].text.encode()),
            "summary": result["summary"],
            "diagnostics": result["diagnostics"],
            "log_repeated": bool(result["log"]),
        }
        await client.call_tool("end_session", {"session_id": sid})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        rows = anyio.run(session, args.device, Path(home))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False
    ).stdout.strip()
    # A copy of the tree shipped elsewhere may carry another commit's .git: BENCH_COMMIT names the tree's.
    commit = os.environ.get("BENCH_COMMIT") or commit or "unknown"
    result = {"commit": commit, "device": args.device, **rows}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
