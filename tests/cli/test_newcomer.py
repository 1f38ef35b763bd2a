"""Issue 26, a newcomer's rough edges: KernelBench in two commands (`tasks fetch`, no network needed in
the tests), progress on stderr for slow steps, source shown uncut, results rendered without repeats or
timings glued onto compiler messages."""

from __future__ import annotations

import io
import subprocess
import tarfile
import time
from pathlib import Path

from rich.console import Console

from cuda_agent_mcp.build import BuildProgress
from cuda_agent_mcp.cli import render
from cuda_agent_mcp.cli.app import _compile_lines
from cuda_agent_mcp.cli.progress import step
from cuda_agent_mcp.results import BuildResult, CompileFailed, Diagnostic, Passed, VerifyResult
from tests.cli.first_hour import cuda_agent, no_traceback, one_json, one_line_error

UNREACHABLE = "http://127.0.0.1:9/ScalingIntelligence/KernelBench"
PROBLEM = (
    "import torch\nimport torch.nn as nn\n\nbatch_size = 16\ndim = 32\n\n\nclass Model(nn.Module):\n"
    "    def forward(self, x):\n        return torch.relu(x)\n\n\ndef get_inputs():\n"
    "    return [torch.randn(batch_size, dim)]\n\n\ndef get_init_inputs():\n    return []\n"
)


def _kernelbench_repository(root: Path) -> Path:
    """A repository laid out as KernelBench's: KernelBench/level1/<n>_<Name>.py (two problems)."""
    level = root / "KernelBench" / "level1"
    level.mkdir(parents=True)
    (level / "19_ReLU.py").write_text(PROBLEM)
    (level / "20_ReLUToo.py").write_text(PROBLEM)
    (root / "README.md").write_text("KernelBench\n")
    return root


# -- tasks fetch ---------------------------------------------------------------------------------------


def test_tasks_fetch_without_network_fails_with_one_line_that_says_what_to_do(tmp_path: Path) -> None:
    env = {"CUDA_AGENT_CACHE": str(tmp_path / "cache"), "CUDA_AGENT_KERNELBENCH_URL": UNREACHABLE}
    line = one_line_error(cuda_agent("tasks", "fetch", env=env, timeout=120), 3)
    assert line.startswith("error: could not download KernelBench from 127.0.0.1:9 (")
    assert "clone https://github.com/ScalingIntelligence/KernelBench yourself" in line
    assert "--tasks" in line
    as_json = cuda_agent("tasks", "fetch", "--json", env=env, timeout=120)
    assert as_json.returncode == 3
    error = one_json(as_json)["error"]
    assert error["kind"] == "infrastructure" and "could not download KernelBench" in error["message"]
    # Nothing half-made is left where the next fetch (or the catalog) would look.
    assert not (tmp_path / "cache" / "KernelBench").exists()


def test_tasks_fetch_clones_into_the_default_place_where_every_command_finds_it(tmp_path: Path) -> None:
    source = _kernelbench_repository(tmp_path / "source")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "problems"]):
        subprocess.run([*git, *command], cwd=source, check=True, capture_output=True)
    env = {"CUDA_AGENT_CACHE": str(tmp_path / "cache"), "CUDA_AGENT_KERNELBENCH_URL": source.as_uri()}
    fetched = cuda_agent("tasks", "fetch", env=env)
    no_traceback(fetched)
    assert fetched.returncode == 0, fetched.stderr
    tree = tmp_path / "cache" / "KernelBench" / "KernelBench"
    assert f"KernelBench (2 tasks) downloaded (git) to {tree}" in fetched.stdout
    assert "every command finds it there" in fetched.stdout
    listing = one_json(cuda_agent("tasks", "list", "--level", "1", "--json", env=env))
    assert [t["id"] for t in listing["tasks"]] == ["kernelbench/level1/19", "kernelbench/level1/20"]
    again = one_json(cuda_agent("tasks", "fetch", "--json", env=env))
    assert again["method"] == "present" and again["tasks"] == 2 and again["found_by_default"]


