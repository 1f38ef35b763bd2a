"""The harness's fixed compiler flags: agents choose sources, never flags."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.build.facts import boot_identity, file_identity, remembered
from cuda_agent_mcp.build.toolchain import Toolchain
from cuda_agent_mcp.errors import UsageError
from cuda_agent_mcp.workspace.harness import EXTENSION_NAME

# Hopper, the paper's target, used when no GPU is visible (CPU build machines). Its arch-specific variant:
# wgmma and setmaxnreg exist only there (docs/DECISIONS.md, "Arch-specific GPU targets").
DEFAULT_ARCH = "sm_90a"
ARCH_ENV = "CUDA_AGENT_ARCH"
ARCH_PATTERN = r"^sm_\d+[af]?$"


def check_arch(value: str, source: str) -> str:
    """`value` if it names a GPU target; else a UsageError naming `source` (an option or a variable)."""
    if re.fullmatch(ARCH_PATTERN, value):
        return value
    raise UsageError(
        f"{source} {value!r} is not a GPU target: use sm_ and the compute capability, with a or f for "
        "the architecture-specific features, e.g. sm_80, sm_89, sm_90, sm_90a, sm_100a"
    )


class BuildFlags(BaseModel):
    """Per-build switches; everything else about the command lines is fixed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arch: str = Field(default=DEFAULT_ARCH, pattern=ARCH_PATTERN)
    use_fast_math: bool = True
    optimization: str = "-O3"
    vendor_libraries: tuple[str, ...] = Field(
        default=(), description="vendor libraries the extension links (cublas, cudnn), by task policy"
    )
    torch_headers: bool = Field(
        default=False,
        description=".cu units see torch's headers, with the nvcc flags torch's load_inline passes "
        "(imported KernelBench solutions only; see docs/DECISIONS.md)",
    )


# What torch.utils.cpp_extension passes nvcc for every extension (COMMON_NVCC_FLAGS): KernelBench sources
# are written against these.
TORCH_NVCC_FLAGS = (
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
)


def nvcc_command(
    tc: Toolchain, flags: BuildFlags, source: str, output: str, include_dirs: list[str]
) -> list[str]:
    """Compile one pure-CUDA translation unit (no torch headers on its include path)."""
    cmd = [
        str(tc.nvcc), "-c", source, "-o", output,
        flags.optimization, f"-std={tc.cxx_standard}", target_option(flags.arch),
        "-Xptxas", "-v", "-Xcompiler", "-fPIC,-fvisibility=hidden",
        # Line tables only (no change to the code): compute-sanitizer names file and line in its reports.
        "-lineinfo",
    ]  # fmt: skip
    if flags.use_fast_math:
        cmd.append("--use_fast_math")
    cmd += [f"-I{d}" for d in include_dirs]
    if flags.torch_headers:
        cmd += [
            *TORCH_NVCC_FLAGS,
            "-DTORCH_API_INCLUDE_EXTENSION_H",
            f"-DTORCH_EXTENSION_NAME={EXTENSION_NAME}",
        ]
        for directory in tc.system_include_dirs:
            cmd += ["-isystem", str(directory)]
    cmd += [f"-I{d}" for d in tc.cuda_include_dirs]
    return cmd


def target_option(arch: str) -> str:
    """nvcc's target for `arch`. An arch-specific target (sm_90a) is named by -gencode: nvcc 13.0's
    -arch=sm_90a shorthand also runs a plain compute_90 pass, which rejects wgmma (measured)."""
    if arch[-1] in "af":
        return f"-gencode=arch=compute_{arch.removeprefix('sm_')},code={arch}"
    return f"-arch={arch}"


def arch_specific(arch: str) -> str:
    """The arch-specific variant of a GPU's own target (sm_90 -> sm_90a) from compute capability 9.0
    on, where nvcc has one for every GPU: a build for the GPU it runs on may use all of that GPU's
    instructions (wgmma, setmaxnreg; tcgen05 on Blackwell), at the price of PTX that runs nowhere else."""
    match = re.fullmatch(r"sm_(\d+)", arch)
    return f"{arch}a" if match and int(match.group(1)) >= 90 else arch


