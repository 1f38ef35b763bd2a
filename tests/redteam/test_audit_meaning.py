"""Principle 8: the static audit judges what the code means, not how it spells it (catalog 64-70).

Each bypass reaches PyTorch compute, Python, a vendor library or a cache control by a spelling the
name-based audit missed: an alias, a using-directive, a computed name, a mangled symbol, a number. The
audit must name the file, the line, the rule and say what to do; and it must stay silent on every
honest fixture and example (the false positives a real agent would meet).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_mcp.evaluation.audit import audit_cpp, audit_model_new, audit_workspace
from cuda_agent_mcp.results import Rejected
from cuda_agent_mcp.tasks import load_task_file
from tests.conftest import EXAMPLES, REPO
from tests.redteam.workspaces import EXAMPLES as _EXAMPLES
from tests.redteam.workspaces import HONEST_LAUNCH, RELU_KERNEL, forward, launcher, relu_session, verify

BINDING = (_EXAMPLES / "relu" / "kernels" / "relu_binding.cpp").read_text()

# (forward body, prelude after the imports, rule, text the message must hold)
PYTHON_BYPASSES = {
    "module_alias": ("        return T.relu(x)", "import torch as T", "torch_compute", "T.relu (torch.relu)"),
    "imported_function": (
        "        return r(x)",
        "from torch import relu as r",
        "torch_compute",
        "torch.relu",
    ),
    "functional_alias": (
        "        return G.gelu(x)",
        "G = torch.nn.functional",
        "torch_compute",
        "torch.nn.functional.gelu",
    ),
    "computed_getattr": ("        return getattr(torch, 're' + 'lu')(x)", "", "computed_name", "getattr()"),
    "constant_getattr": ("        return getattr(torch, 'relu')(x)", "", "torch_compute", "torch.relu"),
    "dunder_import": ("        return __import__('torch').relu(x)", "", "computed_name", "__import__"),
    "importlib": (
        "        return importlib.import_module('torch').relu(x)",
        "import importlib",
        "computed_name",
        "importlib",
    ),
    "eval": ("        return eval('torch.relu(x)')", "", "dynamic_code", "eval()"),
    "exec": ("        exec('y = torch.relu(x)')\n        return x", "", "dynamic_code", "exec()"),
    "globals_lookup": ("        return globals()['torch'].relu(x)", "", "computed_name", "globals()"),
    "attrgetter": (
        "        return operator.attrgetter('relu')(torch)(x)",
        "import operator",
        "computed_name",
        "operator",
    ),
    "vars_lookup": ("        return vars(torch)['relu'](x)", "", "computed_name", "vars()"),
    "module_dict": ("        return torch.__dict__['relu'](x)", "", "computed_name", "__dict__"),
    "sys_modules": (
        "        return sys.modules['torch'].relu(x)",
        "import sys",
        "computed_name",
        "sys.modules",
    ),
    "ctypes_library": (
        "        return cuda_extension.relu(x)",
        "import ctypes\nLIB = ctypes.CDLL('libcublas.so')",
        "forbidden_library",
        "ctypes",
    ),
    "cffi": ("        return cuda_extension.relu(x)", "import cffi", "forbidden_library", "cffi"),
    "load_library": (
        "        return cuda_extension.relu(x)",
        "torch.ops.load_library('/tmp/x.so')",
        "forbidden_library",
        "torch.ops.load_library",
    ),
    "cpp_extension": (
        "        return cuda_extension.relu(x)",
        "from torch.utils.cpp_extension import load_inline",
        "forbidden_library",
        "cpp_extension",
    ),
    "jiterator": (
        "        return torch.cuda.jiterator._create_jit_fn('T f(T x) { return x; }')(x)",
        "",
        "forbidden_library",
        "jiterator",
    ),
    "pickle": ("        return pickle.loads(BLOB)(x)", "import pickle\nBLOB = b''", "dynamic_code", "pickle"),
    "numpy": (
        "        return torch.from_numpy(np.maximum(x.cpu().numpy(), 0)).cuda()",
        "import numpy as np",
        "forbidden_library",
        "numpy",
    ),
    "helper_function": (
        "        return _helper(x)",
        "def _helper(t):\n    return t.exp()",
        "torch_compute",
        "_helper() calls the tensor method .exp()",
    ),
    "stored_reference": ("        return ACT(x)", "ACT = torch.relu", "torch_compute", "torch.relu"),
    "decorated_helper": (
        "        return _helper(x)",
        "@torch.compile\ndef _helper(t):\n    return cuda_extension.relu(t)",
        "torch_compute",
        "torch.compile",
    ),
    "operator_on_tensor": ("        return x * (x > 0)", "", "torch_compute", "applies * to tensors"),
    "matmul_operator": ("        return x @ x", "", "torch_compute", "applies @"),
    "post_processing": (
        "        out = cuda_extension.relu(x)\n        return out + 0.0",
        "",
        "torch_compute",
        "applies + to tensors",
    ),
    "method_outside_the_old_list": ("        return x.addcmul(x, x)", "", "torch_compute", ".addcmul()"),
    "in_place_method": ("        return x.abs_()", "", "torch_compute", ".abs_()"),
    "unbound_tensor_method": (
        "        return torch.Tensor.add(x, 1)",
        "",
        "torch_compute",
        "torch.Tensor.add",
    ),
    "lambda": (
        "        return (lambda t: t.relu())(x)",
        "",
        "torch_compute",
        "a lambda calls the tensor method .relu()",
    ),
}


@pytest.mark.parametrize("case", sorted(PYTHON_BYPASSES))
def test_python_bypasses_are_found_on_meaning(case: str) -> None:
    body, prelude, rule, text = PYTHON_BYPASSES[case]
    findings = audit_model_new(forward(body, prelude=prelude), "model_new.py")
    assert any(f.rule == rule and text in f.message and f.line for f in findings), findings


def test_a_stored_compute_function_is_refused_even_in_init() -> None:
    source = forward("        return self.act(x)").replace(
        "        super().__init__()\n", "        super().__init__()\n        self.act = torch.relu\n"
    )
    findings = [f for f in audit_model_new(source, "model_new.py") if f.rule == "torch_compute"]
    assert any("refers to torch.relu" in f.message and f.line == 10 for f in findings), findings
    # And the held reference is followed to its call: forward() calls torch.relu through self.act.
    assert any("torch.relu" in f.message and f.line != 10 for f in findings), findings


def test_a_module_beside_model_new_is_audited_too(tmp_path: Path) -> None:
    (tmp_path / "model_new.py").write_text(forward("        return helpers.act(x)", prelude="import helpers"))
    (tmp_path / "helpers.py").write_text("import torch\n\n\ndef act(x):\n    return torch.relu(x)\n")
    findings = audit_workspace(tmp_path)
    assert [(f.file, f.line, f.rule) for f in findings] == [("helpers.py", 5, "torch_compute")]


KERNEL_FILE = "kernels/relu_binding.cpp"
# (C++ text, rule, text the message must hold); the snippets use `x`, `a`, `b` as tensors.
NATIVE_BYPASSES = {
    "namespace_alias": ("namespace T = torch;\nauto y = T::relu(x);", "torch_compute", "T::relu"),
    "macro_alias": ("#define NS at\nauto y = NS::matmul(a, b);", "torch_compute", "NS::matmul"),
    "using_namespace": ("using namespace at;\nauto y = relu(x);", "torch_compute", "relu()"),
    "using_declaration": ("using at::matmul;\nauto y = matmul(a, b);", "torch_compute", "using at::matmul"),
    "function_pointer": (
        "using Fn = at::Tensor (*)(const at::Tensor&);\nFn f = at::relu;\nauto y = f(x);",
        "torch_compute",
        "refers to PyTorch's relu",
    ),
    "ops_namespace": ("auto y = at::_ops::relu::call(x);", "torch_compute", "at::_ops::relu::call"),
    "native_namespace": ("auto y = at::native::relu(x);", "torch_compute", "at::native::relu"),
    "tensor_method": ("auto y = x.matmul(b);", "torch_compute", ".matmul()"),
    "reduction_method": ("auto s = x.sum();", "torch_compute", ".sum()"),
    "in_place_method": ("x.addcmul_(a, b);", "torch_compute", ".addcmul_()"),
    "method_through_a_pointer": ("const at::Tensor* p = &x;\nauto y = p->exp();", "torch_compute", ".exp()"),
    "operator_plus": (
        "torch::Tensor x = torch::empty_like(a);\nauto y = x + a;",
        "torch_compute",
        "operator on the tensor",
    ),
    "operator_compound": (
        "void f(torch::Tensor& x, const torch::Tensor& a) { x += a; }",
        "torch_compute",
        "operator on the tensor",
    ),
    "operator_negation": (
        "at::Tensor x = at::empty({4});\nauto y = -x;",
        "torch_compute",
        "operator on the tensor",
    ),
    "dispatcher": (
        'auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::relu", "").typed<at::Tensor(const at::Tensor&)>();',
        "torch_compute",
        "operator dispatcher",
    ),
    "boxed_call": ("op.callBoxed(&stack);", "torch_compute", "callBoxed"),
    "python_call": ("PyObject* r = PyObject_CallObject(f, args);", "python_from_cpp", "PyObject_CallObject"),
    "python_run": ('PyRun_SimpleString("import torch");', "python_from_cpp", "PyRun_SimpleString"),
    "pybind_import": (
        'auto r = py::module_::import("torch").attr("relu")(x);',
        "python_from_cpp",
        "py::module_::import",
    ),
    "pybind_eval": ('auto r = py::eval("1");', "python_from_cpp", "py::eval"),
    "pybind_globals": ("auto g = pybind11::globals();", "python_from_cpp", "pybind11::globals"),
    "mangled_symbol": (
        'extern "C" void* _ZN2at4reluERKNS_6TensorE(void*);',
        "torch_compute",
        "mangled symbol",
    ),
    "asm_label": (
        'at::Tensor my_relu(const at::Tensor&) __asm__("_ZN2at4reluERKNS_6TensorE");',
        "torch_compute",
        "mangled symbol",
    ),
    "reopened_namespace": (
        "namespace at { Tensor relu(const Tensor&); }",
        "torch_compute",
        "PyTorch's namespaces",
    ),
    "vendor_call_without_header": (
        "cublasSgemm_v2(h, op, op, m, n, k, &one, a, m, b, k, &zero, c, m);",
        "forbidden_library",
        "cublasSgemm_v2",
    ),
    "dlmopen": ('void* h = dlmopen(LM_ID_NEWLM, "libcublas.so", 1);', "forbidden_library", "dlmopen"),
    "l2_attribute_as_a_number": (
        "cudaStreamSetAttribute(s, (cudaStreamAttrID)1, &v);",
        "cache_control",
        "persisting-L2",
    ),
    "l2_limit_as_a_number": ("cudaDeviceSetLimit((cudaLimit)6, 1 << 20);", "cache_control", "persisting-L2"),
    "l2_limit_cast": ("auto l = static_cast<cudaLimit>(6);", "cache_control", "persisting-L2"),
    "hit_property": ("v.accessPolicyWindow.hitProp = p;", "cache_control", "persisting-L2"),
}


@pytest.mark.parametrize("case", sorted(NATIVE_BYPASSES))
def test_native_bypasses_are_found_on_meaning(case: str) -> None:
    text, rule, message = NATIVE_BYPASSES[case]
    findings = audit_cpp(text + "\n", KERNEL_FILE)
    assert any(
        f.rule == rule and message in f.message and f.file == KERNEL_FILE and f.line for f in findings
    ), findings


def test_the_vendor_call_passes_where_the_task_allows_the_library() -> None:
    call = "cublasSgemm_v2(h, op, op, m, n, k, &one, a, m, b, k, &zero, c, m);\n"
    assert audit_cpp(call, "kernels/k.cu", allowed_libraries=("cublas",)) == []


HONEST_NATIVE = """
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/types.h>
#include <curand_kernel.h>
#include <vector>
#include <algorithm>

static torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& w, int64_t groups) {
  TORCH_CHECK(!x.is_cuda() == false && x.dim() == 2, "x: 2-D CUDA");
  TORCH_CHECK(x.size(1) == w.size(0) && -x.size(0) < 0, "shapes");
  at::cuda::CUDAGuard guard(x.device());
  c10::cuda::OptionalCUDAGuard other(x.get_device());
  auto stream = c10::cuda::getCurrentCUDAStream().stream();
  torch::Tensor input = x.contiguous();
  torch::Tensor out = torch::empty({x.size(0), w.size(1)}, x.options().dtype(torch::kFloat32));
  auto tmp = at::empty_like(out);
  std::vector<float> host(16);
  host.resize(32);
  const float* base = input.data_ptr<float>() + groups * 2;
  int64_t n = std::max<int64_t>(input.numel() / groups, 1);
  cudaStreamAttrValue v = {};
  cudaStreamSetAttribute(stream, cudaStreamAttributeSynchronizationPolicy, &v);
  cudaDeviceSetLimit(cudaLimitStackSize, 4096);
  launch(base, host.data(), out.data_ptr<float>(), n, stream);
  return out.view({x.size(0), -1});
}
"""

HONEST_CUDA = """
struct Acc { float s; __device__ void add(float v) { s += v; } __device__ float sum() const { return s; } };
__global__ void k(const float* x, float* y, int n, unsigned long long seed) {
  curandState state; curand_init(seed, threadIdx.x, 0, &state);
  Acc acc{0.f}; acc.add(x[threadIdx.x]); y[threadIdx.x] = acc.sum() + curand_uniform(&state);
  float m = max(x[0], 0.f) + min(x[1], 1.f) + abs(x[2]) + expf(x[3]);
  y[0] = m;
}
"""


def test_honest_native_glue_is_not_flagged() -> None:
    assert audit_cpp(HONEST_NATIVE, "kernels/k_binding.cpp") == []
    assert audit_cpp(HONEST_CUDA, "kernels/k.cu") == []


HONEST_PYTHON = """
import math

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features: int, layers: int):
        super().__init__()
        self.linear = nn.Linear(features, features)
        for i in range(layers):
            setattr(self, f"scale{i}", nn.Parameter(torch.ones(features)))
        self.graph = None
        self.stream = torch.cuda.Stream()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.dtype != torch.float32:
            raise ValueError("x: 2-D float32")
        blocks = math.ceil(x.shape[0] * x.shape[1] / 256)
        shape = list(x.shape)
        position = shape.index(shape[-1])
        out = torch.empty(x.shape[0], self.linear.out_features, device=x.device, dtype=x.dtype)
        kernel = getattr(cuda_extension, f"fused_{x.dtype}".replace("torch.", ""), cuda_extension.fused)
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            kernel(x.contiguous(), self.linear.weight, self.linear.bias, out, blocks, position)
        torch.cuda.current_stream().wait_stream(self.stream)
        out.record_stream(torch.cuda.current_stream())
        return out.view(shape[0], -1)