def test_tasks_fetch_unpacks_a_tarball_into_dest_and_says_how_to_use_it(tmp_path: Path) -> None:
    source = _kernelbench_repository(tmp_path / "KernelBench-main")
    archive = tmp_path / "kb.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source, arcname=source.name)  # GitHub's layout: one top-level folder
    env = {"CUDA_AGENT_CACHE": str(tmp_path / "cache"), "CUDA_AGENT_KERNELBENCH_URL": archive.as_uri()}
    dest = tmp_path / "elsewhere"
    done = one_json(cuda_agent("tasks", "fetch", "--dest", str(dest), "--json", env=env))
    assert done["method"] == "tarball" and done["tasks"] == 2 and not done["found_by_default"]
    assert (dest / "KernelBench" / "level1" / "19_ReLU.py").read_text() == PROBLEM
    text = cuda_agent("tasks", "fetch", "--dest", str(dest), env=env)
    assert f"use it with --tasks {dest / 'KernelBench'}" in text.stdout
    # Not in the default place: the catalog does not find it by itself.
    listing = one_json(cuda_agent("tasks", "list", "--json", env=env))
    assert all(not t["id"].startswith("kernelbench/") for t in listing["tasks"])


def test_tasks_fetch_refuses_a_dest_that_holds_something_else(tmp_path: Path) -> None:
    dest = tmp_path / "busy"
    dest.mkdir()
    (dest / "mine.txt").write_text("keep me")
    env = {"CUDA_AGENT_CACHE": str(tmp_path / "cache"), "CUDA_AGENT_KERNELBENCH_URL": UNREACHABLE}
    line = one_line_error(cuda_agent("tasks", "fetch", "--dest", str(dest), env=env), 2)
    assert "is not a KernelBench checkout" in line
    assert (dest / "mine.txt").read_text() == "keep me"


# -- progress ------------------------------------------------------------------------------------------


def test_a_slow_step_shows_a_spinner_on_stderr_and_nothing_on_stdout() -> None:
    shown = cuda_agent("tasks", "show", "examples/relu", "--no-code", tty=True, interactive=True)
    assert shown.returncode == 0, shown.stderr
    assert "inspecting examples/relu" in shown.stderr
    assert "inspecting" not in shown.stdout
    # Under --json stdout is the JSON alone; a person at the terminal still sees the step on stderr,
    # a program reading both streams does not.
    as_json = cuda_agent("tasks", "show", "examples/relu", "--json", tty=True, interactive=True)
    assert one_json(as_json)["task"]["id"] == "examples/relu"
    assert "inspecting" not in as_json.stdout
    piped = cuda_agent("tasks", "show", "examples/relu", "--json")
    assert one_json(piped)["task"]["id"] == "examples/relu"
    assert "inspecting" not in piped.stderr + piped.stdout


def test_off_a_terminal_a_step_prints_one_line_once_it_is_slow_and_none_under_json() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False)
    with step("quick", console=console, plain_after_s=5.0):
        pass
    assert buffer.getvalue() == ""  # quick steps say nothing
    with step("auditing examples/relu", console=console, plain_after_s=0.05) as shown:
        time.sleep(0.3)
        shown.update("auditing examples/relu: null candidate 2/5 (noise)")
        shown.update("auditing examples/relu: null candidate 2/5 (noise)")  # said once
    assert buffer.getvalue().splitlines() == [
        "auditing examples/relu …",
        "auditing examples/relu: null candidate 2/5 (noise) …",
    ]
    quiet = io.StringIO()
    with step(
        "downloading", quiet=True, console=Console(file=quiet, force_terminal=False), plain_after_s=0.0
    ) as shown:
        shown.update("still downloading")
    assert quiet.getvalue() == ""


