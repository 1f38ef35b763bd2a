"""Compile every `kernels/*.cu` under the given folders with NVRTC, as the cupy language builds them.

A CPU-only check for the cupy suite (`workspaces/kernelbench_cupy`): each source is compiled to a cubin
for sm_90a with the language's flags (`--std=c++17 -lineinfo -I<kernels dir>`, and with
`--use_fast_math` too unless `--no-fast-math`), through NVRTC loaded by ctypes, so no GPU is needed.
Prints each file's errors and warnings; exits 1 if any file fails.

    python benchmarks/suites/check_nvrtc.py benchmarks/suites/workspaces/kernelbench_cupy
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from pathlib import Path

_DEFAULT_LIB_DIR = "/work/ci-clone4/.venv/lib/python3.11/site-packages/nvidia/cu13/lib"
_ARCH = "sm_90a"


def _load_nvrtc(lib_dir: Path) -> ctypes.CDLL:
    # The builtins library must be loaded globally first: libnvrtc finds it by soname.
    ctypes.CDLL(str(lib_dir / "libnvrtc-builtins.so.13.0"), mode=ctypes.RTLD_GLOBAL)
    nvrtc = ctypes.CDLL(str(lib_dir / "libnvrtc.so.13"))
    nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
    return nvrtc


def compile_source(nvrtc: ctypes.CDLL, path: Path, fast_math: bool) -> tuple[bool, str]:
    """(compiled, log) for one .cu file, to a cubin for sm_90a."""
    prog = ctypes.c_void_p()
    source = path.read_bytes()
    rc = nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source, path.name.encode(), 0, None, None)
    if rc != 0:
        return False, f"nvrtcCreateProgram: {nvrtc.nvrtcGetErrorString(rc).decode()}"
    options = [f"--gpu-architecture={_ARCH}", "--std=c++17", "-lineinfo", f"-I{path.parent}"]
    if fast_math:
        options.append("--use_fast_math")
    encoded = [o.encode() for o in options]
    array = (ctypes.c_char_p * len(encoded))(*encoded)
    try:
        rc = nvrtc.nvrtcCompileProgram(prog, len(encoded), array)
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        text = log.value.decode(errors="replace").strip()
        if rc == 0:
            cubin_size = ctypes.c_size_t()
            # A cubin (not only PTX) proves the real-architecture backend ran too.
            if nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(cubin_size)) != 0 or cubin_size.value == 0:
                return False, "no cubin produced"
        return rc == 0, text
    finally:
        nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", type=Path, help="folders searched for kernels/*.cu")
    parser.add_argument(
        "--lib-dir", type=Path, default=Path(os.environ.get("NVRTC_LIB_DIR", _DEFAULT_LIB_DIR))
    )
    parser.add_argument("--no-fast-math", action="store_true", help="compile only without --use_fast_math")
    args = parser.parse_args(argv)
    nvrtc = _load_nvrtc(args.lib_dir)
    sources = sorted({p for root in args.roots for p in root.rglob("kernels/*.cu")})
    if not sources:
        print("no kernels/*.cu found", file=sys.stderr)
        return 1
    failed = 0
    for path in sources:
        for fast_math in (False,) if args.no_fast_math else (False, True):
            ok, log = compile_source(nvrtc, path, fast_math)
            flags = " --use_fast_math" if fast_math else ""
            status = "ok" if ok and not log else ("ok (with messages)" if ok else "FAILED")
            print(f"{status}: {path}{flags}")
            if log:
                print("  " + log.replace("\n", "\n  "))
            failed += not ok
    print(f"{len(sources)} sources, {failed} failed compilations")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
