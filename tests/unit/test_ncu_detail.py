"""The ncu detail pass: parsing Nsight Compute's raw CSV (a real capture from the H200) and its refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_mcp.tools import ProfileRequest
from cuda_agent_mcp.tools.ncu import ncu_command, parse_ncu_csv

# `ncu --csv --page raw --print-units base --clock-control none --metrics ...` around a PyTorch program
# that fills a tensor with randn and applies relu, on the H200 (ncu 2025.3.1): ==PROF== and warning lines,
# a header, a units row, two kernels.
CAPTURE = Path(__file__).parents[1] / "fixtures" / "ncu" / "torch_relu_h200_raw.csv"


def test_the_raw_page_becomes_one_record_per_launch_in_microseconds() -> None:
    # Matched on the function name: the build's spelling (return type, parameter list) differs from ncu's.
    ours = {"vectorized_elementwise_kernel<4, unnamed>::launch_clamp_scalar(int, float const*)"}
    kernels = parse_ncu_csv(CAPTURE.read_text(), workspace_kernels=ours)
    assert len(kernels) == 2
    randn, relu = kernels
    assert "distribution_elementwise_grid_stride_kernel" in randn.name
    assert randn.duration_us == 42.176  # "42,176" ns
    assert relu.duration_us == 31.136 and relu.dram_throughput_pct == 73.39
    assert relu.grid == "(16384, 1, 1)" and isinstance(relu.registers_per_thread, int)
    assert relu.from_workspace and not randn.from_workspace
    # A metric that was not asked for stays unknown rather than invented.
    assert relu.memory_throughput_pct is None


def test_output_without_a_table_gives_no_kernels() -> None:
    assert parse_ncu_csv("==ERROR== Failed to initialize the profiler: LibraryNotLoaded\n", set()) == []
    assert parse_ncu_csv("", set()) == []


def test_the_command_leaves_the_clocks_alone_and_profiles_only_the_marked_call(tmp_path: Path) -> None:
    argv = ncu_command(Path("/usr/local/cuda/bin/ncu"), "python3", tmp_path / "ref", tmp_path / "cand", 7)
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert argv[argv.index("--profile-from-start") + 1] == "off"
    assert argv[-4:] == [str(tmp_path / "ncu_target.py"), str(tmp_path / "ref"), str(tmp_path / "cand"), "7"]


def test_the_detail_level_is_part_of_the_profile_request() -> None:
    assert ProfileRequest().detail == "summary"
    with pytest.raises(ValueError):
        ProfileRequest(detail="nsys")  # type: ignore[arg-type]