def test_the_compile_lines_name_the_plan_every_file_as_it_starts_and_the_link() -> None:
    buffer = io.StringIO()
    with step("planning the build", console=Console(file=buffer), plain_after_s=0.05) as shown:
        time.sleep(0.3)  # a slow start (the toolchain, the sandbox view): said once it is slow
        on_progress = _compile_lines(shown)
        on_progress(BuildProgress(stage="plan", message="2 to compile, 1 cached", total=3))
        on_progress(BuildProgress(stage="compile", message="compiling binding.cpp", file="binding.cpp"))
        on_progress(BuildProgress(stage="compile", message="binding.cpp: compiled", file="binding.cpp"))
        on_progress(BuildProgress(stage="link", message="linking", done=3, total=3))
    lines = buffer.getvalue().splitlines()
    assert lines == [
        "planning the build …",
        "2 to compile, 1 cached …",
        "compiling binding.cpp (the harness's, once per toolchain: 20-30 s) …",
        "linking …",
    ]


# -- rendering -----------------------------------------------------------------------------------------


def test_tasks_show_prints_long_source_lines_whole_in_a_pipe_and_on_a_narrow_terminal(tmp_path: Path) -> None:
    long_line = (
        "        return torch.relu(x) + 0 * x.sum() + 0 * x.mean() + 0 * x.amax() + 0 * x.amin()  # END"
    )
    reference = tmp_path / "long.py"
    reference.write_text(PROBLEM.replace("        return torch.relu(x)", long_line))
    piped = cuda_agent("tasks", "show", str(reference), "--no-inspect", columns=40)
    assert piped.returncode == 0, piped.stderr
    assert long_line in piped.stdout
    narrow = cuda_agent("tasks", "show", str(reference), "--no-inspect", columns=40, tty=True)
    assert narrow.returncode == 0, narrow.stderr
    code = narrow.stdout[narrow.stdout.index("import torch") :]
    # Wrapped, not cut: every token of the long line is there, its end included.
    for token in long_line.split():
        assert token in code, token


def _console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=False, width=100), buffer


def test_verify_says_trials_once() -> None:
    result = VerifyResult(
        verdict=Passed(trials=5, max_abs_error=0.0, max_rel_error=0.0),
        source_hash="0" * 64, build_key=None, trials=5, distributions=["normal", "uniform"], wall_s=1.5,
    )  # fmt: skip
    console, buffer = _console()
    render.verdict_report("verify", result.verdict, console, extra=render.verify_lines(result))
    text = buffer.getvalue()
    assert text.count("trials:") == 1, text
    assert "trials: 5 (normal, uniform)" in text
    assert "max_abs_error: 0.0" in text  # the verdict's other fields still show


def test_the_build_timing_is_never_glued_onto_a_compiler_message() -> None:
    message = "kernels/relu.cu:3:1: error: expected a ';'"
    result = BuildResult(
        ok=False, failure="compile_error", summary=f"1 error(s) in kernels/relu.cu; first: {message}",
        source_hash="0" * 64, arch="sm_90a", wall_s=0.52,
    )  # fmt: skip
    console, buffer = _console()
    render.build_report(result, console)
    lines = [line.strip() for line in buffer.getvalue().splitlines()]
    assert any(line.endswith(message) for line in lines), lines  # verbatim, nothing after it
    assert "0.52 s, sm_90a" in lines
    assert not any(" in 0.52" in line or "(0.52 s)" in line for line in lines)


def test_a_compile_failed_verdict_lists_the_compiler_messages_verbatim_not_a_repr() -> None:
    message = 'identifier "blockDim_x" is undefined'
    verdict = CompileFailed(
        summary="1 error(s) in kernels/relu.cu",
        diagnostics=[
            Diagnostic(file="kernels/relu.cu", line=7, severity="error", message=message, tool="nvcc")
        ],
    )
    console, buffer = _console()
    render.verdict_report("verify", verdict, console, extra=[])
    lines = [line.strip() for line in buffer.getvalue().splitlines()]
    assert f"error kernels/relu.cu:7: {message}" in lines, lines
    assert "Diagnostic" not in buffer.getvalue() and "'severity'" not in buffer.getvalue()
