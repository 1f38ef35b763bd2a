"""The CuPy language's build: each kernels/*.cu to a cubin with NVRTC, then the `cuda_extension` module.

NVRTC needs no host compiler, no link step and no GPU: the library ships with the CUDA toolkit and in
torch's CUDA wheels (`nvidia/cu13/lib`), and makes an sm_90a cubin on a machine without a GPU. Each
compile runs `nvrtc_compile.py` in the same confined view as nvcc (`confinement.py`), so the build
sees only staging and the toolchain. The "link" writes one Python module, the pristine
`pristine/cupy/cuda_extension.py` with the cubins and kernel names filled in, stored content-addressed
and read-only like an extension: what the evaluation loads is exactly what this build made.
"""

from __future__ import annotations

import base64
import re
import sys
from pathlib import Path

from cuda_agent_mcp.build.cubin import parameter_sizes
from cuda_agent_mcp.build.flags import BuildFlags
from cuda_agent_mcp.build.toolchain import Toolchain
from cuda_agent_mcp.errors import ToolchainMissing
from cuda_agent_mcp.results import Diagnostic, KernelResources
from cuda_agent_mcp.workspace.harness import harness_text

COMPILE_SCRIPT = Path(__file__).resolve().with_name("nvrtc_compile.py")
MODULE_TEMPLATE = "cupy/cuda_extension.py"
_CUBINS_LINE = "_CUBINS: dict[str, str] = {}  # BUILD: workspace file -> base64 cubin"
_KERNELS_LINE = "_KERNELS: dict[str, str] = {}  # BUILD: kernel name -> workspace file"
_PARAMS_LINE = "_PARAMS: dict[str, list[int]] = {}  # BUILD: kernel name -> parameter sizes in bytes"
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_HOST_RUNTIME_INCLUDE = re.compile(r'\s*#\s*include\s*[<"]((?:cuda_runtime|cuda_runtime_api|cuda)\.h)[>"]')


def find_nvrtc(toolchain: Toolchain) -> Path:
    """libnvrtc of the toolkit nvcc belongs to, else the one torch's CUDA wheels ship."""
    candidates = [
        *sorted(toolchain.cuda_home.glob("lib64/libnvrtc.so*")),
        *sorted(toolchain.cuda_home.glob("targets/*/lib/libnvrtc.so*")),
        *sorted((toolchain.torch_dir.parent / "nvidia").glob("*/lib/libnvrtc.so*")),
    ]
    for path in candidates:
        if ".alt." not in path.name and path.is_file():
            return path
    raise ToolchainMissing(
        "NVRTC (libnvrtc.so)", "install the CUDA toolkit's NVRTC, or a CUDA build of torch (which ships it)"
    )


def nvrtc_command(
    toolchain: Toolchain,
    flags: BuildFlags,
    library: Path,
    *,
    source: str = "",
    output: str = "",
    wait_s: float | None = None,
) -> list[str]:
    """The compile of one unit (`source` to `output`), or a compile started ahead that waits up to
    `wait_s` for the builder to name its source (build/warm_compile.py): the script, under the
    interpreter that runs the build, with fixed options."""
    options = [
        f"--gpu-architecture={flags.arch}",
        "--std=c++17",
        "-lineinfo",
        "--ptxas-options=-v",  # its resource lines name every kernel the cubin holds
        "-I.",
        "-I./kernels",
        *(f"-I{d}" for d in toolchain.cuda_include_dirs if d.is_dir()),
        *(["--use_fast_math"] if flags.use_fast_math else []),
    ]
    script = [sys.executable, "-I", "-S", str(COMPILE_SCRIPT), "--nvrtc", str(library)]
    unit = ["--wait", str(wait_s)] if wait_s is not None else ["--out", output, source]
    return [*script, *unit, "--", *options]


def readable_paths(library: Path) -> list[Path]:
    """What an NVRTC compile reads besides staging: the library's folder, the script, the interpreter."""
    return [library.parent, COMPILE_SCRIPT, Path(sys.prefix), Path(sys.base_prefix)]


def host_runtime_includes(staging: Path, files: list[str]) -> list[Diagnostic]:
    """Includes of the CUDA host runtime in a CuPy workspace: its kernels are device code, launched by
    cuda_extension, so `cuda_runtime.h` or `cuda.h` could only be there for host calls (refused by name,
    though NVRTC 13 would compile the declarations)."""
    refused = []
    for file in files:
        text = (staging / file).read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if match := _HOST_RUNTIME_INCLUDE.match(line):
                refused.append(
                    Diagnostic(
                        file=file,
                        line=number,
                        severity="error",
                        message=f"<{match.group(1)}> is the CUDA host runtime: a CuPy workspace has device "
                        "code only (launches are cuda_extension's); remove the include",
                        tool="nvcc",
                    )
                )
    return refused


def bad_kernel_names(kernels: list[KernelResources], file: str) -> list[Diagnostic]:
    """Kernels a model cannot launch by name: `cuda_extension.<name>` needs a plain identifier that does
    not start with an underscore (the audit refuses private attributes), so C++-mangled kernels are
    reported with the fix."""
    return [
        Diagnostic(
            file=file,
            severity="warning",
            message=f"kernel {k.name} has the C++ name {k.mangled_name}, which cuda_extension cannot "
            'expose: declare it extern "C" __global__ to launch it as cuda_extension.<name>',
            tool="nvcc",
        )
        for k in kernels
        if not _IDENTIFIER.fullmatch(k.mangled_name)
    ]


def module_text(cubins: dict[str, bytes], kernels: dict[str, str]) -> str:
    """The generated `cuda_extension` module: the pristine text with the build's data filled in."""
    template = harness_text(MODULE_TEMPLATE)
    encoded = {file: base64.b64encode(data).decode() for file, data in sorted(cubins.items())}
    sizes = {name: parameter_sizes(cubins[file]).get(name, []) for name, file in sorted(kernels.items())}
    return (
        template.replace(_CUBINS_LINE, f"_CUBINS: dict[str, str] = {encoded!r}")
        .replace(_KERNELS_LINE, f"_KERNELS: dict[str, str] = {dict(sorted(kernels.items()))!r}")
        .replace(_PARAMS_LINE, f"_PARAMS: dict[str, list[int]] = {sizes!r}")
    )


def launchable(kernels: list[KernelResources]) -> dict[str, str]:
    """Kernel name -> file, for the kernels the module exposes (plain extern "C" names)."""
    return {k.mangled_name: k.file for k in kernels if _IDENTIFIER.fullmatch(k.mangled_name)}
