"""The compute-sanitizer gate (issue 16): one call of the candidate under memcheck (or racecheck, or
synccheck), in a process of its own started ahead, at the smallest size the task allows.

Runs in the judge process. Evidence against only: an error the sanitizer reports rejects the candidate
with its first report (file and line: the build has line tables), a clean run proves nothing. Where
compute-sanitizer is missing, or there is no GPU, the result says so (`unavailable`), never "clean".
The target process costs about 4 s to start (measured on the H200), so each judge keeps one started
ahead (`start_target` hands it out and starts the next one, whose start runs beside this verify's trials,
which time nothing); a target waiting ahead has imported torch but made no CUDA context, runs nothing of a
candidate's until its request, and serves one candidate only.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Literal

import torch

from cuda_agent_mcp.executors.local import child_python_path
from cuda_agent_mcp.isolation.cgroup import PidsCgroup
from cuda_agent_mcp.isolation.identity import compile_cache_env, identity_env
from cuda_agent_mcp.results import SanitizerReport
from cuda_agent_mcp.wire import SANITIZE_TARGET_MODULE

Tool = Literal["memcheck", "racecheck", "synccheck"]
ERROR_EXIT = 86
_LOCATION = re.compile(r"\bin (\S+?):(\d+)")
MAX_TARGET_PIDS = 1024  # the sanitizer, the target and their threads (cgroup v1 counts threads)


def sanitizer_path() -> str | None:
    return shutil.which("compute-sanitizer")


class SanitizerTarget:
    """One target process under compute-sanitizer, waiting for its request."""

    def __init__(self, tool: Tool, env: dict[str, str], scratch: Path) -> None:
        self.tool = tool
        self.env = env
        self.directory = Path(tempfile.mkdtemp(prefix="sanitize-", dir=scratch))
        self.log = self.directory / "sanitizer.log"
        binary = sanitizer_path()
        assert binary is not None
        command = [
            binary, "--tool", tool, "--error-exitcode", str(ERROR_EXIT), "--print-limit", "8",
            "--log-file", str(self.log), sys.executable, "-m", SANITIZE_TARGET_MODULE,
        ]  # fmt: skip
        work = self.directory / "work"
        work.mkdir()
        # The target runs the candidate's code: it gets a cage like a worker's (CageUnavailable where none
        # can be made), joined by a shell that then becomes the sanitizer, before anything else runs.
        self.cage = PidsCgroup.required(f"target-{uuid.uuid4().hex[:12]}", max_pids=MAX_TARGET_PIDS)
        if self.cage is not None:
            command = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.cage.path), *command]
        self.started = time.monotonic()
        self.process = subprocess.Popen(  # TMPDIR is the target's own directory: the sanitizer's files too
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=(self.directory / "target.log").open("wb"),
            cwd=work,
            env={
                **env,
                "PYTHONPATH": child_python_path(env.get("PYTHONPATH", "")),
                **identity_env(os.getuid(), work),  # a worker: who it is and its caches, as worker_env gives
                **compile_cache_env(work / "cache"),
                "TMPDIR": str(work),
                # Every tensor its own cudaMalloc: the sanitizer checks accesses against allocations, and
                # the caching allocator's 2 MiB segments would hide a read just past a tensor's end.
                "PYTORCH_NO_CUDA_MEMORY_CACHING": "1",
            },
            start_new_session=True,
        )

    def run(self, candidate_dir: Path, payload: dict[str, Any], timeout_s: float) -> SanitizerReport:
        started = time.monotonic()
        data = self.directory / "payload" / "payload.pt"
        data.parent.mkdir()
        torch.save(payload, data)
        request = json.dumps({"directory": str(candidate_dir), "payload": str(data)}) + "\n"
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(request.encode())
            self.process.stdin.close()
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return SanitizerReport(
                tool=self.tool, status="timed_out", wall_s=round(time.monotonic() - started, 3)
            )
        except OSError as exc:
            self.kill()
            return SanitizerReport(tool=self.tool, status="failed", message=str(exc))
        wall = round(time.monotonic() - started, 3)
        report = self.log.read_text(errors="replace") if self.log.exists() else ""
        first = first_error(report)
        if code == ERROR_EXIT or first is not None:
            message, file, line = first or ("compute-sanitizer reported errors", None, None)
            return SanitizerReport(
                tool=self.tool, status="errors", message=message, file=file, line=line, wall_s=wall
            )
        if code != 0:
            tail = (self.directory / "target.log").read_text(errors="replace")[-1500:]
            return SanitizerReport(
                tool=self.tool, status="failed", message=f"exit status {code}: {tail}", wall_s=wall
            )
        return SanitizerReport(tool=self.tool, status="clean", wall_s=wall)

    def left_running(self) -> list[int]:
        """Processes still in the target's cage once it has exited: what the candidate's code left."""
        return self.cage.others() if self.cage is not None and self.process.poll() is not None else []

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        if self.cage is not None:
            self.cage.kill_all()
        self.process.wait()

    def close(self) -> None:
        if self.process.poll() is None:
            self.kill()
        if self.cage is not None:
            self.cage.remove()
        shutil.rmtree(self.directory, ignore_errors=True)


def first_error(report: str) -> tuple[str, str | None, int | None] | None:
    """The first error block of a compute-sanitizer log: its heading and, where the build has line
    tables, the source file and line it names."""
    lines = [
        line.removeprefix("=========").rstrip()
        for line in report.splitlines()
        if line.startswith("=========")
    ]
    for index, line in enumerate(lines):
        text = line.strip()
        if not text or text.startswith(
            ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY")
        ):
            continue
        if (
            text.startswith(
                (
                    "Invalid",
                    "Race",
                    "Barrier",
                    "Program hit",
                    "Uninitialized",
                    "Malloc",
                    "Misaligned",
                    "Out-of-range",
                    "Hazard",
                    "Error",
                )
            )
            or "hazard" in text.lower()
        ):
            block = [
                text,
                *(item.strip() for item in lines[index + 1 : index + 6] if item.startswith("    ")),
            ]
            where = next((m for item in block if (m := _LOCATION.search(item))), None)
            file = Path(where.group(1)).name if where else None
            return "; ".join(block)[:1500], file, int(where.group(2)) if where else None
    return None


def start_target(tool: Tool, device: torch.device, env: dict[str, str]) -> SanitizerTarget | SanitizerReport:
    """A target for this verify (the one started ahead by the judge's last verify, else one started now:
    about 4 s of start-up, which the trials run beside), or the reason it cannot run here. Starts the next
    verify's."""
    if device.type != "cuda":
        return SanitizerReport(
            tool=tool, status="unavailable", message="no GPU: compute-sanitizer checks device code"
        )
    if sanitizer_path() is None:
        return SanitizerReport(
            tool=tool, status="unavailable", message="compute-sanitizer is not on the PATH"
        )
    global _spare
    spare, _spare = _spare, None
    if spare is not None and (spare.tool != tool or spare.env != env or spare.process.poll() is not None):
        spare.close()
        spare = None
    target = spare or SanitizerTarget(tool, env, _spare_directory())
    try:  # the next verify's, starting beside this one
        _spare = SanitizerTarget(tool, env, _spare_directory())
    except Exception:  # the next verify starts its own and meets the failure there, as its own
        _spare = None
    return target


# The target started ahead for this judge's next verify (one per judge server process).
_spare: SanitizerTarget | None = None


def _spare_directory() -> Path:
    """Where targets live: the judge's own temporary directory (a job's scratch ends with its job, a
    target started ahead outlives it)."""
    return Path(tempfile.gettempdir())


def close_spare() -> None:
    """End the target waiting ahead (the judge server is ending)."""
    global _spare
    spare, _spare = _spare, None
    if spare is not None:
        spare.close()
