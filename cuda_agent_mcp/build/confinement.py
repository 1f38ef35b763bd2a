"""What a compile or link may see: the staging directory (read-write) and the toolchain (read-only).

Principle 7 of the evaluator: the build sees only the workspace and the toolchain. Every compiler and
linker command goes through `confine.py` (Landlock, applied in the compiler's own process, so it holds
whichever executor runs the command: local, sandbox or Docker). The executor's own view (bubblewrap, a
container) is a second layer where the session has one. Without Landlock the build falls back to a
bubblewrap view; with neither it is refused (`ExecutorUnavailable`) unless
$CUDA_AGENT_ALLOW_REDUCED_ISOLATION=1, and `BuildResult.confinement` always says what applied.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent_mcp.build.toolchain import Toolchain
from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.executors import DockerExecutor, Executor, SandboxedExecutor
from cuda_agent_mcp.executors.sandboxed import view_backend
from cuda_agent_mcp.isolation import landlock as landlock_primitive
from cuda_agent_mcp.results import BuildConfinement

REDUCED_ISOLATION_ENV = "CUDA_AGENT_ALLOW_REDUCED_ISOLATION"
CONFINE_SCRIPT = Path(__file__).resolve().with_name("confine.py")
LANDLOCK_PRIMITIVE = Path(__file__).resolve().parent.parent / "isolation" / "landlock.py"
TEMP_DIR = ".tmp"  # nvcc's and gcc's temporary files, inside the staging directory

# The host compiler's part of the machine: its programs, headers and libraries, and the dynamic loader's
# configuration. Not /etc (beyond that), /proc, /sys, /home, /root, /tmp, /dev/shm or /usr/share.
SYSTEM_READABLE = (
    "/usr/bin", "/usr/include", "/usr/local/include", "/usr/lib", "/usr/lib32", "/usr/lib64",
    "/usr/libx32", "/usr/libexec", "/bin", "/lib", "/lib32", "/lib64", "/libx32",
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
)  # fmt: skip
SYSTEM_WRITABLE = ("/dev/null",)


def reduced_isolation_allowed() -> bool:
    return os.environ.get(REDUCED_ISOLATION_ENV, "") == "1"


@dataclass(frozen=True)
class BuildView:
    """How this builder's commands are confined, and through which executor they run."""

    layers: tuple[BuildConfinement, ...]
    executor: Executor
    landlock: bool
    python: str = field(default_factory=lambda: sys.executable)

    @property
    def confined(self) -> bool:
        return self.layers != ("none",)

    def command(self, argv: Sequence[str], *, staging: Path, readable: Sequence[Path]) -> list[str]:
        """`argv` as the executor runs it: through the Landlock wrapper, when this view has one."""
        if not self.landlock:
            return [str(a) for a in argv]
        wrapper = [self.python, "-I", "-S", str(CONFINE_SCRIPT)]
        for path in (*SYSTEM_READABLE, *readable):
            wrapper += ["--read", str(path)]
        for path in (*SYSTEM_WRITABLE, staging):
            wrapper += ["--write", str(path)]
        return [*wrapper, "--", *map(str, argv)]

    def executor_readable(self, readable: Sequence[Path]) -> list[Path]:
        """What the executor's own view (bubblewrap, a container) must show: the toolchain, and the
        wrapper with the interpreter that runs it."""
        if not self.landlock:
            return list(readable)
        return [*readable, CONFINE_SCRIPT, LANDLOCK_PRIMITIVE, Path(sys.prefix), Path(sys.base_prefix)]


def toolchain_readable(toolchain: Toolchain) -> list[Path]:
    """The toolchain's paths plus the host compiler's installation where it is not a system one."""
    paths = list(toolchain.readable_paths)
    found = shutil.which(toolchain.cxx)
    if found is not None:
        prefix = Path(found).resolve().parent.parent
        if not any(prefix.is_relative_to(root) for root in map(Path, SYSTEM_READABLE)) and prefix != Path(
            "/"
        ):
            paths.append(prefix)
    return paths


def build_environment(toolchain: Toolchain, staging: Path) -> dict[str, str]:
    """The compilers' whole environment (an allowlist): the toolchain's directories on PATH, the C
    locale (so messages parse), HOME and TMPDIR inside the staging directory."""
    directories = [toolchain.nvcc.parent]
    if (found := shutil.which(toolchain.cxx)) is not None:
        directories.append(Path(found).parent)
    directories += [Path("/usr/bin"), Path("/bin")]
    path = os.pathsep.join(dict.fromkeys(str(d) for d in directories))
    return {"PATH": path, "LC_ALL": "C", "LANG": "C", "HOME": str(staging), "TMPDIR": str(staging / TEMP_DIR)}


def plan_view(
    executor: Executor,
    *,
    landlock: int | None = None,
    bubblewrap: bool | None = None,
    reduced_ok: bool | None = None,
) -> BuildView:
    """The strongest view this machine offers for builds through `executor`. The keyword arguments
    override the probes (for tests of the fallbacks); ExecutorUnavailable when there is none."""
    abi = landlock_primitive.abi_version() if landlock is None else landlock
    outer: tuple[BuildConfinement, ...] = ()
    if isinstance(executor, DockerExecutor):
        outer = ("container",)
    elif isinstance(executor, SandboxedExecutor) and executor.backend in ("namespaces", "bwrap"):
        outer = ("namespaces",) if executor.backend == "namespaces" else ("bubblewrap",)
    if abi >= 1:
        return BuildView(layers=("landlock", *outer), executor=executor, landlock=True)
    if outer:
        return BuildView(layers=outer, executor=executor, landlock=False)
    if view_backend() in ("namespaces", "bwrap") if bubblewrap is None else bubblewrap:
        sandbox = SandboxedExecutor()
        layer: BuildConfinement = "namespaces" if sandbox.backend == "namespaces" else "bubblewrap"
        return BuildView(layers=(layer,), executor=sandbox, landlock=False)
    if reduced_isolation_allowed() if reduced_ok is None else reduced_ok:
        return BuildView(layers=("none",), executor=executor, landlock=False)
    raise ExecutorUnavailable(
        "the build's confinement",
        "this machine offers neither Landlock (Linux 5.13+) nor bubblewrap, so compilers could read any "
        f"file; install bubblewrap, or set {REDUCED_ISOLATION_ENV}=1 to build without a view",
    )
