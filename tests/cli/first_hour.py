"""Running `cuda-agent` as a new user does, for the first-hour tests (issue 19): the real command in a
child process, a terminal of a given width (or a pipe), and the checks every command must pass."""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.conftest import EXAMPLES, REPO

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SMALL_RELU = ("batch_size = 4096\ndim = 8192", "batch_size = 8\ndim = 16")
# A pure-PyTorch ModelNew for the relu example: what `--device cpu` with `--no-audit` is for.
TORCH_RELU = (
    "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        return x.clamp_min(0)\n"
)


def cuda_agent(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    columns: int = 80,
    tty: bool = False,
    interactive: bool = False,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """The command line as a user types it. `tty` makes rich treat the pipe as a terminal of `columns`
    (TTY_COMPATIBLE; `interactive` also shows live progress), so both renderings can be checked; escape
    codes are stripped from what comes back."""
    environment = {**os.environ, "COLUMNS": str(columns), **(env or {})}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environment.get("PYTHONPATH")]))
    environment.pop("TTY_COMPATIBLE", None)
    if tty:
        environment |= {
            "TTY_COMPATIBLE": "1",
            "TTY_INTERACTIVE": "1" if interactive else "0",
            "NO_COLOR": "1",
        }
    done = subprocess.run(
        [sys.executable, "-m", "cuda_agent_mcp", *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=cwd,
        timeout=timeout,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, ANSI.sub("", done.stdout), ANSI.sub("", done.stderr)
    )


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "errors.pydantic.dev" not in done.stdout + done.stderr


def one_line_error(done: subprocess.CompletedProcess[str], code: int) -> str:
    """The failure is one `error:` line on stderr (at any width) with the exit code of its kind."""
    no_traceback(done)
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def one_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """stdout is exactly one JSON object."""
    value = json.loads(done.stdout)
    assert isinstance(value, dict), done.stdout
    return value


def small_relu(tmp_path: Path) -> Path:
    reference = tmp_path / "small_relu.py"
    reference.write_text((EXAMPLES / "relu" / "model.py").read_text().replace(*SMALL_RELU))
    return reference


@functools.cache
def _skeleton() -> Path:
    """The small relu task's new workspace, made once per test process by the real `workspace new` (about
    10 s on the CI machine: it probes the reference in a sandbox), in a directory removed at exit."""
    root = Path(tempfile.mkdtemp(prefix="cuda-agent-test-skeleton-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    created = cuda_agent("workspace", "new", str(small_relu(root)), str(root / "ws"))
    assert created.returncode == 0, created.stderr
    return root / "ws"


def new_workspace(tmp_path: Path, name: str = "ws") -> Path:
    """What `cuda-agent workspace new <tmp_path>/small_relu.py <tmp_path>/<name>` makes: a copy of the
    skeleton, its recorded source the reference written into `tmp_path`."""
    reference = small_relu(tmp_path)
    workspace = tmp_path / name
    shutil.copytree(_skeleton(), workspace)
    meta = workspace / ".cuda-agent" / "workspace.json"
    recorded = json.loads(meta.read_text())
    recorded["source"]["path"] = str(reference)
    meta.write_text(json.dumps(recorded, indent=2) + "\n")
    return workspace


def torch_workspace(tmp_path: Path, name: str = "ws") -> Path:
    """A workspace of the small relu task with a pure-PyTorch ModelNew and no kernel sources."""
    workspace = new_workspace(tmp_path, name)
    (workspace / "model_new.py").write_text(TORCH_RELU)
    return workspace


# Hides every GPU from the process: how the no-GPU path is reached on a GPU machine too.
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}
