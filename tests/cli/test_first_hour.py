"""Issue 19, the first hour: each item as a new user meets it, through the real `cuda-agent` command.

Every failure is one line and an exit code (2 usage, 3 infrastructure); `--json` prints one JSON object
whatever happens; ids and option names survive 80 columns and pipes."""

from __future__ import annotations

import ast
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from tests.cli.first_hour import (
    NO_GPU,
    TORCH_RELU,
    cuda_agent,
    new_workspace,
    no_traceback,
    one_json,
    one_line_error,
    small_relu,
    torch_workspace,
)
from tests.conftest import EXAMPLES, REPO

# -- 1. an audit whose null candidates could not be judged is "unknown", never "sound" ------------------


def test_a_task_audit_whose_null_candidates_time_out_is_unknown_and_exits_3(tmp_path: Path) -> None:
    """A slow reference on the CPU: every null candidate (it calls the reference) runs out of time. A
    timeout says nothing about the task, so the audit may not call it sound."""
    code = (
        small_relu(tmp_path)
        .read_text()
        .replace("return torch.relu(x)", "time.sleep(1.5)\n        return torch.relu(x)")
    )
    slow = tmp_path / "slow.py"
    slow.write_text("import time\n" + code)
    args = ["tasks", "audit", str(slow), "--device", "cpu", "--trials", "1", "--call-timeout", "0.5"]
    shown = cuda_agent(*args)
    no_traceback(shown)
    assert shown.returncode == 3, shown.stdout + shown.stderr
    assert "unknown" in shown.stdout and "sound" not in shown.stdout
    assert "timed out after 0.5 s" in shown.stdout
    as_json = cuda_agent(*args, "--json")
    assert as_json.returncode == 3
    result = one_json(as_json)
    assert result["verdict"] == "unknown" and result["weak"] is False
    assert {c["outcome"] for c in result["null_candidates"]} == {"unknown"}


def test_a_cpu_task_audit_of_a_task_with_large_outputs_judges_every_null_candidate() -> None:
    """The issue's case: examples/relu has 128 MiB outputs, which used to crash the CPU worker (its file
    limit also capped its shared-memory output files) and so made the audit's null candidates
    'crashed'. The worker's limit now fits the task's outputs: every null candidate is refused for its
    answer, and the task is sound."""
    done = cuda_agent("tasks", "audit", "examples/relu", "--device", "cpu", "--trials", "1", "--json")
    no_traceback(done)
    result = one_json(done)
    assert (result["verdict"], done.returncode) == ("sound", 0), result
    assert all(
        c["verdict_status"] in ("wrong_output", "contract_violation", "rejected")
        for c in result["null_candidates"]
    ), result["null_candidates"]


# -- 2. no GPU: one line, up front, exit 3 ---------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["verify", "{ws}"],
        ["profile", "{ws}"],
        ["eval", "{ws}"],
        ["tasks", "audit", "examples/relu"],
        ["optimize", "examples/relu", "--base-url", "http://127.0.0.1:9/v1"],
    ],
    ids=lambda c: c[0] if c[0] != "tasks" else "tasks audit",
)
def test_commands_that_need_a_gpu_say_so_in_one_line_before_anything_runs(
    command: list[str], tmp_path: Path
) -> None:
    workspace = torch_workspace(tmp_path)
    args = [a.replace("{ws}", str(workspace)) for a in command]
    started = time.monotonic()
    done = cuda_agent(*args, env=NO_GPU, cwd=tmp_path)
    line = one_line_error(done, 3)
    assert "no GPU is visible here" in line and "--device cpu" in line
    assert "retrying may work" not in done.stderr
    assert time.monotonic() - started < 60  # no judge started, no build waited for
    assert not (tmp_path / "cuda-agent-runs").exists()  # optimize refused before making a run


# -- 3. every --json command prints one JSON object, whatever happens -------------------------------------


