"""Walk-through: the README's first hour, as a new user on a machine without a GPU runs it.

    python benchmarks/newcomer_walkthrough.py --kernelbench ../shared/benchmarks/kernelbench/KernelBench \
        --out benchmarks/results/newcomer_walkthrough.json

Each step is a command of the README's "Set up" and "Use" sections (plus what its no-GPU lines tell a
user to do next), run from a fresh copy of the repository in a fresh home directory, under a pseudo-
terminal as a person sees it. For each step it records the exit code, the wall time, the longest
silence (no byte written for that long), when the first output came, whether a traceback showed, and
the output's head. A step fails the walk-through when it prints a traceback, stays silent for a minute,
stays silent past 2 s before its first word while taking longer than that, or exits other than expected.
The MCP server is listed over stdio with the official SDK client and its tool list measured.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SILENT_MINUTE_S = 60.0
FIRST_WORD_S = 2.0

TORCH_MODEL_NEW = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)
"""


@dataclass
class Step:
    name: str
    argv: list[str]
    expect_rc: tuple[int, ...] = (0,)
    rc: int | None = None
    wall_s: float = 0.0
    first_output_s: float | None = None
    longest_silence_s: float = 0.0
    traceback: bool = False
    head: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def run_in_pty(
    argv: list[str], cwd: Path, env: dict[str, str], limit_s: float
) -> tuple[int, bytes, list[float]]:
    """Run under a pseudo-terminal (progress displays show as for a person); the output and the times
    at which each chunk of it came."""
    master, slave = pty.openpty()
    started = time.monotonic()
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    output, times = bytearray(), []
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        chunk = b""
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                chunk = b""
            if chunk:
                output += chunk
                times.append(time.monotonic() - started)
                continue
        if process.poll() is not None:
            break
        if ready:  # end of output, the process not yet reaped
            time.sleep(0.05)
        if time.monotonic() - started > limit_s:
            process.kill()
    process.wait()
    os.close(master)
    times.append(time.monotonic() - started)  # the end, for the silence before it
    return process.returncode, bytes(output), times


def walk(steps: list[Step], cwd: Path, env: dict[str, str]) -> None:
    for step in steps:
        rc, output, times = run_in_pty(step.argv, cwd, env, limit_s=900)
        text = output.decode(errors="replace").replace("\r", "\n")
        step.rc, step.wall_s = rc, round(times[-1], 2)
        step.first_output_s = round(times[0], 2) if len(times) > 1 else None
        gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
        step.longest_silence_s = round(max(gaps), 2)
        step.traceback = "Traceback (most recent call last)" in text
        step.head = [line for line in (raw.rstrip() for raw in text.splitlines()) if line.strip()][:12]
        if step.traceback:
            step.problems.append("printed a traceback")
        if step.longest_silence_s >= SILENT_MINUTE_S:
            step.problems.append(f"silent for {step.longest_silence_s:.0f} s")
        if step.wall_s > FIRST_WORD_S and (
            step.first_output_s is None or step.first_output_s > FIRST_WORD_S + 1
        ):
            step.problems.append(f"took {step.wall_s:.1f} s, first word after {step.first_output_s} s")
        if rc not in step.expect_rc:
            step.problems.append(f"exit {rc}, expected {step.expect_rc}")
        mark = "ok " if not step.problems else "BAD"
        print(f"{mark} {step.name:38} rc={rc} {step.wall_s:7.2f}s  {'; '.join(step.problems)}", flush=True)


