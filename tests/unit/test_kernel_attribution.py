"""Which traced kernels came from the workspace, and when the others did the work."""

from __future__ import annotations

import pytest

from cuda_agent_mcp.evaluation.kernel_names import kernel_key, library_lookalike
from cuda_agent_mcp.judge.kernels import MIN_WORKSPACE_SHARE, breakdown, foreign_work
from cuda_agent_mcp.wire.protocol import TracedKernel


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("relu_kernel(float const*, float*, long)", "relu_kernel"),
        ("void relu_kernel<4>(const float *, float *, long)", "relu_kernel<4>"),
        ("void ns::fused<(int)2, float>(float*)", "ns::fused<(int)2, float>"),
        ("(anonymous namespace)::softmax_rows(float const*, float*, int)", "{anonymous}::softmax_rows"),
        ("  row_sum  ", "row_sum"),
    ],
)
def test_kernel_names_are_matched_on_the_function_name(name: str, key: str) -> None:
    assert kernel_key(name) == key


def test_ptxas_and_cupti_spellings_of_one_kernel_match() -> None:
    found = breakdown(
        [
            TracedKernel(
                name="void relu_kernel<4>(const float *, float *, long)", calls=3, device_ns=3_000_000
            )
        ],
        ["void relu_kernel<4>(float const*, float*, long)"],
    )
    assert found.kernels[0].origin == "workspace" and found.workspace_share == 1.0
    assert found.kernels[0].total_ms == 3.0 and found.kernels[0].calls == 3
    assert foreign_work(found) is None


def test_pytorch_kernels_doing_most_of_the_work_is_foreign_work_and_copies_do_not_count() -> None:
    traced = [
        TracedKernel(name="relu_kernel(float const*, float*, long)", calls=1, device_ns=1_000_000),
        TracedKernel(
            name="void at::native::vectorized_elementwise_kernel<4, at::native::clamp_min_scalar_kernel>(int, float*)",
            calls=1,
            device_ns=3_000_000,
        ),
        TracedKernel(name="Memcpy DtoD (Device -> Device)", calls=2, device_ns=50_000_000),
    ]
    found = breakdown(traced, ["relu_kernel(float const*, float*, long)"])
    assert [k.origin for k in found.kernels] == ["copy", "other", "workspace"]  # largest first
    assert found.workspace_share == pytest.approx(0.25)
    assert found.traced_ms == pytest.approx(54.0)
    reason = foreign_work(found)
    assert reason is not None and "25%" in reason and "clamp_min_scalar_kernel" in reason


def test_a_workspace_share_at_the_limit_passes() -> None:
    half = int(MIN_WORKSPACE_SHARE * 1000)
    found = breakdown(
        [
            TracedKernel(name="mine(float*)", calls=1, device_ns=half),
            TracedKernel(name="theirs(float*)", calls=1, device_ns=1000 - half),
        ],
        ["mine(float*)"],
    )
    assert foreign_work(found) is None


def test_an_empty_trace_is_noted_not_judged() -> None:
    found = breakdown([], ["relu_kernel(float const*, float*, long)"])
    assert found.workspace_share is None and found.note and foreign_work(found) is None


def test_library_kernels_count_as_the_candidates_only_where_the_task_allows_the_library() -> None:
    traced = [
        TracedKernel(
            name="sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_cublas", calls=1, device_ns=900
        ),
        TracedKernel(name="void at::native::elementwise_kernel<128, 4>(int, float)", calls=1, device_ns=100),
    ]
    allowed = breakdown(traced, [], ["cublas"])
    assert [k.origin for k in allowed.kernels] == ["library", "other"]
    assert allowed.workspace_share == pytest.approx(0.9) and foreign_work(allowed) is None
    refused = breakdown(traced, [], [])
    assert refused.workspace_share == 0.0 and foreign_work(refused) is not None


def test_a_cpp_kernel_never_passes_for_an_extern_c_kernel_of_the_same_bare_name() -> None:
    """ptxas, NVRTC, CUPTI and ncu print an extern "C" kernel bare and a C++ one with its parameters: a
    library's `void reduce_kernel(float*)` is not the workspace's extern "C" `reduce_kernel`."""
    traced = [
        TracedKernel(name="void reduce_kernel(float*, int)", calls=1, device_ns=900),
        TracedKernel(name="reduce_kernel", calls=1, device_ns=100),
    ]
    found = breakdown(traced, ["reduce_kernel"])
    assert [(k.name, k.origin) for k in found.kernels] == [
        ("void reduce_kernel(float*, int)", "other"),
        ("reduce_kernel", "workspace"),
    ]
    assert found.workspace_share == pytest.approx(0.1)


@pytest.mark.parametrize(
    "name",
    [
        "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "ampere_sgemm_128x64_nn",
        "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNN",
        "triton_poi_fused_relu_0",
        "void at::native::reduce_kernel<512, 1>(float*)",
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nn_align1>(int)",
    ],
)
def test_a_workspace_kernel_named_as_a_library_names_its_kernels_is_not_credited(name: str) -> None:
    """The library's kernel and the workspace's would carry the same name in the trace."""
    found = breakdown([TracedKernel(name=name, calls=1, device_ns=1000)], [name])
    assert found.kernels[0].origin == "other" and foreign_work(found) is not None


@pytest.mark.parametrize(
    "name", ["relu_kernel", "gemm_tiled(float const*, float*, int)", "sgemm_128x64", "{anonymous}::softmax"]
)
def test_ordinary_kernel_names_are_not_library_lookalikes(name: str) -> None:
    assert not library_lookalike(name)