"""


def test_honest_python_glue_is_not_flagged() -> None:
    assert audit_model_new(HONEST_PYTHON, "model_new.py") == []


def _honest_workspaces() -> list[Path]:
    roots = [*EXAMPLES.iterdir(), *(REPO / "tests" / "fixtures" / "honest").iterdir()]
    return sorted(r for r in roots if (r / "model.py").is_file())


@pytest.mark.parametrize("root", _honest_workspaces(), ids=lambda p: p.name)
def test_no_honest_fixture_or_example_has_a_finding(root: Path) -> None:
    allowed = load_task_file(root / "model.py").vendor_libraries
    assert audit_workspace(root, allowed) == []


# End to end: the tool refuses before any judge starts (device="cpu": no GPU needed), with the findings.
END_TO_END = {
    "alias_in_model_new": dict(model_new=forward("        return T.relu(x)", prelude="import torch as T")),
    "computed_getattr_in_model_new": dict(model_new=forward("        return getattr(torch, 're' + 'lu')(x)")),
    "ctypes_in_model_new": dict(
        model_new=forward(
            "        return cuda_extension.relu(x)", prelude="import ctypes\nctypes.CDLL('libcublas.so')"
        )
    ),
    "l2_limit_as_a_number_in_the_kernel": dict(
        kernel=RELU_KERNEL + launcher("  cudaDeviceSetLimit((cudaLimit)6, 1 << 20);\n" + HONEST_LAUNCH)
    ),
    "namespace_alias_in_the_binding": dict(
        binding=BINDING.replace(
            "  torch::Tensor out = torch::empty_like(input);\n",
            "  namespace T = torch;\n  return T::relu(input);\n  torch::Tensor out = torch::empty_like(input);\n",
        )
    ),
}
END_TO_END_RULES = {
    "alias_in_model_new": "torch_compute",
    "computed_getattr_in_model_new": "computed_name",
    "ctypes_in_model_new": "forbidden_library",
    "l2_limit_as_a_number_in_the_kernel": "cache_control",
    "namespace_alias_in_the_binding": "torch_compute",
}


@pytest.mark.nvcc
@pytest.mark.parametrize("case", sorted(END_TO_END))
def test_the_verify_tool_refuses_meaningful_bypasses_before_anything_runs(
    case: str, tmp_path: Path, shared_build_cache: Path
) -> None:
    session = relu_session(tmp_path, shared_build_cache, **END_TO_END[case])  # type: ignore[arg-type]
    result = verify(session, device="cpu")
    assert isinstance(result.verdict, Rejected), result.verdict
    assert result.verdict.reason == "forbidden_op"
    assert {f.rule for f in result.verdict.findings} == {END_TO_END_RULES[case]}, result.verdict.findings
    first = result.verdict.findings[0]
    assert first.file in ("model_new.py", "kernels/relu.cu", "kernels/relu_binding.cpp") and first.line
    assert f"{first.file}:{first.line}" in result.verdict.message


def test_a_candidate_module_that_is_a_link_is_a_finding_not_a_blind_spot(tmp_path: Path) -> None:
    """The evaluation copies the workspace's `*.py` following links; an unaudited link would carry any
    file (another workspace's, a forbidden module kept under another name) to the worker."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "impl.txt").write_text(forward("        return torch.relu(x)"))
    (tmp_path / "model_new.py").symlink_to(tmp_path / "kernels" / "impl.txt")
    (tmp_path / "helpers.py").symlink_to("/etc/hostname")
    findings = audit_workspace(tmp_path)
    assert [(f.file, f.rule) for f in findings] == [
        ("helpers.py", "linked_file"),
        ("model_new.py", "linked_file"),
    ]
