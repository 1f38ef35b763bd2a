"""Static audit of a workspace: what the rules forbid, found in the source before anything runs.

Static checks are bypassable on their own (a name can be bound in many ways); they catch the plain
cases early and cheaply, with a message the model can act on. The judge's checks on outputs and clocks
stay the evidence that decides.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection
from pathlib import Path

from cuda_agent_mcp.results import AuditFinding

# torch functions forward() may call: tensor creation, shape queries, dtype/device plumbing.
ALLOWED_TORCH_CALLS = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "tensor", "as_tensor", "arange", "device", "dtype", "Size", "is_tensor", "no_grad", "inference_mode",
    "get_default_dtype", "promote_types", "result_type", "finfo", "iinfo",
}  # fmt: skip
ALLOWED_TENSOR_METHODS = {
    "contiguous", "view", "reshape", "size", "dim", "numel", "stride", "is_contiguous", "data_ptr",
    "element_size", "to", "cuda", "cpu", "float", "half", "bfloat16", "double", "int", "long", "bool",
    "type", "new_empty", "new_zeros", "new_ones", "new_full", "unsqueeze", "squeeze", "expand", "flatten",
    "permute", "transpose", "t", "narrow", "select", "split", "chunk", "unbind", "item", "tolist",
    "storage_offset", "get_device", "requires_grad_", "detach", "clone", "copy_", "zero_", "fill_",
    "view_as", "reshape_as", "expand_as", "unflatten", "movedim", "is_floating_point",
}  # fmt: skip
# torch functions in C++ that allocate or inspect rather than compute.
ALLOWED_CPP_TORCH = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "full", "Tensor", "TensorOptions",
    "Device", "Dtype", "ScalarType", "IntArrayRef", "Scalar", "kFloat32", "kFloat", "kFloat16", "kHalf",
    "kBFloat16", "kFloat64", "kDouble", "kInt32", "kInt", "kInt64", "kLong", "kBool", "kUInt8", "kCUDA",
    "kCPU", "cuda", "optional", "nullopt", "MemoryFormat", "Layout", "kStrided", "TensorAccessor",
    "PackedTensorAccessor32", "PackedTensorAccessor64", "RestrictPtrTraits", "DefaultPtrTraits", "Generator",
}  # fmt: skip
_CPP_TORCH_CALL = re.compile(r"\b(?:torch|at)::(?:(?:nn::)?functional::)?([A-Za-z_]\w*)\s*\(")
_CPP_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def audit_workspace(root: Path, allowed_libraries: Collection[str] = ()) -> list[AuditFinding]:
    """Findings over model_new.py and the kernel sources; an empty list means nothing was found.
    `allowed_libraries` (cublas, cudnn) may be included, by the task's policy."""
    findings: list[AuditFinding] = []
    candidate = root / "model_new.py"
    if candidate.is_file():
        findings += audit_model_new(candidate.read_text(errors="replace"), "model_new.py")
    for path in sorted(
        [*root.glob("*.cu"), *root.glob("*.cpp"), *root.glob("kernels/*.cu"), *root.glob("kernels/*.cpp")]
    ):
        if path.name in ("binding.cpp",):
            continue
        findings += audit_cpp(
            path.read_text(errors="replace"), path.relative_to(root).as_posix(), allowed_libraries
        )
    return findings


def audit_model_new(source: str, file: str) -> list[AuditFinding]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # the worker reports the syntax error with its traceback
    found: list[AuditFinding] = []

    def add(node: ast.AST | None, rule: str, message: str) -> None:
        found.append(AuditFinding(file=file, line=getattr(node, "lineno", None), rule=rule, message=message))

    for node in ast.walk(tree):
        if (isinstance(node, ast.ImportFrom) and node.module == "model") or (
            isinstance(node, ast.Import) and any(alias.name == "model" for alias in node.names)
        ):
            add(node, "imports_reference", "model_new.py imports the reference module `model`")
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            for base in node.bases:
                name = ast.unparse(base)
                if name not in ("nn.Module", "torch.nn.Module", "Module"):
                    add(node, "inherits", f"ModelNew must subclass nn.Module directly, not {name}")
    layers = _torch_layers(_method(tree, "ModelNew", "__init__"))
    forward = _method(tree, "ModelNew", "forward")
    if forward is not None:
        for node in ast.walk(forward):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in layers:
                name = ast.unparse(node.func)
                add(node, "torch_compute", f"forward() calls the PyTorch layer {name} ({layers[name]})")
            if isinstance(node, ast.Try):
                add(node, "fallback", "try/except in forward(): a fallback path could hide a failing kernel")
            if isinstance(node, ast.Call):
                _check_call(node, add)
    return found


def _check_call(node: ast.Call, add) -> None:  # type: ignore[no-untyped-def]
    target = ast.unparse(node.func)
    parts = target.split(".")
    if parts[0] == "torch" and len(parts) >= 2:
        if parts[1] in ("nn", "ops", "_C", "compile", "special", "linalg", "fft") or (
            len(parts) == 2 and parts[1] not in ALLOWED_TORCH_CALLS
        ):
            add(node, "torch_compute", f"forward() calls {target}: only your kernels may compute")
    elif parts[0] == "F" and len(parts) == 2:
        add(
            node,
            "torch_compute",
            f"forward() calls {target} (torch.nn.functional): only your kernels may compute",
        )
    elif (
        isinstance(node.func, ast.Attribute)
        and node.func.attr in _TENSOR_COMPUTE_METHODS
        and not ast.unparse(node.func.value).startswith("cuda_extension")
    ):
        add(
            node,
            "torch_compute",
            f"forward() calls the tensor method .{node.func.attr}(): only your kernels may compute",
        )


