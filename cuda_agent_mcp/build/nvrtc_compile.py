"""Compile one CUDA source to a cubin with NVRTC, in the build's view (a CuPy workspace's compiler).

    python -I -S .../cuda_agent_mcp/build/nvrtc_compile.py --nvrtc LIBNVRTC --out OUT.cubin SOURCE -- OPTIONS
    python -I -S .../cuda_agent_mcp/build/nvrtc_compile.py --nvrtc LIBNVRTC --wait SECONDS -- OPTIONS

The second form is a compile started ahead (build/warm_compile.py): it loads the library, writes
`READY_FILE` and waits in its (empty) staging until the builder has filled it and written `GO_FILE`,
which names the source; the cubin goes beside it (`SOURCE.o`). It gives up after SECONDS, or as soon as
the process that started it is gone.

NVRTC is a library, not a program, so this script is the "compiler" the build confines (`confine.py`
execs it like nvcc): it loads libnvrtc (its builtins first, which it finds beside it), compiles the
source under the name the workspace knows it by (so messages read `kernels/relu.cu(3): error: ...`),
prints NVRTC's log (with `--ptxas-options=-v`, ptxas's resource lines too) and writes the cubin. Exit
status 0 on success, 1 when the source does not compile, 2 on a usage or loading problem.

Standard library only and run as a script, like `confine.py`: importing the package would cost about
0.3 s on every compile, and the point of this language is a compile well under that.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import time

GO_FILE = ".go"  # the builder's word that staging is filled: it holds the source's path in staging
READY_FILE = ".ready"  # this process's: the library is loaded


def _load(library: str) -> ctypes.CDLL:
    # libnvrtc loads its builtins library by name at compile time; loaded first, globally, it is found
    # without LD_LIBRARY_PATH (which the build's environment never carries).
    for builtins in sorted(glob.glob(os.path.join(os.path.dirname(library), "libnvrtc-builtins.so*"))):
        if ".alt." not in builtins:
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
            break
    return ctypes.CDLL(library)


def _text(nvrtc: ctypes.CDLL, program: ctypes.c_void_p) -> str:
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(program, log)
    return log.value.decode("utf-8", "replace")


def compile_source(nvrtc: ctypes.CDLL, source: str, output: str, options: list[str]) -> int:
    with open(source, "rb") as handle:
        code = handle.read()
    name = source.removeprefix("./").encode()
    program = ctypes.c_void_p()
    status = nvrtc.nvrtcCreateProgram(ctypes.byref(program), code, name, 0, None, None)
    if status != 0:
        print(f"nvrtc: cannot create a program for {source} (status {status})", file=sys.stderr)
        return 2
    encoded = [o.encode() for o in options]
    status = nvrtc.nvrtcCompileProgram(program, len(encoded), (ctypes.c_char_p * len(encoded))(*encoded))
    sys.stdout.write(_text(nvrtc, program))
    if status != 0:
        return 1
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetCUBINSize(program, ctypes.byref(size))
    cubin = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetCUBIN(program, cubin)
    with open(output, "wb") as handle:
        handle.write(cubin.raw)
    return 0


def _source_named_by_go(seconds: float) -> str | None:
    """Wait for GO_FILE; the source it names ("./" + a relative path inside staging), or None."""
    parent, deadline = os.getppid(), time.monotonic() + seconds
    while time.monotonic() < deadline and os.getppid() == parent:
        if os.path.exists(GO_FILE):
            with open(GO_FILE, encoding="utf-8") as handle:
                name = handle.read().strip()
            parts = name.split("/")
            if not name or name.startswith("/") or ".." in parts or not os.path.isfile(name):
                print(f"nvrtc: {GO_FILE} names no source in staging: {name!r}", file=sys.stderr)
                return None
            return "./" + name
        time.sleep(0.002)
    return None


def main(arguments: list[str]) -> int:
    try:
        split = arguments.index("--")
        head, options = arguments[:split], arguments[split + 1 :]
        library = head[head.index("--nvrtc") + 1]
        wait_s = float(head[head.index("--wait") + 1]) if "--wait" in head else None
        output = source = ""
        if wait_s is None:
            output, source = head[head.index("--out") + 1], head[-1]
    except (ValueError, IndexError):
        print(
            "nvrtc: usage: nvrtc_compile.py --nvrtc LIB (--out OUT SOURCE | --wait SECONDS) -- OPTIONS",
            file=sys.stderr,
        )
        return 2
    try:
        nvrtc = _load(library)
        if wait_s is not None:
            open(READY_FILE, "w").close()
            named = _source_named_by_go(wait_s)
            if named is None:
                return 2
            source, output = named, named + ".o"
        return compile_source(nvrtc, source, output, options)
    except OSError as exc:
        print(f"nvrtc: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
