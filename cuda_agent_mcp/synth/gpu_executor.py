"""Where the synthesis checks run on a GPU: as a judge server runs, with each candidate confining itself.

Measured on the H200 (issue 27): CUDA does not initialise (`cudaGetDeviceCount` error 304) in a process
under a Landlock domain, nor in the sandbox's view; it does where the judge's workers run. So the
checking child starts the way a judge server does (`isolation/judge_view.py`): as another uid, in its
own network and mount namespaces with private /tmp and /dev/shm, in a delegated pids cgroup. Each
candidate's process then initialises CUDA and confines itself with Landlock (the system and Python
read-only; its directory, the temporary one and /dev writable), as an evaluation worker does, before the
program is loaded (`_check_child._confine`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

from cuda_agent_mcp.errors import IsolationUnavailable
from cuda_agent_mcp.executors import LocalExecutor, ProcessLimits, ProcessResult, reduced_isolation_allowed
from cuda_agent_mcp.isolation import judge_user
from cuda_agent_mcp.isolation.cgroup import delegate, remove_tree
from cuda_agent_mcp.isolation.uids import allocate_session_uid, lend_tree, release_session_uid

_JUDGE_VIEW = Path(judge_user.__file__).with_name("judge_view.py")
_TMP_BYTES = 4 * 1024**3
_MAX_PIDS = 1024  # a chunk's processes and threads: inductor and Triton start a few each


class GpuCheckExecutor:
    """An `Executor` for the checking child on a GPU machine (see the module docstring)."""

    name = "gpu-check"

    def __init__(self) -> None:
        self.uid = allocate_session_uid()
        if self.uid is None or judge_user.namespaces_problem() is not None:
            why = "not root" if self.uid is None else judge_user.namespaces_problem()
            if not reduced_isolation_allowed():
                raise IsolationUnavailable(
                    f"composed programs cannot run isolated on the GPU here ({why})",
                    "run as root where mount and network namespaces can be made; for single-user local use "
                    "only, CUDA_AGENT_ALLOW_REDUCED_ISOLATION=1 runs them as you (each still under Landlock)",
                )
            self.uid = None

    def __del__(self) -> None:
        if getattr(self, "uid", None) is not None:
            release_session_uid(self.uid)  # type: ignore[arg-type]

    @property
    def isolation(self) -> tuple[str, ...]:
        if self.uid is None:
            return ("reduced-isolation", "landlock:by-the-command", "rlimits")
        return ("network", "mount", "user", "pids-cgroup", "landlock:by-the-command", "rlimits")

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        limits: ProcessLimits,
        env: Mapping[str, str] | None = None,
        readable: Sequence[Path] = (),
        **_: object,
    ) -> ProcessResult:
        if self.uid is None:
            return await LocalExecutor().run(argv, cwd=cwd, limits=limits, env=env)
        uid = self.uid
        await anyio.to_thread.run_sync(lend_tree, cwd, uid)
        cgroup = delegate(f"synth-{uuid.uuid4().hex[:12]}", uid)
        if cgroup is not None:
            with contextlib.suppress(OSError):  # ours, not the uid's: it cannot raise its own limit
                (cgroup / "pids.max").write_text(str(_MAX_PIDS))
        spec = {
            "uid": uid,
            "gid": uid,
            "reachable": sorted({os.path.abspath(p) for p in [*map(str, readable), str(cwd)]}, key=len),
            "tmp_bytes": _TMP_BYTES,
            "cgroup": str(cgroup) if cgroup else None,
            "argv": [str(a) for a in argv],
        }
        command = [sys.executable, "-I", "-S", str(_JUDGE_VIEW), json.dumps(spec)]
        try:
            result = await LocalExecutor().run(command, cwd=cwd, limits=limits, env=env)
        finally:
            if cgroup is not None:
                await anyio.to_thread.run_sync(remove_tree, cgroup)  # nothing it started outlives it
        return result.model_copy(update={"argv": [str(a) for a in argv]})
