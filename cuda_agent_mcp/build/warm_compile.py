"""A compile process started ahead, so an agent's next build does not wait for its start-up.

A Triton build runs `triton_compile.py` in a fresh confined process, which imports torch and Triton
before anything else (most of the build: about 1.3 s here, several seconds on the H200); a CuPy build
runs `nvrtc_compile.py` once per changed kernel source, which starts an interpreter and loads libnvrtc
inside the build's confinement (most of a warm build's 0.1 to 0.2 s: the compile of a small kernel
itself takes about 0.04 s). A builder that keeps building such workspaces (an agent's loop, an RL
environment, an MCP session) starts the next process as soon as one is used: confined the same way,
with an empty staging directory of its own, it pays its start-up and waits (`--wait`) until the builder
fills its staging and writes `GO_FILE` (for NVRTC, naming the source), or gives up after `WAIT_S`. Each
process still serves one build: candidate code never runs, and no source is read, in a process another
build uses. A builder starts one only after its second build of a kind, so a one-shot command (the
CLI's `compile`) never leaves a process behind.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from cuda_agent_mcp.build.triton_compile import GO_FILE
from cuda_agent_mcp.executors import ProcessResult

WAIT_S = 120.0  # how long a started process waits for a build before it exits
START_AFTER_BUILDS = 2


class WarmProcess:
    """One compile process started ahead, in `staging`, running on a thread of its own."""

    def __init__(self, staging: Path, run: Callable[[Path], ProcessResult]) -> None:
        self.staging = staging
        self._result: concurrent.futures.Future[ProcessResult] = concurrent.futures.Future()
        self._used = False
        threading.Thread(target=self._serve, args=(run,), daemon=True, name="warm-compile").start()

    def _serve(self, run: Callable[[Path], ProcessResult]) -> None:
        try:
            self._result.set_result(run(self.staging))
        except BaseException as exc:  # the executor failed to start it: the build goes the cold way
            self._result.set_exception(exc)
        finally:
            if not self._used:
                shutil.rmtree(self.staging, ignore_errors=True)

    @property
    def waiting(self) -> bool:
        return not self._result.done()

    async def compile(self, inputs: Path, names: list[str], go: str = "") -> ProcessResult:
        """Copy `names` (paths relative to `inputs`) into this process's staging, let it go with `go` in
        GO_FILE, and wait for it. The result's wall time is the build's, not the waiting's."""
        self._used = True
        for name in names:
            self._make_folders(Path(name).parent)
            shutil.copyfile(inputs / name, self.staging / name)
        started = time.monotonic()
        ready = self.staging / f"{GO_FILE}.tmp"
        ready.write_text(go)
        os.replace(ready, self.staging / GO_FILE)  # whole, never read half-written
        result = await anyio.to_thread.run_sync(self._result.result)
        return result.model_copy(update={"wall_s": round(time.monotonic() - started, 3)})

    def _make_folders(self, relative: Path) -> None:
        """The folders of a file to copy in, owned like the staging: the process may have been started
        as a uid of its own (the executor lent it the then empty staging), and writes its outputs there."""
        owner = self.staging.stat()
        folder = self.staging
        for part in relative.parts:
            folder = folder / part
            if not folder.is_dir():
                folder.mkdir()
                if os.geteuid() == 0 and owner.st_uid != 0:
                    os.chown(folder, owner.st_uid, owner.st_gid)


class WarmCompiles:
    """A builder's started-ahead compile process of one kind: at most one, for one command line."""

    def __init__(self) -> None:
        self._builds = 0
        self._spare: tuple[tuple[str, ...], WarmProcess] | None = None

    def take(self, argv: list[str]) -> WarmProcess | None:
        """The waiting process started for this command line, if there is one."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        started_for, process = spare
        if started_for == tuple(argv) and process.waiting:
            return process
        return None

    def after_build(
        self, argv: list[str], make_staging: Callable[[], Path], start: Callable[[Path], ProcessResult]
    ) -> None:
        """Count a build; from the second on, keep one process started ahead for the next."""
        self._builds += 1
        if self._builds >= START_AFTER_BUILDS and self._spare is None:
            self._spare = (tuple(argv), WarmProcess(make_staging(), start))