def mcp_tool_list(env: dict[str, str], cwd: Path) -> dict:
    import anyio
    from mcp import Client, StdioServerParameters

    async def listing() -> dict:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "cuda_agent_mcp", "serve"], env=env, cwd=str(cwd)
        )
        async with Client(params) as client:
            return (await client.list_tools()).model_dump(mode="json", by_alias=True, exclude_none=True)

    tools = anyio.run(listing)
    return {"tools": len(tools["tools"]), "bytes": len(json.dumps(tools, separators=(",", ":")).encode())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path, required=True, help="a KernelBench tree (level1, ...)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--commit", default="HEAD", help="the commit of this repository to walk through")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", args.commit], cwd=REPO, capture_output=True, text=True, check=False
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="newcomer-") as tmp:
        root = Path(tmp)
        clone, home, work = root / "cuda-agent-mcp", root / "home", root / "work"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        subprocess.run(["git", "checkout", "-q", args.commit], cwd=clone, check=True)
        home.mkdir()
        work.mkdir()
        kb = args.kernelbench.resolve()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_AGENT_", "XDG_"))} | {
            "HOME": str(home),
            "PYTHONPATH": str(clone),
            "TERM": "xterm-256color",
            "COLUMNS": "120",
        }
        cli = [sys.executable, "-m", "cuda_agent_mcp"]
        steps = [
            Step("compile examples/relu (README set-up)", [*cli, "compile", str(clone / "examples/relu")]),
            Step("tasks list", [*cli, "tasks", "list"]),
            Step("tasks list --tasks KernelBench", [*cli, "tasks", "list", "--tasks", str(kb)]),
            Step(
                "tasks show level1/19", [*cli, "tasks", "show", "kernelbench/level1/19", "--tasks", str(kb)]
            ),
            Step("workspace new examples/row_sum ./ws", [*cli, "workspace", "new", "examples/row_sum", "ws"]),
            Step("compile ./ws", [*cli, "compile", "ws"], expect_rc=(0, 1)),
            Step("compile ./ws --json", [*cli, "compile", "ws", "--json"], expect_rc=(0, 1)),
            Step("audit ./ws", [*cli, "audit", "ws"], expect_rc=(0, 1)),
            Step("verify ./ws (no GPU)", [*cli, "verify", "ws"], expect_rc=(3,)),
            Step(
                "verify ./ws --device cpu (kernels)",
                [*cli, "verify", "ws", "--device", "cpu"],
                expect_rc=(1, 2, 3),
            ),
            Step("profile ./ws (no GPU)", [*cli, "profile", "ws"], expect_rc=(3,)),
            Step("eval ./ws --json (no GPU)", [*cli, "eval", "ws", "--json"], expect_rc=(3,)),
            Step(
                "tasks audit examples/relu (no GPU)",
                [*cli, "tasks", "audit", "examples/relu"],
                expect_rc=(3,),
            ),
            Step("journal", [*cli, "journal"]),
            Step("judges status", [*cli, "judges", "status"]),
        ]
        walk(steps, work, env)
        # What the no-GPU lines point a user to: a pure-PyTorch ModelNew checked on the CPU.
        torch_ws = work / "torch_ws"
        shutil.copytree(work / "ws", torch_ws)
        shutil.rmtree(torch_ws / "kernels", ignore_errors=True)
        (torch_ws / "model_new.py").write_text(TORCH_MODEL_NEW)
        cpu_steps = [
            Step(
                "verify torch_ws --device cpu (audit)",
                [*cli, "verify", "torch_ws", "--device", "cpu"],
                expect_rc=(1,),
            ),
            Step(
                "profile torch_ws --device cpu (audit)",
                [*cli, "profile", "torch_ws", "--device", "cpu"],
                expect_rc=(1,),
            ),
            Step(
                "verify torch_ws --device cpu --no-audit",
                [*cli, "verify", "torch_ws", "--device", "cpu", "--no-audit"],
            ),
            Step(
                "eval torch_ws --device cpu --no-audit",
                [*cli, "eval", "torch_ws", "--device", "cpu", "--no-audit", "--json"],
            ),
        ]
        walk(cpu_steps, work, env)
        steps += cpu_steps
        mcp = mcp_tool_list(env, work)
        print(f"MCP tools/list over stdio: {mcp['bytes']} bytes, {mcp['tools']} tools")
    bad = [s.name for s in steps if s.problems]
    result = {
        "commit": commit or "unknown",
        "machine": "CPU-only development machine (2 cores, no GPU), Python " + sys.version.split()[0],
        "steps": [asdict(s) for s in steps],
        "mcp_tool_list": mcp,
        "failed_steps": bad,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{len(steps) - len(bad)} of {len(steps)} steps clean; written to {args.out}")
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
