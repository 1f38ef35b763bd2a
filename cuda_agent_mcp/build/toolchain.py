"""Find nvcc, the host C++ compiler, the CUDA toolkit and torch's headers and libraries, without importing torch.

Importing torch costs seconds; the build only needs its paths and version, which are read from disk.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sysconfig
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from cuda_agent_mcp.build.facts import file_identity, remembered
from cuda_agent_mcp.errors import ToolchainMissing

TORCH_LIBRARIES = ("c10", "c10_cuda", "torch", "torch_cpu", "torch_cuda", "torch_python")


@dataclass(frozen=True)
class Toolchain:
    """Everything outside the workspace that determines what the compilers produce."""

    nvcc: Path
    cxx: str
    cuda_home: Path
    nvcc_version: str
    cxx_version: str
    torch_dir: Path
    torch_version: str
    torch_cuda_version: str
    cxx_standard: str
    system_include_dirs: tuple[Path, ...]
    cuda_include_dirs: tuple[Path, ...]
    library_dirs: tuple[Path, ...]
    libraries: tuple[str, ...]

    @property
    def fingerprint(self) -> str:
        """Changes whenever a compiler, torch or Python changes; part of every cache key."""
        parts = {
            "nvcc": self.nvcc_version,
            "cxx": self.cxx_version,
            "torch": self.torch_version,
            "torch_cuda": self.torch_cuda_version,
            "torch_dir": str(self.torch_dir),
            "python": sysconfig.get_config_var("SOABI"),
            "std": self.cxx_standard,
        }
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    @property
    def readable_paths(self) -> tuple[Path, ...]:
        """What a compile or link reads besides its own directory (the host compiler excepted, which a
        container image carries itself): a filesystem view shows the command these and nothing more."""
        return (
            self.nvcc,
            self.cuda_home,
            self.torch_dir,
            *self.system_include_dirs,
            *self.cuda_include_dirs,
            *self.library_dirs,
        )

    def describe(self) -> str:
        return f"nvcc {self.nvcc_version}, {self.cxx_version}, torch {self.torch_version} (CUDA {self.torch_cuda_version})"


@cache
def discover_toolchain(facts_dir: Path | None = None) -> Toolchain:
    """The toolchain of this machine (cached per process, compiler versions also in `facts_dir`);
    ToolchainMissing says what to install."""
    nvcc, cuda_home = _find_nvcc()
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise ToolchainMissing("a C++ compiler", "install g++ (Debian: apt-get install g++) or set CXX")
    torch_dir = _find_torch()
    torch_version = importlib.metadata.version("torch")
    torch_cuda = _torch_cuda_version(torch_dir)
    if torch_cuda is None or not (torch_dir / "lib" / "libc10_cuda.so").exists():
        raise ToolchainMissing(
            f"a CUDA build of torch (torch {torch_version} at {torch_dir} is CPU-only)",
            "install a CUDA build of torch, e.g. pip install torch",
        )
    nvidia_includes = sorted((torch_dir.parent / "nvidia").glob("*/include"))
    return Toolchain(
        nvcc=nvcc,
        cxx=cxx,
        cuda_home=cuda_home,
        nvcc_version=remembered(
            facts_dir,
            "nvcc_version",
            file_identity(nvcc),
            lambda: _version_line([str(nvcc), "--version"], r"release [\d.]+, V[\d.]+"),
        ),
        cxx_version=remembered(
            facts_dir,
            "cxx_version",
            file_identity(shutil.which(cxx) or cxx),
            lambda: _version_line([cxx, "--version"], r".+"),
        ),
        torch_dir=torch_dir,
        torch_version=torch_version,
        torch_cuda_version=torch_cuda,
        cxx_standard=_torch_cxx_standard(torch_dir),
        system_include_dirs=(
            torch_dir / "include",
            torch_dir / "include" / "torch" / "csrc" / "api" / "include",
            Path(sysconfig.get_paths()["include"]),
        ),
        cuda_include_dirs=(cuda_home / "include", *nvidia_includes),
        library_dirs=(torch_dir / "lib", _cuda_lib_dir(cuda_home)),
        libraries=(*(n for n in TORCH_LIBRARIES if (torch_dir / "lib" / f"lib{n}.so").exists()), "cudart"),
    )


def _find_nvcc() -> tuple[Path, Path]:
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for home in filter(None, candidates):
        nvcc = Path(home) / "bin" / "nvcc"
        if nvcc.is_file():
            return nvcc, Path(home)
    found = shutil.which("nvcc")
    if found:
        # /usr/local/bin/nvcc may be a wrapper script; the toolkit is wherever the real binary lives.
        real = Path(found).resolve()
        return real, real.parent.parent
    raise ToolchainMissing("nvcc", "install the CUDA toolkit and put nvcc on PATH, or set CUDA_HOME")


def _cuda_lib_dir(cuda_home: Path) -> Path:
    for candidate in (cuda_home / "lib64", cuda_home / "targets" / "x86_64-linux" / "lib", cuda_home / "lib"):
        if (candidate / "libcudart.so").exists():
            return candidate
    raise ToolchainMissing("libcudart.so", f"no CUDA runtime library under {cuda_home}")


def _find_torch() -> Path:
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ToolchainMissing("torch", "pip install torch")
    return Path(next(iter(spec.submodule_search_locations)))


def _torch_cuda_version(torch_dir: Path) -> str | None:
    text = (torch_dir / "version.py").read_text()
    match = re.search(r"^cuda(?:: [^=]+)? = '([\d.]+)'", text, re.MULTILINE)
    return match.group(1) if match else None


def _torch_cxx_standard(torch_dir: Path) -> str:
    """The C++ standard torch's own extension builder uses: C++17 up to torch 2.12, C++20 after.

    Read from torch's cpp_extension.py (the standard it passes most often, since a stray mention in
    a docstring or a Windows branch must not decide) rather than from a version table, so a new
    torch is handled by itself.
    """
    source = (torch_dir / "utils" / "cpp_extension.py").read_text()
    counts = Counter(int(n) for n in re.findall(r"-std=c\+\+(\d\d)", source))
    if not counts:
        return "c++17"
    most = max(counts.values())
    return f"c++{max(n for n, c in counts.items() if c == most)}"


def _version_line(argv: list[str], pattern: str) -> str:
    try:
        out = subprocess.run(
            argv, capture_output=True, text=True, timeout=30, env={**os.environ, "LC_ALL": "C"}
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolchainMissing(argv[0], f"cannot run it: {exc}") from exc
    for line in out.splitlines():
        if match := re.search(pattern, line):
            return match.group(0).strip()
    return out.strip().splitlines()[0] if out.strip() else "unknown"