def cxx_command(
    tc: Toolchain, flags: BuildFlags, source: str, output: str, include_dirs: list[str]
) -> list[str]:
    """Compile one C++ translation unit (bindings, cuBLAS/cuDNN host code) against torch's headers."""
    cmd = [
        tc.cxx, "-c", source, "-o", output,
        flags.optimization, f"-std={tc.cxx_standard}", "-fPIC", "-fvisibility=hidden",
        "-DTORCH_API_INCLUDE_EXTENSION_H", f"-DTORCH_EXTENSION_NAME={EXTENSION_NAME}",
    ]  # fmt: skip
    cmd += [f"-I{d}" for d in include_dirs]
    # -isystem: warnings from torch, Python and CUDA headers are theirs, not the agent's.
    for directory in (*tc.system_include_dirs, *tc.cuda_include_dirs):
        cmd += ["-isystem", str(directory)]
    return cmd


def link_command(
    tc: Toolchain, objects: list[str], output: str, vendor_libraries: tuple[str, ...] = ()
) -> list[str]:
    """Link objects into the extension; unresolved symbols are listed (as warnings) for us to check."""
    cmd = [tc.cxx, "-shared", *objects, "-o", output]
    cmd += [f"-L{d}" for d in tc.library_dirs]
    cmd += [f"-l{lib}" for lib in tc.libraries]
    for name, found in vendor_library_files(tc, vendor_libraries):
        if found is None:  # the linker then names the library it could not find
            cmd.append(f"-l{name}")
        else:
            cmd += [f"-L{found.parent}", f"-l:{found.name}", f"-Wl,-rpath,{found.parent}"]
    cmd += [f"-Wl,-rpath,{tc.torch_dir / 'lib'}", "-Wl,--no-undefined", "-Wl,--warn-unresolved-symbols"]
    return cmd


_VENDOR_SONAMES = {"cublas": ("cublas", "cublasLt"), "cudnn": ("cudnn",)}


def vendor_library_files(tc: Toolchain, libraries: tuple[str, ...]) -> list[tuple[str, Path | None]]:
    """Each library's link names (cublas: cublas and cublasLt) with the file the link will use."""
    return [
        (name, vendor_library_file(tc, name)) for library in libraries for name in _VENDOR_SONAMES[library]
    ]


def vendor_library_file(tc: Toolchain, name: str) -> Path | None:
    """`lib<name>.so[.N]`: torch's own copy first (the process then holds one), else the CUDA toolkit's."""
    directories = [*sorted((tc.torch_dir.parent / "nvidia").glob("*/lib")), *tc.library_dirs]
    soname = re.compile(rf"lib{re.escape(name)}\.so(?:\.\d+)?")  # libcublas.so or libcublas.so.13
    for directory in directories:
        found = sorted(p for p in directory.glob(f"lib{name}.so*") if soname.fullmatch(p.name))
        if found:
            return found[0]
    return None


def fingerprint(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def detect_arch(facts_dir: Path | None = None) -> str:
    """The build target: $CUDA_AGENT_ARCH as given, else the first visible GPU's (its arch-specific
    variant from Hopper on: sm_90a), else sm_90a."""
    if value := os.environ.get(ARCH_ENV):
        return check_arch(value, f"${ARCH_ENV}")
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return DEFAULT_ARCH
    # The plain target is what is remembered (facts stored before the variant existed stay valid).
    plain = remembered(
        facts_dir, "gpu_arch", f"{boot_identity()}:{file_identity(smi)}", lambda: _query_arch(smi)
    )
    return arch_specific(plain)


@cache
def _query_arch(smi: str) -> str:
    try:
        out = subprocess.run(
            [smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return DEFAULT_ARCH
    cap = out.strip().splitlines()[0].strip() if out.strip() else ""
    return "sm_" + cap.replace(".", "") if cap.replace(".", "").isdigit() else DEFAULT_ARCH
