"""Static audit of C++ and CUDA sources, on what the code means rather than how it spells it.

PyTorch compute is found however it is reached: `torch::`/`at::` and every alias of them (`namespace
T = torch;`, `#define NS at`, `using namespace at;`, `using at::matmul;`, a typedef'd function pointer
`= at::relu`), `at::_ops::` and `at::native::`, tensor methods and operators on tensors, the dispatcher
(`c10::Dispatcher`, `findSchema`, `callBoxed`), a torch symbol by its mangled name, or names declared
inside PyTorch's own namespaces. Also refused: Python called back from C++, vendor libraries outside the
task's policy (headers, calls, dlopen), and persisting-L2 settings, also when written as numbers.
Which names compute is read from the installed torch's operator list (`ops.computes`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator

from cuda_agent_mcp.evaluation.ops import computes
from cuda_agent_mcp.results import AuditFinding

_COMMENTS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S)

# torch names that allocate, describe or plumb rather than compute (types, options, guards, streams).
ALLOWED_CPP_TORCH = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "full", "Tensor", "TensorOptions",
    "Device", "Dtype", "ScalarType", "IntArrayRef", "Scalar", "cuda", "optional", "nullopt", "MemoryFormat",
    "Layout", "kStrided", "TensorAccessor", "PackedTensorAccessor32", "PackedTensorAccessor64",
    "RestrictPtrTraits", "DefaultPtrTraits", "Generator", "from_blob",
}  # fmt: skip
# Method names std:: types share with ATen ops (vector::data, complex::real, bitset::all, ...).
_STD_METHODS = {
    "data",
    "real",
    "imag",
    "resize",
    "swap",
    "set",
    "fill",
    "copy",
    "count",
    "all",
    "any",
    "clear",
}

_NAMESPACES = ("torch", "at")
_ALIAS = re.compile(r"\bnamespace\s+(?P<alias>\w+)\s*=\s*(?:::)?(?P<target>torch|at|aten)\b[\w:]*\s*;")
_DEFINE_ALIAS = re.compile(r"#\s*define\s+(?P<alias>\w+)\s+(?:::)?(?P<target>torch|at)\b(?:::\w+)*\s*$", re.M)
_USING_NAME = re.compile(r"\busing\s+(?:::)?(?:torch|at)::(?:\w+::)*(?P<name>\w+)\s*;")
_TENSOR_DECLARATION = re.compile(
    r"\b(?:(?:::)?(?:torch|at)::)?Tensor\s*(?:const\s*)?&{0,2}\s*(?P<name>[a-z_]\w*)\s*[,)=;{]"
)
_TENSOR_AUTO = re.compile(r"\bauto\s*&{0,2}\s*(?P<name>\w+)\s*=\s*(?:::)?(?:torch|at)::\w+\s*\(")
_METHOD_CALL = re.compile(r"(?:\.|->)\s*(?P<name>[a-z_]\w*)\s*(?:<[^;(){}<>]*>)?\s*\(")
_OPERATOR = r"(?:\+(?!\+)|-(?![->])|\*|/|%|\^|&(?!&)|\|(?!\|)|==|!=|<=|>=|<(?![<=])|>(?![>=]))=?"
_MANGLED = re.compile(r"\b_ZN[KVR]*(?:2at|3c10|5torch)(?=\d|_|[A-Z])\w*")
_REOPENED = re.compile(r"\bnamespace\s+(?:at|torch|c10|aten)\b\s*(?:::\s*\w+\s*)*\{")

_DISPATCHER = re.compile(
    r"\b(?:c10::)?Dispatcher\b|\bfindSchema\w*|\bcallBoxed\w*|\bOperatorHandle\b|\bredispatch\w*|"
    r"\.typed\s*<|\bTORCH_LIBRARY\w*\s*\("
)
_PYTHON_CALLBACK = re.compile(
    r"\b_?Py\w*(?:Call|Vectorcall)\w*\s*\(|\bPyRun_\w+|\bPyImport_\w+|\bPyEval_\w+|\bPy_CompileString\w*|"
    r"\b(?:py|pybind11)::(?:module_?::import|eval\w*|exec|globals|getattr|import)\b|"
    r"\.\s*attr\s*\([^;()]*\)\s*\("
)
# Host API calls of the vendor math libraries, also without their headers (curand's device API is a
# header of the CUDA toolkit that kernels may use).
_VENDOR_CALL = re.compile(
    r"\b(?P<library>cublasLt|cublas|cudnn|cufft|cusparse|cusolver|cutensor)[A-Z_]\w*\s*\("
)
_FORBIDDEN_NATIVE = re.compile(
    r"#\s*include\s*[<\"](?P<library>cublas|cublasLt|cudnn|cufft|cusparse|cusolver|cutlass|cute|"
    r"ATen/native|torch/csrc/api/include/torch/nn)[^>\"]*[>\"]"
    r"|#\s*pragma\s+comment\s*\(\s*lib|\b(?:dlopen|dlmopen|dlsym|dlvsym|__libc_dlopen_mode|_dl_open)\s*\("
)
_POLICY_LIBRARY = {"cublas": "cublas", "cublasLt": "cublas", "cudnn": "cudnn"}

# Persisting-L2 controls (catalog 34): an access-policy window or a persisting-L2 limit keeps the
# candidate's operands in L2 through the flush before each timed call, so its "cold" timings are warm.
# Also as numbers: a cast to the attribute or limit enums, or a numeric attribute or limit argument.
_CACHE_CONTROL = re.compile(
    r"\b(?:accessPolicyWindow|cudaStreamAttributeAccessPolicyWindow|cudaKernelNodeAttributeAccessPolicyWindow|"
    r"cudaLaunchAttributeAccessPolicyWindow|cudaLimitPersistingL2CacheSize|cudaAccessPropertyPersisting|"
    r"cudaCtxResetPersistingL2Cache|CU_LIMIT_PERSISTING_L2_CACHE_SIZE|CU_ACCESS_PROPERTY_PERSISTING|"
    r"hitProp|missProp|hitRatio|persistingL2CacheMaxSize|cudaDevAttrMaxPersistingL2CacheSize)\b"
    r"|\(\s*(?:enum\s+)?(?:cudaStreamAttrID|cudaLaunchAttributeID|cudaKernelNodeAttrID|cudaLimit|"
    r"cudaAccessProperty|CUstreamAttrID|CUlaunchAttributeID|CUkernelNodeAttrID|CUlimit|CUaccessProperty)\s*\)"
    r"|\b(?:static_cast|reinterpret_cast)\s*<\s*(?:cudaStreamAttrID|cudaLaunchAttributeID|cudaKernelNodeAttrID|"
    r"cudaLimit|cudaAccessProperty|CUstreamAttrID|CUlaunchAttributeID|CUlimit|CUaccessProperty)\s*>"
    r"|\b(?:cudaStreamSetAttribute|cudaGraphKernelNodeSetAttribute|cuStreamSetAttribute|cuGraphKernelNodeSetAttribute)"
    r"\s*\(\s*[^,;]+,\s*[(\d]"
    r"|\b(?:cudaDeviceSetLimit|cuCtxSetLimit)\s*\(\s*[(\d]"
)

_WHY = {
    "cache_control": "persisting-L2 controls would keep your operands in cache across the timer's L2 flush; "
    "they are not allowed",
    "forbidden_library": "vendor math libraries and loading code at run time are not allowed; write the "
    "computation as your own kernel",
    "python_from_cpp": "calling back into Python from C++ runs code that is not your kernel; compute in CUDA",
    "dispatcher": "calling PyTorch's operator dispatcher computes with PyTorch: only your kernels may compute",
    "mangled": "a PyTorch function by its mangled symbol computes with PyTorch: only your kernels may compute",
    "reopened": "declaring names inside PyTorch's namespaces reaches its functions without its headers; "
    "only your kernels may compute",
}


def blank_comments(source: str, *, strings: bool = False) -> str:
    """Comments (and string contents, with `strings`) as spaces; newlines kept so line numbers hold."""

    def blank(match: re.Match[str]) -> str:
        token = match.group(0)
        if token[0] in "\"'":
            return token if not strings else token[0] + " " * (len(token) - 2) + token[-1]
        return re.sub(r"[^\n]", " ", token)

    return _COMMENTS.sub(blank, source)


def audit_native(
    source: str, file: str, allowed_libraries: Collection[str] = (), *, host_code: bool = True
) -> list[AuditFinding]:
    """Findings in one C++/CUDA source. `host_code`: a .cpp or header, where tensor methods and
    operators on tensors are looked for (a .cu file cannot include torch's headers)."""
    with_strings = blank_comments(source)
    code = blank_comments(source, strings=True)
    found: dict[tuple[int, str], AuditFinding] = {}

    def add(offset: int, rule: str, message: str) -> None:
        line = code.count("\n", 0, offset) + 1
        found.setdefault((line, message), AuditFinding(file=file, line=line, rule=rule, message=message))

    for offset, rule, message in _torch_compute(code, host_code=host_code):
        add(offset, rule, message)
    for pattern, rule, why, text in (
        (_DISPATCHER, "torch_compute", "dispatcher", code),
        (_PYTHON_CALLBACK, "python_from_cpp", "python_from_cpp", code),
        (_MANGLED, "torch_compute", "mangled", with_strings),
        (_REOPENED, "torch_compute", "reopened", code),
        (_CACHE_CONTROL, "cache_control", "cache_control", code),
    ):
        for match in pattern.finditer(text):
            add(match.start(), rule, f"{match.group(0).strip()}: {_WHY[why]}")
    for pattern, text in ((_FORBIDDEN_NATIVE, with_strings), (_VENDOR_CALL, code)):
        for match in pattern.finditer(text):
            library = match.groupdict().get("library")
            if library is not None and _POLICY_LIBRARY.get(library) in allowed_libraries:
                continue
            add(
                match.start(),
                "forbidden_library",
                f"{match.group(0).strip().rstrip('(').strip()}: {_WHY['forbidden_library']}",
            )
    return sorted(found.values(), key=lambda f: (f.line or 0, f.message))


def _torch_compute(code: str, *, host_code: bool) -> Iterator[tuple[int, str, str]]:
    aliases = {m.group("alias") for m in (*_ALIAS.finditer(code), *_DEFINE_ALIAS.finditer(code))}
    namespaces = "|".join(map(re.escape, (*_NAMESPACES, *sorted(aliases))))
    qualified = re.compile(
        rf"(?<![\w.])(?:::)?(?P<ns>{namespaces})::(?P<path>(?:\w+::)*)(?P<name>\w+)(?P<call>\s*[(<])?"
    )
    for match in qualified.finditer(code):
        path, name = match.group("path"), match.group("name")
        spelled = match.group(0).rstrip("(< ")
        if path.startswith(("_ops::", "native::", "jit::")):
            inner = path.split("::")[1] or name
            if not (path.startswith("_ops::") and _allocates(inner)):
                yield (
                    match.start(),
                    "torch_compute",
                    f"{spelled}: PyTorch's operators called directly compute with PyTorch: only your kernels may compute",
                )
            continue
        if "cuda::" in path or name in ALLOWED_CPP_TORCH or name.startswith("k"):
            continue  # streams, guards and device plumbing; dtype constants
        nn_layer = path.startswith("nn::") and not path.startswith("nn::functional::") and name[:1].isupper()
        if nn_layer or computes(name):
            how = "calls" if match.group("call") else "refers to"
            yield (
                match.start(),
                "torch_compute",
                f"{spelled}: C++ that {how} PyTorch's {name} computes with PyTorch: only your kernels may compute",
            )
    unqualified: set[str] = set()
    for match in _USING_NAME.finditer(code):
        if computes(match.group("name")):
            unqualified.add(match.group("name"))
            yield (
                match.start(),
                "torch_compute",
                f"{match.group(0).strip()} brings PyTorch's {match.group('name')} into scope: only your kernels may compute",
            )
    if re.search(rf"\busing\s+namespace\s+(?:::)?(?:{namespaces})(?:::nn(?:::functional)?)?\s*;", code):
        unqualified.add("*")
    if unqualified:
        for match in re.finditer(r"(?<![\w.:>])(?P<name>[a-z_]\w*)\s*\(", code):
            name = match.group("name")
            if (
                (name in unqualified or "*" in unqualified)
                and computes(name)
                and not _is_definition(code, match.start())
            ):
                yield (
                    match.start(),
                    "torch_compute",
                    f"{name}() is PyTorch's {name} here (a using-directive brings it in): only your kernels may compute",
                )
    if not host_code:
        return
    for match in _METHOD_CALL.finditer(code):
        name = match.group("name")
        if name not in _STD_METHODS and computes(name):
            yield (
                match.start(),
                "torch_compute",
                f".{name}() is a tensor method that computes with PyTorch: only your kernels may compute",
            )
    tensors = {m.group("name") for m in (*_TENSOR_DECLARATION.finditer(code), *_TENSOR_AUTO.finditer(code))}
    for name in sorted(tensors):
        escaped = re.escape(name)
        around = re.compile(
            rf"(?<![\w.>])(?:{escaped}\s*{_OPERATOR}(?=\s*[\w(.-])|(?<![\w)\]])[-~]\s*{escaped}\b(?!\s*(?:\.|->|\[|\()))"
        )
        for match in around.finditer(code):
            if not _is_declaration_or_pointer(code, match):
                yield (
                    match.start(),
                    "torch_compute",
                    f"`{match.group(0).strip()}`: an operator on the tensor {name} computes with PyTorch: only your kernels may compute",
                )


def _allocates(op: str) -> bool:
    """An `at::_ops` name (overload spelled in: `empty_memory_format`) of an allowed op."""
    return not computes(op) and (op in ALLOWED_CPP_TORCH or not computes(op.split("_")[0] or op))


def _is_definition(code: str, offset: int) -> bool:
    """`float relu(float x)`: a function the agent defines, not a call (a type name precedes it)."""
    before = code[max(0, offset - 64) : offset].rstrip()
    return bool(
        re.search(r"(?:\b(?:void|float|double|int|int64_t|auto|bool|half|Tensor)|[\w>]\s*[*&])\s*$", before)
    )


def _is_declaration_or_pointer(code: str, match: re.Match[str]) -> bool:
    """`Tensor& x = ...` is a declaration (`&` after the type), not `x & y`."""
    line_start = code.rfind("\n", 0, match.start()) + 1
    return bool(re.search(r"Tensor\s*(?:const\s*)?$", code[line_start : match.start()]))
