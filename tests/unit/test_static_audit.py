"""The static audit of model_new.py and kernel sources: what it flags, and that honest code is clean."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_mcp.evaluation.audit import audit_cpp, audit_model_new, audit_workspace
from cuda_agent_mcp.tasks.vendor import paper_vendor_libraries
from tests.conftest import EXAMPLES

HONEST = """
import torch
import torch.nn as nn
import cuda_extension

class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)  # holds the reference's weights
        self.bias = nn.Parameter(torch.empty(features))

    def forward(self, x):
        out = torch.empty(x.shape[0], self.bias.numel(), device=x.device, dtype=x.dtype)
        n = x.shape[0] * x.shape[1]
        return cuda_extension.fused(x.contiguous(), self.linear.weight, self.bias, out, n)
"""


@pytest.mark.parametrize("example", ["relu", "row_sum", "bias_add_relu"])
def test_the_bundled_examples_are_clean(example: str) -> None:
    assert audit_workspace(EXAMPLES / example) == []


def test_creation_shape_queries_and_held_layers_are_allowed() -> None:
    assert audit_model_new(HONEST, "model_new.py") == []


@pytest.mark.parametrize(
    ("change", "rule", "text"),
    [
        (
            ("return cuda_extension.fused(", "return torch.relu(x) + 0 * cuda_extension.fused("),
            "torch_compute",
            "torch.relu",
        ),
        (
            ("return cuda_extension.fused(", "return x.softmax(-1) + 0 * cuda_extension.fused("),
            "torch_compute",
            ".softmax()",
        ),
        (
            ("return cuda_extension.fused(", "return self.linear(x) + 0 * cuda_extension.fused("),
            "torch_compute",
            "self.linear",
        ),
        (("import cuda_extension", "import cuda_extension\nimport torch.nn.functional as F"), None, None),
        (
            ("return cuda_extension.fused(", "return F.gelu(x) + 0 * cuda_extension.fused("),
            "torch_compute",
            "F.gelu",
        ),
        (
            (
                "return cuda_extension.fused(",
                "return torch.compile(lambda t: t)(x) + 0 * cuda_extension.fused(",
            ),
            "torch_compute",
            "torch.compile",
        ),
        (
            ("class ModelNew(nn.Module):", "from model import Model\n\nclass ModelNew(Model):"),
            "imports_reference",
            "imports the reference",
        ),
        (
            (
                "        n = x.shape[0] * x.shape[1]\n",
                "        try:\n            n = x.shape[0]\n        except Exception:\n            n = 0\n",
            ),
            "fallback",
            "try/except",
        ),
    ],
)
def test_forbidden_constructs_are_flagged_with_their_line(
    change: tuple[str, str], rule: str | None, text: str | None
) -> None:
    source = HONEST.replace(*change)
    assert source != HONEST
    findings = audit_model_new(source, "model_new.py")
    if rule is None:
        assert findings == []
        return
    assert any(f.rule == rule and text in f.message and f.line for f in findings), findings


def test_torch_compute_in_cpp_is_flagged_but_allocation_is_not() -> None:
    source = (
        "// torch::relu(x) in a comment is fine\n"
        "auto out = torch::empty_like(x);\n"
        "auto o2 = torch::empty({n}, x.options().dtype(torch::kFloat32));\n"
        "auto y = torch::matmul(a, b);\n"
        "auto z = at::relu(y);\n"
    )
    findings = audit_cpp(source, "kernels/k_binding.cpp")
    assert [(f.line, f.rule) for f in findings] == [(4, "torch_compute"), (5, "torch_compute")]
    assert "torch::matmul" in findings[0].message


def test_the_workspace_audit_covers_kernels_and_ignores_the_harness(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "model_new.py").write_text(HONEST)
    (tmp_path / "binding.cpp").write_text("auto y = torch::relu(x);\n")
    (tmp_path / "kernels" / "k_binding.cpp").write_text("auto y = at::mm(a, b);\n")
    findings = audit_workspace(tmp_path)
    assert [(f.file, f.line) for f in findings] == [("kernels/k_binding.cpp", 1)]


def test_persisting_l2_controls_are_flagged() -> None:
    """Catalog entry 34: an access-policy window keeps operands in L2 through the timer's flush."""
    source = (
        "cudaStreamAttrValue attr = {};\n"
        "attr.accessPolicyWindow.base_ptr = (void*)w;\n"
        "attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;\n"
        "cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 20);\n"
        "// a comment naming accessPolicyWindow is fine\n"
    )
    findings = audit_cpp(source, "kernels/k.cu")
    assert {f.line for f in findings if f.rule == "cache_control"} == {2, 3, 4}
    assert all("persisting-L2" in f.message for f in findings)


def test_vendor_library_headers_pass_only_where_the_task_allows_them() -> None:
    source = "#include <cublas_v2.h>\n#include <cudnn.h>\n#include <cufft.h>\n"
    refused = {f.message.split(":")[0]: f.rule for f in audit_cpp(source, "k.cu")}
    assert set(refused.values()) == {"forbidden_library"} and len(refused) == 3
    allowed = audit_cpp(source, "k.cu", allowed_libraries=("cublas",))
    assert [f.message.split(":")[0] for f in allowed] == ["#include <cudnn.h>", "#include <cufft.h>"]
    # cuFFT is in no task's policy; dlopen never passes.
    everything = audit_cpp(source + 'void* h = dlopen("x", 0);\n', "k.cu", ("cublas", "cudnn"))
    assert [f.line for f in everything] == [3, 4]


@pytest.mark.parametrize(
    ("problem", "libraries"),
    [
        ("level1/1_Square_matrix_multiplication_.py", ("cublas",)),
        ("level1/19_ReLU.py", ()),
        ("level1/63_conv_standard_2D__square_input__square_kernel.py", ("cudnn",)),
        ("level2/12_Gemm_Multiply_LeakyReLU.py", ("cublas",)),
    ],
)
def test_the_papers_policy_gives_cublas_to_matrix_products_and_cudnn_to_convolutions(
    kernelbench: Path, problem: str, libraries: tuple[str, ...]
) -> None:
    assert paper_vendor_libraries((kernelbench / problem).read_text()) == libraries


def test_a_tasks_own_policy_overrides_the_papers() -> None:
    from cuda_agent_mcp.tasks import load_task_file

    gemm = load_task_file(EXAMPLES.parent / "tests" / "fixtures" / "honest" / "matmul_cublas" / "model.py")
    assert gemm.vendor_libraries == ("cublas",)
    none = gemm.policy.model_copy(update={"vendor_libraries": ()})
    assert gemm.model_copy(update={"policy": none}).vendor_libraries == ()