def test_eval_json_prints_an_error_object_when_the_evaluation_fails_for_an_infrastructure_reason(
    tmp_path: Path,
) -> None:
    done = cuda_agent("eval", str(torch_workspace(tmp_path)), "--json", env=NO_GPU)
    assert done.returncode == 3
    error = one_json(done)["error"]
    assert error["kind"] == "infrastructure" and error["type"] == "GpuUnavailable"
    assert "no GPU is visible" in error["message"]


@pytest.mark.parametrize(
    ("args", "code", "kind"),
    [
        (["tasks", "list", "--tasks", "{bad}"], 2, "usage"),
        (["tasks", "show", "kernelbench/level9/999"], 2, "usage"),
        (["tasks", "audit", "examples/relu", "--device", "tpu"], 2, "usage"),
        (["workspace", "new", "examples/relu", "{nonempty}"], 2, "usage"),
        (["compile", "{tmp}"], 2, "usage"),
        (["compile", "{ws}", "--arch", "banana"], 2, "usage"),
        (["verify", "{ws}", "--trials", "0"], 2, "usage"),
        (["verify", "{ws}", "--no-such-option"], 2, "usage"),
        (["profile", "{ws}", "--baselines", "sometimes"], 2, "usage"),
        (["eval", "{tmp}/missing"], 2, "usage"),
        (["audit", "{tmp}"], 2, "usage"),
        (["optimize", "examples/relu", "--resume", "{tmp}/missing.jsonl"], 2, "usage"),
        (["policy", "list", "--json", "--no-such-option"], 2, "usage"),
        (["trajectories", "export", "{tmp}/missing", "--out", "{tmp}/o.jsonl"], 2, "usage"),
    ],
)
def test_every_json_command_prints_one_error_object_with_todays_exit_codes(
    args: list[str], code: int, kind: str, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("class Model(:\n")
    nonempty = tmp_path / "nonempty"
    nonempty.mkdir()
    (nonempty / "file").write_text("x")
    workspace = torch_workspace(tmp_path)
    fill = {"{bad}": str(bad), "{nonempty}": str(nonempty), "{ws}": str(workspace), "{tmp}": str(tmp_path)}
    filled = []
    for arg in args:
        for key, value in fill.items():
            arg = arg.replace(key, value)
        filled.append(arg)
    done = cuda_agent(*filled, *([] if "--json" in filled else ["--json"]), cwd=tmp_path)
    if any(a == "--no-such-option" for a in filled):  # click's own parse error: usage, hint, reason
        no_traceback(done)
        assert done.returncode == code and "Error: No such option: --no-such-option" in done.stderr
    else:
        one_line_error(done, code)
    error = one_json(done)["error"]
    assert error["kind"] == kind and error["message"]


def test_json_output_on_success_is_one_plain_object_for_every_listing_command(tmp_path: Path) -> None:
    for args in (["tasks", "list"], ["tasks", "show", "examples/relu", "--no-inspect"], ["journal"]):
        done = cuda_agent(*args, "--json")
        assert done.returncode == 0, done.stderr
        one_json(done)
    policies = cuda_agent("policy", "list", "--json", tty=True)  # no colour codes, even on a terminal
    assert policies.returncode == 0
    assert {p["name"] for p in json.loads(policies.stdout)} >= {"cuda-agent", "kevin-32b"}


# -- 4. verify --device cpu does what its help says --------------------------------------------------------


def test_verify_on_the_cpu_needs_no_kernel_sources_for_a_pytorch_model_new(tmp_path: Path) -> None:
    helped = cuda_agent("verify", "--help")
    assert "needs no kernel sources" in " ".join(helped.stdout.split())
    workspace = torch_workspace(tmp_path)
    assert not list((workspace / "kernels").iterdir())
    passed = cuda_agent("verify", str(workspace), "--device", "cpu", "--no-audit", "--json")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert one_json(passed)["verdict"]["status"] == "passed"
    audited = cuda_agent("verify", str(workspace), "--device", "cpu")  # as the help says: the audit refuses
    assert audited.returncode == 1 and "forbidden_op" in audited.stdout
    on_gpu = cuda_agent("verify", str(workspace), "--json")  # cuda still needs kernels (or no GPU here)
    assert on_gpu.returncode in (1, 3)
    no_traceback(on_gpu)


# -- 5. a binding that registers nothing fails the build, naming the file ------------------------------------


@pytest.mark.nvcc
def test_a_binding_without_register_binding_fails_the_build_naming_the_file(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    workspace = new_workspace(tmp_path)
    shutil.copytree(EXAMPLES / "relu" / "kernels", workspace / "kernels", dirs_exist_ok=True)
    binding = workspace / "kernels" / "relu_binding.cpp"
    binding.write_text(
        binding.read_text().replace("REGISTER_BINDING(relu, register_relu)", "// REGISTER_BINDING(relu, x)")
        + "\nvoid keep_register_relu(pybind11::module& m) { register_relu(m); }\n"
    )
    env = {"CUDA_AGENT_CACHE": str(shared_build_cache)}
    done = cuda_agent("compile", str(workspace), "--json", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    result = one_json(done)
    assert result["failure"] == "no_binding" and not result["ok"]
    assert "kernels/relu_binding.cpp registers no function" in result["summary"]
    assert result["diagnostics"][-1]["file"] == "kernels/relu_binding.cpp"
    table = cuda_agent("compile", str(workspace), env=env)
    assert table.returncode == 1 and "kernels/relu_binding.cpp registers no function" in table.stdout
    binding.write_text(
        binding.read_text().replace("// REGISTER_BINDING(relu, x)", "REGISTER_BINDING(relu, register_relu)")
    )
    fixed = cuda_agent("compile", str(workspace), "--json", env=env)
    assert fixed.returncode == 0 and one_json(fixed)["ok"], fixed.stdout


# -- 6. bad values: one line naming the value and the choices -----------------------------------------------


def test_a_bad_arch_option_or_variable_is_one_line_naming_the_value_and_the_choices(tmp_path: Path) -> None:
    workspace = torch_workspace(tmp_path)
    option = one_line_error(cuda_agent("compile", str(workspace), "--arch", "banana"), 2)
    assert "--arch 'banana' is not a GPU target" in option and "sm_90a" in option
    variable = one_line_error(cuda_agent("compile", str(workspace), env={"CUDA_AGENT_ARCH": "foo"}), 2)
    assert "$CUDA_AGENT_ARCH 'foo' is not a GPU target" in variable and "sm_90" in variable
    device = one_line_error(cuda_agent("verify", str(workspace), "--device", "gpu"), 2)
    assert "'gpu'" in device and "'cuda' or 'cpu'" in device


@pytest.mark.nvcc
def test_the_docker_executor_without_an_engine_is_one_line(tmp_path: Path) -> None:
    workspace = torch_workspace(tmp_path)
    shutil.copytree(EXAMPLES / "relu" / "kernels", workspace / "kernels", dirs_exist_ok=True)
    env = {"CUDA_AGENT_EXECUTOR": "docker", "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    line = one_line_error(cuda_agent("compile", str(workspace), env=env), 3)
    assert "could not start docker: no Docker engine answers" in line and "start dockerd" in line
    as_json = cuda_agent("compile", str(workspace), "--json", env=env)
    assert one_json(as_json)["error"]["type"] == "ExecutorUnavailable"


def test_optimize_resume_of_a_missing_file_is_one_line_and_leaves_no_run_directory(tmp_path: Path) -> None:
    done = cuda_agent(
        "optimize", "examples/relu", "--resume", str(tmp_path / "gone.jsonl"), "--device", "cpu", cwd=tmp_path
    )
    line = one_line_error(done, 2)
    assert "--resume" in line and "gone.jsonl" in line
    assert not (tmp_path / "cuda-agent-runs").exists()


# -- 7. hints keep their brackets ---------------------------------------------------------------------------------


def test_the_missing_mcp_extra_hint_keeps_its_brackets(tmp_path: Path) -> None:
    """An environment without the mcp package: a stand-in that fails to import as the missing one does."""
    fake = tmp_path / "site" / "mcp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'mcp'\")\n")
    env = {"PYTHONPATH": str(tmp_path / "site")}
    done = cuda_agent("serve", env=env)
    line = one_line_error(done, 3)
    assert "pip install 'cuda-agent-mcp[mcp]'" in line


# -- 8. ids are never cut, at 80 columns or through a pipe ----------------------------------------------------------


@pytest.mark.parametrize("tty", [False, True], ids=["pipe", "terminal"])
def test_task_ids_and_names_survive_80_columns(kernelbench: Path, tty: bool) -> None:
    listing = one_json(cuda_agent("tasks", "list", "--tasks", str(kernelbench), "--level", "3", "--json"))
    done = cuda_agent("tasks", "list", "--tasks", str(kernelbench), "--level", "3", tty=tty)
    assert done.returncode == 0 and "…" not in done.stdout
    shown = done.stdout if tty else done.stdout.replace("\n", " ")
    words = set(shown.replace("│", " ").split())
    assert {t["id"] for t in listing["tasks"]} <= words
    if not tty:  # plain: one task per line, every cell whole
        assert all(t["name"] in words for t in listing["tasks"])
        assert "┃" not in done.stdout


@pytest.mark.parametrize("tty", [False, True], ids=["pipe", "terminal"])
def test_policy_descriptions_and_option_names_are_never_cut(tty: bool) -> None:
    listing = {p["name"]: p for p in one_json_list(cuda_agent("policy", "list", "--json"))}
    done = cuda_agent("policy", "list", tty=tty)
    assert done.returncode == 0 and "…" not in done.stdout
    text = " ".join(done.stdout.replace("│", " ").split())
    for name, preset in listing.items():
        assert name in text and preset["model"] in text
        if not tty:
            assert " ".join(preset["description"].split()) in text
    helped = cuda_agent("trajectories", "export", "--help", tty=tty)
    assert "--allow-invalid-calls" in helped.stdout and "…" not in helped.stdout


@pytest.mark.parametrize("group", [[], ["tasks"], ["workspace"], ["policy"], ["trajectories"]], ids=str)
def test_command_lists_in_plain_help_cut_no_description(group: list[str]) -> None:
    done = cuda_agent(*group, "--help")
    assert done.returncode == 0
    commands = done.stdout.split("Commands:", 1)[1]
    assert "..." not in commands and "…" not in commands, commands


def one_json_list(done: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    value = json.loads(done.stdout)
    assert isinstance(value, list)
    return value


# -- 10. workspace skeleton, messages, serve warnings, the runs directory --------------------------------------------


def test_workspace_new_writes_a_valid_skeleton_for_a_model_without_constructor_arguments(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    done = cuda_agent("workspace", "new", str(small_relu(tmp_path)), str(workspace))
    assert done.returncode == 0, done.stderr
    skeleton = (workspace / "model_new.py").read_text()
    assert "def __init__(self):" in skeleton
    ast.parse(skeleton)
    with_args = cuda_agent("workspace", "new", "examples/bias_add_relu", str(tmp_path / "ws2"))
    assert with_args.returncode == 0
    assert "def __init__(self, features: int):" in (tmp_path / "ws2" / "model_new.py").read_text()
    again = one_line_error(cuda_agent("workspace", "new", "examples/relu", str(workspace)), 2)
    assert "--overwrite" in again and "pass overwrite" not in again


@pytest.mark.nvcc
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="two units compile at once only with two cores")
def test_the_compile_progress_names_every_file_still_compiling(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    workspace = new_workspace(tmp_path)
    shutil.copytree(EXAMPLES / "relu" / "kernels", workspace / "kernels", dirs_exist_ok=True)
    for source in (workspace / "kernels").iterdir():  # both units miss the cache: both compile now
        source.write_text(source.read_text() + f"\n// {tmp_path.name}\n")
    env = {"CUDA_AGENT_CACHE": str(shared_build_cache)}
    done = cuda_agent("compile", str(workspace), env=env, tty=True, interactive=True, columns=200)
    assert done.returncode == 0, done.stdout + done.stderr
    # While the slow binding compiles, the bar still names it (not "kernels/relu.cu: compiled").
    assert "compiling kernels/relu_binding.cpp, kernels/relu.cu" in done.stderr
    assert "compiling kernels/relu_binding.cpp " in done.stderr.replace("\n", " ")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_serve_http_starts_without_deprecation_warnings(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    tokens = tmp_path / "tokens"
    tokens.write_text("alice 0123456789abcdef0123\n")
    port = _free_port()
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen(
        [sys.executable, "-m", "cuda_agent_mcp", "serve", "--http", f"127.0.0.1:{port}", "--tokens-file", str(tokens)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert server.poll() is None, server.communicate()
            time.sleep(0.2)
        else:
            pytest.fail("the server did not start listening")
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert "Deprecation" not in stderr and "Warning" not in stderr, stderr


def test_optimize_takes_a_runs_dir_and_its_summary_keeps_headers_and_paths_whole(tmp_path: Path) -> None:
    from tests.agent.scripted_llm import ScriptedLLM, serve, tool_call, turn

    script = [
        turn(tool_call("write_file", {"path": "model_new.py", "content": TORCH_RELU})),
        turn(tool_call("evaluate", {"trials": 2})),
    ]
    runs = tmp_path / "my-runs"
    with serve(ScriptedLLM(replies=script)) as llm:
        done = cuda_agent(
            "optimize", str(small_relu(tmp_path)), "--base-url", llm.url, "--runs-dir", str(runs),
            "--device", "cpu", "--no-audit", "--baselines", "skip", cwd=tmp_path, tty=True,
        )  # fmt: skip
    no_traceback(done)
    assert not (tmp_path / "cuda-agent-runs").exists()
    trajectory = next(runs.glob("*/trajectory.jsonl"))
    assert (trajectory.parent / "workspace" / "model_new.py").read_text() == TORCH_RELU
    assert "…" not in done.stdout
    for header in ("seed", "stop", "best reward", "vs eager", "vs compile"):
        assert header in done.stdout
    assert str(trajectory) in done.stdout  # a path on a line of its own, whole at 80 columns
    helped = " ".join(cuda_agent("optimize", "--help").stdout.split())
    assert "--runs-dir" in helped and "./cuda-agent-runs" in helped


# -- 11. install and README ----------------------------------------------------------------------------------------


def test_pyyaml_is_a_core_dependency_so_policy_list_needs_no_extra() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert any(d.lower().startswith("pyyaml") for d in project["dependencies"])


def test_the_readme_names_the_presets_api_key_variables_and_marks_the_gpu_commands() -> None:
    readme = (REPO / "README.md").read_text()
    for policy in (REPO / "policies").glob("*/policy.yaml"):
        variable = next(
            line.split(":", 1)[1].strip()
            for line in policy.read_text().splitlines()
            if line.startswith("api_key_env:")
        )
        assert variable in readme, variable
    use = readme[readme.index("## Use") :]
    for command in ("cuda-agent verify", "cuda-agent profile", "cuda-agent eval", "cuda-agent tasks audit"):
        line = next(line for line in use.splitlines() if line.startswith(command))
        assert "GPU" in line, line


@pytest.mark.nvcc
def test_the_readme_python_snippet_works_from_any_directory(tmp_path: Path, shared_build_cache: Path) -> None:
    readme = (REPO / "README.md").read_text()
    snippet = readme.split("```python\n", 1)[1].split("```", 1)[0]
    environment = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_AGENT_CACHE": str(shared_build_cache)}
    done = subprocess.run(
        [sys.executable, "-c", snippet],
        capture_output=True,
        text=True,
        env=environment,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("True"), done.stdout
    assert "relu_vec4_kernel" in done.stdout
