"""Exec a compiler inside a Landlock view: read only the paths named, write only the staging directory.

    python -I -S .../cuda_agent_mcp/build/confine.py --read DIR ... --write STAGING -- nvcc -c ...

Runs in the compiler's own process, before the compiler: it applies the Landlock primitive of
`isolation/landlock.py` with exactly the paths given (no /etc, /proc or /sys unless named), keeps only the
allowlisted environment variables, then execs the command, so the compiler and everything it starts
(cudafe++, cicc, ptxas, cc1plus, as, ld) inherit the view; none of them can undo it. Where Landlock
cannot be applied it exits with EXIT_UNCONFINED and one `confine:` line, never running the command.

It is run as a script, not as `-m cuda_agent_mcp...`: importing the package costs about 0.3 s, paid on
every compile. So it imports only the standard library and loads the primitive from its file.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

EXIT_UNCONFINED = 125  # the view could not be made; the command did not run
EXIT_NOT_FOUND = 127
# The compiler's environment is this allowlist, whatever the executor passed: no CPATH, C_INCLUDE_PATH,
# CPLUS_INCLUDE_PATH, LIBRARY_PATH, NVCC_PREPEND_FLAGS, NVCC_APPEND_FLAGS, NVCC_CCBIN, GCC_EXEC_PREFIX,
# COMPILER_PATH, LD_PRELOAD, LD_LIBRARY_PATH, ... can reach it.
ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR")
PRIMITIVE = Path(__file__).resolve().parent.parent / "isolation" / "landlock.py"


def parse(arguments: list[str]) -> tuple[list[Path], list[Path], list[str]]:
    """`--read P` and `--write P` (repeated) up to `--`, then the command."""
    readable: list[Path] = []
    writable: list[Path] = []
    index = 0
    while index < len(arguments) and arguments[index] != "--":
        flag = arguments[index]
        if flag not in ("--read", "--write") or index + 1 >= len(arguments):
            raise ValueError(f"unexpected argument {flag!r}")
        (readable if flag == "--read" else writable).append(Path(arguments[index + 1]))
        index += 2
    command = arguments[index + 1 :]
    if not command:
        raise ValueError("no command after --")
    return readable, writable, command


def _primitive() -> types.ModuleType:
    """isolation/landlock.py, executed from its file (importlib.util alone would add ~10 ms per compile)."""
    module = types.ModuleType("_cuda_agent_landlock")
    module.__file__ = str(PRIMITIVE)
    exec(compile(PRIMITIVE.read_bytes(), str(PRIMITIVE), "exec"), module.__dict__)
    return module


def main(arguments: list[str]) -> int:
    try:
        readable, writable, command = parse(arguments)
    except ValueError as exc:
        print(f"confine: {exc}", file=sys.stderr)
        return 2
    try:
        applied = _primitive().confine(
            readable=readable, writable=writable, system_readable=(), system_writable=()
        )
    except OSError as exc:
        print(f"confine: Landlock failed: {exc}", file=sys.stderr)
        return EXIT_UNCONFINED
    if not applied:
        print("confine: this kernel offers no Landlock; the build cannot be confined", file=sys.stderr)
        return EXIT_UNCONFINED
    environment = {name: os.environ[name] for name in ENVIRONMENT if name in os.environ}
    try:
        os.execvpe(command[0], command, environment)
    except OSError as exc:
        print(f"confine: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
    return EXIT_NOT_FOUND


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
