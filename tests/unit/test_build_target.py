"""The GPU target of a build: arch-specific on Hopper and later (sm_90a, so wgmma compiles), named to
nvcc by -gencode, and $CUDA_AGENT_ARCH taken as given."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_mcp.build.flags import (
    ARCH_ENV,
    DEFAULT_ARCH,
    BuildFlags,
    arch_specific,
    detect_arch,
    nvcc_command,
    target_option,
)
from cuda_agent_mcp.build.toolchain import Toolchain


def _toolchain() -> Toolchain:
    return Toolchain(
        nvcc=Path("/opt/cuda/bin/nvcc"), cxx="g++", cuda_home=Path("/opt/cuda"), nvcc_version="13.0",
        cxx_version="g++ 13", torch_dir=Path("/opt/torch"), torch_version="2.14", torch_cuda_version="13.0",
        cxx_standard="c++17", system_include_dirs=(), cuda_include_dirs=(), library_dirs=(), libraries=(),
    )  # fmt: skip


def test_without_a_gpu_the_default_target_is_hopper_s_arch_specific_one() -> None:
    assert DEFAULT_ARCH == "sm_90a"
    assert BuildFlags().arch == "sm_90a"


def test_an_arch_specific_target_is_passed_to_nvcc_by_gencode_and_a_plain_one_by_arch() -> None:
    # nvcc 13.0's -arch=sm_90a shorthand also runs a compute_90 pass that rejects wgmma.
    assert target_option("sm_90a") == "-gencode=arch=compute_90a,code=sm_90a"
    assert target_option("sm_100f") == "-gencode=arch=compute_100f,code=sm_100f"
    assert target_option("sm_90") == "-arch=sm_90"
    assert target_option("sm_89") == "-arch=sm_89"
    command = nvcc_command(_toolchain(), BuildFlags(), "k.cu", "k.o", ["."])
    assert "-gencode=arch=compute_90a,code=sm_90a" in command
    assert not any(part.startswith("-arch") for part in command)


@pytest.mark.parametrize(
    ("plain", "target"),
    [("sm_90", "sm_90a"), ("sm_100", "sm_100a"), ("sm_120", "sm_120a"), ("sm_89", "sm_89"),
     ("sm_80", "sm_80"), ("sm_90a", "sm_90a")],
)  # fmt: skip
def test_a_gpu_from_hopper_on_gets_its_arch_specific_target(plain: str, target: str) -> None:
    assert arch_specific(plain) == target


def _fake_smi(directory: Path, compute_cap: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    smi = directory / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho {compute_cap}\n")
    smi.chmod(0o755)


def test_the_visible_gpu_decides_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ARCH_ENV, raising=False)
    for name, cap, target in (("hopper", "9.0", "sm_90a"), ("ada", "8.9", "sm_89")):
        _fake_smi(tmp_path / name, cap)
        monkeypatch.setenv("PATH", str(tmp_path / name))
        assert detect_arch(tmp_path / f"facts-{name}") == target
        assert detect_arch(tmp_path / f"facts-{name}") == target  # and again from the remembered fact


def test_a_fact_remembered_before_the_arch_specific_default_still_gives_sm_90a(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ARCH_ENV, raising=False)
    _fake_smi(tmp_path / "bin", "9.0")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    facts = tmp_path / "facts"
    detect_arch(facts)
    stored = (facts / "machine-facts.json").read_text()
    assert '"sm_90"' in stored  # the plain target is what is remembered...
    assert detect_arch(facts) == "sm_90a"  # ...and the variant is applied on every read


def test_cuda_agent_arch_is_taken_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_smi(tmp_path / "bin", "9.0")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv(ARCH_ENV, "sm_90")
    assert detect_arch(tmp_path / "facts") == "sm_90"


def test_no_gpu_and_no_setting_gives_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ARCH_ENV, raising=False)
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert detect_arch(tmp_path / "facts") == "sm_90a"
