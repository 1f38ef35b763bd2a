"""The report in a real headless browser (Debian's chromium): it loads with no console output at all,
hostile text stays text, and the screenshot shows the summary table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cuda_agent_mcp.bench.browser import find_chromium, open_page
from cuda_agent_mcp.bench.models import BuildStats, SolutionSpec, SuiteRequest, TaskRow
from cuda_agent_mcp.bench.report import write_report
from cuda_agent_mcp.bench.rundir import RunDirectory
from cuda_agent_mcp.bench.summary import build_summary
from cuda_agent_mcp.results import (
    KernelBreakdown,
    KernelResources,
    KernelTime,
    Passed,
    SpeedOfLight,
    SpeedupInterval,
    WrongOutput,
)

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="needs chromium (apt-get install chromium)")

HOSTILE = "<img src=x onerror=\"console.log('escaped badly')\"><script>console.log('escaped badly')</script>"


def rows() -> list[TaskRow]:
    made = []
    for level in (1, 2):
        for number in range(1, 9):
            speedup = 0.6 + 0.3 * number
            correct = number % 4 != 0
            made.append(
                TaskRow(
                    task_id=f"kernelbench/level{level}/{number}",
                    name=HOSTILE if number == 3 else f"Task{number}",
                    level=level,
                    solution=f"/solutions/level{level}/{number}",
                    solution_kind="workspace",
                    outcome="correct" if correct else "incorrect",
                    failure=None if correct else "wrong_output",
                    message="" if correct else HOSTILE,
                    reward=3.0 if correct and speedup > 1.06 else (1.0 if correct else -1.0),
                    candidate_ms=1.0 / speedup,
                    eager_ms=1.2,
                    compile_ms=1.0,
                    speedup_vs_eager=1.2 * speedup if correct else None,
                    speedup_vs_compile=speedup if correct else None,
                    speedup_vs_compile_ci=SpeedupInterval(low=speedup * 0.97, high=speedup * 1.03)
                    if correct
                    else None,
                    speed_of_light=SpeedOfLight(
                        t_sol_ms=0.2,
                        bytes_moved=1 << 30,
                        flops=0,
                        bound="memory",
                        fraction=0.2 * speedup,
                        score=0.6,
                    )
                    if correct
                    else None,
                    verify_verdict=Passed(trials=5, max_abs_error=1e-6, max_rel_error=1e-6)
                    if correct
                    else WrongOutput(phase="verify", trial=0, distribution="task", message=HOSTILE),
                    kernels=KernelBreakdown(
                        kernels=[
                            KernelTime(name=f"{HOSTILE}_kernel", calls=1, total_ms=0.5, origin="workspace")
                        ],
                        traced_ms=0.5,
                        workspace_share=1.0,
                    ),
                    build=BuildStats(
                        ok=True,
                        summary="built 3 files",
                        files=3,
                        compiled=1,
                        wall_s=1.2,
                        errors=0,
                        warnings=0,
                        kernels=[
                            KernelResources(
                                file="kernels/k.cu",
                                name="k(float*)",
                                mangled_name="_Z1kPf",
                                arch="sm_90",
                                registers=32,
                                shared_memory_bytes=0,
                            )
                        ],
                    ),
                )
            )
    made.append(made[0].model_copy(update={"task_id": "kernelbench/level2/99", "outcome": "task_error",
                                           "failure": "baseline_failed"}))  # fmt: skip
    return made


def test_the_report_loads_in_chromium_without_console_output_and_shows_the_summary_table(
    tmp_path: Path,
) -> None:
    pytest.importorskip("matplotlib")
    request = SuiteRequest(
        solutions=SolutionSpec(kind="workspaces", path="/solutions"), out_dir=str(tmp_path)
    )
    made = rows()
    run_dir = RunDirectory.open(tmp_path / "report", request, [r.task_id for r in made])
    for row in made:
        run_dir.append(row)
    summary = build_summary(run_dir, request, started_at=0.0, complete=True)
    write_report(run_dir.path, summary, run_dir.ordered())
    page = run_dir.path / "report.html"
    text = page.read_text()
    assert text.count("<svg") == 5 and re.search(r"""(src|href)=["']?(https?:|//)""", text) is None
    assert HOSTILE not in text  # every name and message is escaped
    browser = open_page(page, tmp_path / "report.png")
    assert browser.returncode == 0 and browser.console == []
    assert browser.screenshot is not None
    from matplotlib.image import imread

    pixels = imread(browser.screenshot)
    top = pixels[: int(pixels.shape[0] * 0.45), :, :3]
    inked = (top.mean(axis=2) < 0.5).mean()
    assert inked > 0.01, "the top of the page (title and summary table) is blank"
    data = json.loads((run_dir.path / "summary.json").read_text())
    assert data["summary"]["groups"][0]["scored"] == 16


def test_the_console_check_sees_a_page_that_fails(tmp_path: Path) -> None:
    """The check above cannot pass by not looking: a page whose script throws is caught."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><p>x</p><script>notDefined();</script></body></html>")
    browser = open_page(page, tmp_path / "broken.png")
    assert any("notDefined" in line for line in browser.console)
