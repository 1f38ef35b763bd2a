"""Benchmark: what the MCP layer adds to a tool call, over stdio with the SDK's own client.

    python benchmarks/mcp_overhead.py [--calls 50] [--device cpu|cuda] --out results.json

The server is `cuda-agent serve` in a subprocess (stdio), as an IDE starts it. `read_file` is timed
through MCP and as a direct tool-layer call; `verify` the same way on the bundled ReLU example (on the
CPU path unless --device cuda), the two paths interleaved call by call. The overhead is the difference of the medians (and for verify also as
a share of the direct call).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session, VerifyRequest, compile_kernels, read_file, verify_kernels

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "relu"
SMALL = ("batch_size = 4096\ndim = 8192", "batch_size = 256\ndim = 1024")
# Without a GPU the extension cannot run: the CPU path times the harness with a PyTorch candidate
# (and no op audit), which is what an overhead measurement needs.
TORCH_CANDIDATE = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x.clamp_min(0)\n"


async def _median_ms(calls: int, call) -> tuple[float, list[float]]:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times), times


async def run(calls: int, device: str, verify_calls: int) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="cuda-agent-mcp-bench-"))
    cache = work / "cache"
    reference = (EXAMPLE / "model.py").read_text()
    if device == "cpu":
        reference = reference.replace(*SMALL)
    verify_request: dict[str, object] = {"device": device, "trials": 5}
    model_new = (EXAMPLE / "model_new.py").read_text()
    if device == "cpu":
        verify_request["audit"] = False
        model_new = TORCH_CANDIDATE

    # Direct: the tool layer in this process.
    (work / "reference.py").write_text(reference)
    session = Session.create(
        load_task_file(work / "reference.py", task_id="bench/relu"), work / "ws", cache_dir=cache
    )
    shutil.copytree(EXAMPLE / "kernels", session.workspace.root / "kernels", dirs_exist_ok=True)
    (session.workspace.root / "model_new.py").write_text(model_new)
    assert (await compile_kernels(session)).ok
    direct_read, _ = await _median_ms(calls, lambda: read_file(session, "kernels/relu.cu"))
    warm = await verify_kernels(session, VerifyRequest(**verify_request))  # also starts the judge
    assert warm.verdict.status == "passed", warm.verdict

    # Through MCP over stdio.
    env = {
        **os.environ,
        "CUDA_AGENT_CACHE": str(cache),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cuda_agent_mcp", "serve", "--root", str(work / "sessions")],
        env=env,
    )
    async with Client(server) as client:
        started = await client.call_tool("start_session", {"reference_source": reference})
        sid = started.structured_content["session_id"]
        for name in ("relu.cu", "relu_binding.cpp"):
            text = (EXAMPLE / "kernels" / name).read_text()
            await client.call_tool(
                "write_file", {"session_id": sid, "path": f"kernels/{name}", "content": text}
            )
        await client.call_tool(
            "write_file", {"session_id": sid, "path": "model_new.py", "content": model_new}
        )
        built = await client.call_tool("compile", {"session_id": sid})
        assert built.structured_content["status"] == "done" and built.structured_content["result"]["ok"]

        async def mcp_read() -> None:
            answer = await client.call_tool("read_file", {"session_id": sid, "path": "kernels/relu.cu"})
            assert not answer.is_error

        async def mcp_verify() -> None:
            answer = await client.call_tool("verify", {"session_id": sid, "request": verify_request})
            assert answer.structured_content["result"]["verdict"]["status"] == "passed", answer.content

        mcp_read_ms, _ = await _median_ms(calls, mcp_read)
        await mcp_verify()  # warm the server's judge
        # Interleaved call by call, so both paths see the same machine load.
        direct_times, mcp_times = [], []
        for _ in range(verify_calls):
            direct_times.append(
                (await _median_ms(1, lambda: verify_kernels(session, VerifyRequest(**verify_request))))[0]
            )
            mcp_times.append((await _median_ms(1, mcp_verify))[0])
        direct_verify, mcp_verify_ms = statistics.median(direct_times), statistics.median(mcp_times)
    shutil.rmtree(work, ignore_errors=True)
    return {
        "benchmark": "mcp_overhead",
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "transport": "stdio, SDK client, server in a subprocess",
        "device": device,
        "candidate": "PyTorch (CPU path, no op audit)"
        if device == "cpu"
        else "the ReLU example's CUDA kernel",
        "read_file_ms": {"direct_median": round(direct_read, 3), "mcp_median": round(mcp_read_ms, 3)},
        "read_file_overhead_ms": round(mcp_read_ms - direct_read, 3),
        "verify_ms": {"direct_median": round(direct_verify, 1), "mcp_median": round(mcp_verify_ms, 1)},
        "verify_overhead_share": round(mcp_verify_ms / direct_verify - 1, 4),
        "calls": calls,
        "verify_calls": verify_calls,
        "targets": {"read_file_overhead_ms": 20, "verify_overhead_share": 0.05},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--verify-calls", type=int, default=5)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = anyio.run(run, args.calls, args.device, args.verify_calls)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
