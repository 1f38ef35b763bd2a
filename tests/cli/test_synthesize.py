"""`cuda-agent tasks synthesize` as a user runs it: one command makes a dataset the other commands load;
every mistake is one line with its exit code; `--json` is one object."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.first_hour import NO_GPU, cuda_agent, no_traceback, one_json, one_line_error


def test_one_command_makes_a_dataset_that_tasks_list_loads(tmp_path: Path, kernelbench: Path) -> None:
    out = tmp_path / "ops"
    made = cuda_agent("tasks", "synthesize", str(out), "--count", "6", "--seed", "3", "--no-runtime",
                      "--against", str(kernelbench), "--json")  # fmt: skip
    no_traceback(made)
    assert made.returncode == 0, made.stderr
    report = one_json(made)
    assert report["candidates"] == 6 and report["accepted"] >= 1
    assert "the programs were not run" in " ".join(report["notes"])

    listed = cuda_agent("tasks", "list", "--tasks", str(out / "tasks.jsonl"), "--json")
    assert listed.returncode == 0, listed.stderr
    ids = [t["id"] for t in json.loads(listed.stdout)["tasks"] if t["id"].startswith("tasks/")]
    assert len(ids) == report["accepted"]

    # The table, and the same command again: it resumes (nothing left to decide) and says the same.
    again = cuda_agent("tasks", "synthesize", str(out), "--count", "6", "--seed", "3", "--no-runtime",
                       "--against", str(kernelbench))  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert f"{report['accepted']} of 6 candidates accepted" in again.stdout
    assert "dataset: " in again.stdout


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--composer", "llm"], 2, "--composer llm needs --base-url and --model"),
        (["--window", "5"], 2, "--window must be LOW,HIGH"),
        (["--window", "9,3"], 2, "0 <= LOW < HIGH"),
        (["--count", "0", "--no-decontaminate"], 2, "count"),
        (["--against", "/no/such/tree"], 2, "--against /no/such/tree: no such directory"),
    ],
)
def test_a_mistake_is_one_line_with_its_exit_code(
    tmp_path: Path, args: list[str], code: int, words: str
) -> None:
    done = cuda_agent("tasks", "synthesize", str(tmp_path / "out"), *args, "--no-runtime")
    assert words in one_line_error(done, code)


def test_without_kernelbench_it_says_how_to_get_it(tmp_path: Path) -> None:
    done = cuda_agent("tasks", "synthesize", str(tmp_path / "out"), "--no-runtime",
                      env={"CUDA_AGENT_CACHE": str(tmp_path / "empty-cache")})  # fmt: skip
    assert "cuda-agent tasks fetch" in one_line_error(done, 2)
    assert not (tmp_path / "out").exists()


def test_cuda_without_a_gpu_is_refused_up_front(tmp_path: Path, kernelbench: Path) -> None:
    done = cuda_agent(
        "tasks",
        "synthesize",
        str(tmp_path / "out"),
        "--device",
        "cuda",
        "--against",
        str(kernelbench),
        env=NO_GPU,
    )
    assert "hides every GPU" in one_line_error(done, 3)


def test_json_failures_are_one_object(tmp_path: Path) -> None:
    done = cuda_agent("tasks", "synthesize", str(tmp_path / "out"), "--window", "x", "--json")
    assert done.returncode == 2
    assert one_json(done)["error"]["kind"] == "usage"
