"""Rejection fine-tuning export: which trajectories are kept, and the chat rows written for them."""

from __future__ import annotations

import json
from pathlib import Path

from cuda_agent_mcp.agent.trajectory import (
    Best,
    EndRecord,
    Header,
    MessageRecord,
    ToolRecord,
    TrajectoryWriter,
)
from cuda_agent_mcp.env import FilterPolicy, export_sft


def _write(
    path: Path, *, reward: float | None, invalid: int = 0, repeats: int = 1, infra: bool = False
) -> Path:
    writer = TrajectoryWriter(path)
    policy = {"name": "cuda-agent", "tools": ["write_file", "evaluate"]}
    writer.write(
        Header(task_id="t", reference_hash="h", policy=policy, environment={}, sampling={}, started_at="now")
    )
    writer.write(MessageRecord(turn=0, message={"role": "user", "content": "task"}))
    writer.write(MessageRecord(turn=1, message={"role": "assistant", "content": "", "tool_calls": []}))
    for _ in range(repeats):
        writer.write(
            ToolRecord(
                turn=1,
                call_id="c",
                name="evaluate",
                arguments="{}",
                valid=True,
                code_hash="x",
                infra_error=infra,
            )
        )
    best = (
        Best(reward=reward, code_hash="x", files={"model_new.py": "..."}, turn=1)
        if reward is not None
        else None
    )
    writer.write(
        EndRecord(
            stop_reason="policy_finished",
            turns=1,
            tokens=10,
            wall_s=1,
            gpu_s=1,
            invalid_calls=invalid,
            best=best,
        )
    )
    writer.close()
    return path


def test_only_clean_positive_trajectories_are_exported_each_with_a_reason(tmp_path: Path) -> None:
    paths = [
        _write(tmp_path / "good.jsonl", reward=3.0),
        _write(tmp_path / "failed.jsonl", reward=-1.0),
        _write(tmp_path / "unverified.jsonl", reward=None),
        _write(tmp_path / "invalid.jsonl", reward=2.0, invalid=1),
        _write(tmp_path / "loop.jsonl", reward=2.0, repeats=3),
        _write(tmp_path / "infra.jsonl", reward=2.0, infra=True),
    ]
    (tmp_path / "torn.jsonl").write_text('{"type": "message"}\n')
    paths.append(tmp_path / "torn.jsonl")
    verdicts = export_sft(paths, tmp_path / "sft.jsonl", FilterPolicy(min_reward=0.0))

    kept = {Path(v.path).stem: v.reason for v in verdicts}
    assert kept["good"] == "kept"
    assert "not above 0.0" in kept["failed"] and "not above" in kept["unverified"]
    assert "invalid tool calls" in kept["invalid"]
    assert "redundant loop" in kept["loop"]
    assert "infrastructure" in kept["infra"]
    assert "unreadable" in kept["torn"] or "no header" in kept["torn"]
    rows = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["metadata"]["reward"] == 3.0
    assert rows[0]["messages"][0] == {"role": "user", "content": "task"}
    assert [t["function"]["name"] for t in rows[0]["tools"]] == ["write_file", "evaluate"]


def test_the_cli_exports_a_directory_of_trajectories_and_says_why_each_was_dropped(tmp_path: Path) -> None:
    import subprocess
    import sys

    runs = tmp_path / "runs"
    runs.mkdir()
    _write(runs / "good.jsonl", reward=2.0)
    _write(runs / "bad.jsonl", reward=-1.0)
    done = subprocess.run(
        [sys.executable, "-m", "cuda_agent_mcp", "trajectories", "export", str(runs), "--out", str(tmp_path / "sft.jsonl"), "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    verdicts = {Path(v["path"]).stem: v for v in json.loads(done.stdout)}
    assert verdicts["good"]["kept"] and not verdicts["bad"]["kept"]
    assert len((tmp_path / "sft.jsonl").read_text().splitlines()) == 1
    empty = subprocess.run(
        [sys.executable, "-m", "cuda_agent_mcp", "trajectories", "export", str(tmp_path / "none"), "-o", "x.jsonl"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert empty.returncode == 2 and "no such file or directory" in empty.stderr