_TENSOR_COMPUTE_METHODS = {
    "relu", "sigmoid", "tanh", "exp", "log", "sum", "mean", "max", "min", "softmax", "log_softmax", "matmul",
    "mm", "bmm", "add", "sub", "mul", "div", "pow", "sqrt", "abs", "clamp", "clamp_min", "clamp_max", "norm",
    "var", "std", "argmax", "argmin", "cumsum", "prod", "gelu", "silu", "erf", "conv2d", "addmm", "baddbmm",
    "einsum", "where", "masked_fill", "topk", "sort", "gather", "scatter", "index_select", "add_", "mul_",
    "relu_", "sigmoid_", "tanh_", "exp_", "div_", "sub_", "amax", "amin", "logsumexp", "cos", "sin",
}  # fmt: skip


# Containers and parameters may hold the reference's weights (so its state_dict loads); calling a
# layer in forward() runs PyTorch's implementation.
_HOLDERS = {"Parameter", "ParameterList", "ParameterDict", "ModuleList", "ModuleDict", "Buffer"}


def _torch_layers(init: ast.FunctionDef | None) -> dict[str, str]:
    """`self.x` names that __init__ binds to an nn layer, mapped to the layer's name."""
    layers: dict[str, str] = {}
    if init is None:
        return layers
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            constructor = ast.unparse(node.value.func)
            parts = constructor.split(".")
            if parts[0] in ("nn", "torch") and parts[-1] not in _HOLDERS and parts[-1][:1].isupper():
                for target in node.targets:
                    layers[ast.unparse(target)] = constructor
    return layers


def _method(tree: ast.Module, class_name: str, name: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item
    return None


def audit_cpp(source: str, file: str, allowed_libraries: Collection[str] = ()) -> list[AuditFinding]:
    """torch::/at:: calls that compute (anything beyond allocation and type plumbing)."""
    code = _CPP_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), source)
    found = []
    for match in _CPP_TORCH_CALL.finditer(code):
        name = match.group(1)
        if name in ALLOWED_CPP_TORCH or name.startswith("k"):
            continue
        line = code.count("\n", 0, match.start()) + 1
        found.append(
            AuditFinding(
                file=file,
                line=line,
                rule="torch_compute",
                message=f"{match.group(0).rstrip('( ')}() computes with PyTorch in C++: only your kernels may compute",
            )
        )
    for pattern, rule, why in _NATIVE_RULES:
        for match in pattern.finditer(code):
            library = match.groupdict().get("library")
            if library is not None and _POLICY_LIBRARY.get(library) in allowed_libraries:
                continue
            line = code.count("\n", 0, match.start()) + 1
            found.append(
                AuditFinding(file=file, line=line, rule=rule, message=f"{match.group(0).strip()}: {why}")
            )
    return found


# Persisting-L2 controls (catalog entry 34): an access-policy window or a persisting-L2 limit keeps the
# candidate's operands in L2 through the flush before each timed call, so its "cold" timings are warm.
_CACHE_CONTROL = re.compile(
    r"\b(?:accessPolicyWindow|cudaStreamAttributeAccessPolicyWindow|cudaKernelNodeAttributeAccessPolicyWindow|"
    r"cudaLaunchAttributeAccessPolicyWindow|cudaLimitPersistingL2CacheSize|cudaAccessPropertyPersisting|"
    r"cudaCtxResetPersistingL2Cache|CU_LIMIT_PERSISTING_L2_CACHE_SIZE|CU_ACCESS_PROPERTY_PERSISTING)\b"
)

# Vendor libraries (cuBLAS, cuDNN, ...) would do the work instead of the candidate's kernels; dlopen and
# link pragmas would pull them in past the fixed link line. A task's policy may allow cuBLAS and cuDNN
# (tasks/vendor.py: the paper's, for GEMMs and convolutions); the build then links them.
_FORBIDDEN_NATIVE = re.compile(
    r"#\s*include\s*[<\"](?P<library>cublas|cublasLt|cudnn|cufft|cusparse|cusolver|cutlass|cute|"
    r"ATen/native|torch/csrc/api/include/torch/nn)[^>\"]*[>\"]"
    r"|#\s*pragma\s+comment\s*\(\s*lib|\bdlopen\s*\(|\bdlsym\s*\("
)
_POLICY_LIBRARY = {"cublas": "cublas", "cublasLt": "cublas", "cudnn": "cudnn"}

# (pattern, rule, why it is refused) for the constructs refused wherever they appear in C++/CUDA.
_NATIVE_RULES = (
    (
        _CACHE_CONTROL,
        "cache_control",
        "persisting-L2 controls would keep your operands in cache across the timer's L2 flush; "
        "they are not allowed",
    ),
    (
        _FORBIDDEN_NATIVE,
        "forbidden_library",
        "vendor math libraries and loading code at run time are not allowed; write the computation as "
        "your own kernel",
    ),
)
