"""`cuda-agent bench` as a real process: a table by default, one JSON object with --json, one readable
line and exit 2 for every bad request, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent_mcp.bench.models import SolutionSpec, SuiteRequest, TaskRow
from cuda_agent_mcp.bench.rundir import RunDirectory
from cuda_agent_mcp.bench.summary import register_run
from tests.bench.conftest import TinySuite
from tests.cli.test_cli import cli


def written_run(tmp_path: Path, cache: Path) -> tuple[str, Path]:
    out = tmp_path / "report"
    request = SuiteRequest(solutions=SolutionSpec(kind="workspaces", path="/s"), out_dir=str(out))
    ids = ["kernelbench/level1/1", "kernelbench/level1/2", "kernelbench/level2/7"]
    run_dir = RunDirectory.open(out, request, ids)
    run_dir.append(TaskRow(task_id=ids[0], name="ReLU", level=1, solution=None, solution_kind=None, outcome="correct",
                           speedup_vs_eager=1.5, speedup_vs_compile=1.2, reward=3.0))  # fmt: skip
    run_dir.append(TaskRow(task_id=ids[1], name="Tanh", level=1, solution=None, solution_kind=None, outcome="incorrect",
                           failure="wrong_output", reward=-1.0))  # fmt: skip
    register_run(cache, run_dir.run_id, out)
    return run_dir.run_id, out


def test_show_prints_the_summary_of_a_partial_run_by_id_or_directory(tmp_path: Path) -> None:
    run_id, out = written_run(tmp_path, tmp_path / "cache")
    shown = cli("bench", "show", run_id, cache=tmp_path / "cache")
    assert shown.returncode == 0, shown.stderr
    assert f"run {run_id}" in shown.stdout and "partial" in shown.stdout and "50.0%" in shown.stdout
    assert "2 of 3 tasks have a row" in shown.stdout
    as_json = cli("bench", "show", str(out), "--json", cache=tmp_path / "cache")
    summary = json.loads(as_json.stdout)
    assert summary["run_id"] == run_id and summary["groups"][0]["correct"] == 1 and not summary["complete"]


def test_report_rewrites_the_files_and_checks_the_page_in_chromium(tmp_path: Path) -> None:
    from cuda_agent_mcp.bench.browser import find_chromium

    if find_chromium() is None:
        pytest.skip("needs chromium")
    _, out = written_run(tmp_path, tmp_path / "cache")
    done = cli(
        "bench", "report", str(out), "--screenshot", str(tmp_path / "page.png"), cache=tmp_path / "cache"
    )
    assert done.returncode == 0, done.stderr
    assert (out / "report.html").is_file() and (tmp_path / "page.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--policy", "cuda-agent", "--solutions", "."], "give --solutions or --policy, not both"),
        ([], "give --solutions DIR"),
        (["--solutions", "/nonexistent/solutions"], "no such solutions directory"),
        (
            ["--solutions", "{solutions}", "--id", "kernelbench/level7/1"],
            "unknown task ids: kernelbench/level7/1",
        ),
        (["--solutions", "{solutions}", "--rules", "paper"], "rules"),
        (["--solutions", "{solutions}", "--format", "kernelbench"], "--rules kernelbench"),
        (
            ["--solutions", "{solutions}", "--format", "kernelbench", "--language", "cupy"],
            "KernelBench single-file solutions are CUDA",
        ),
        # Triton single files are accepted: what stops this one is the rule set, not the language.
        (
            ["--solutions", "{solutions}", "--format", "kernelbench", "--language", "triton"],
            "--rules kernelbench",
        ),
        (["--solutions", "{solutions}", "--language", "fortran"], "fortran"),
    ],
)
def test_bad_requests_get_one_line_and_exit_2(
    tiny_suite: TinySuite, tmp_path: Path, arguments: list[str], message: str
) -> None:
    arguments = [a.replace("{solutions}", str(tiny_suite.solutions)) for a in arguments]
    done = cli("bench", "run", "--tasks", str(tiny_suite.tasks), "--out", str(tmp_path / "out"), *arguments,
               cache=tiny_suite.cache)  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()  # nothing ran, nothing was written


def test_an_existing_report_directory_of_another_run_is_refused_with_the_remedy(
    tiny_suite: TinySuite, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    done = cli("bench", "run", "--tasks", str(tiny_suite.tasks), "--solutions", str(tiny_suite.solutions),
               "--out", str(out), "--device", "cpu", cache=tiny_suite.cache)  # fmt: skip
    assert (
        done.returncode == 2
        and "is not a bench report directory" in done.stderr
        and "--overwrite" in done.stderr
    )
    assert (out / "notes.txt").read_text() == "mine"
