"""What the names of a candidate's Python module stand for, and which of them compute with PyTorch.

`ModuleNames` resolves a name through the module's own imports and assignments (`import torch as T`,
`from torch import relu`, `G = torch.nn.functional`, `k = cuda_extension.relu_kernel`, `self.k = ...`,
a constant `getattr`, `type(x)`), so the audit (`audit_python.py`) judges an alias as its target.
"""

from __future__ import annotations

import ast

from cuda_agent_mcp.evaluation.ops import computes
from cuda_agent_mcp.evaluation.triton_rules import triton_rule
from cuda_agent_mcp.results import KernelLanguage

ALLOWED_TORCH_CALLS = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "tensor", "as_tensor", "arange", "device", "dtype", "Size", "is_tensor", "no_grad", "inference_mode",
    "get_default_dtype", "promote_types", "result_type", "finfo", "iinfo",
}  # fmt: skip
_TORCH_COMPUTE_MODULES = (
    "nn",
    "ops",
    "_C",
    "compile",
    "special",
    "linalg",
    "fft",
    "jit",
    "func",
    "_ops",
    "_refs",
    "_prims",
    "sparse",
    "library",
)
# Containers and parameters may hold the reference's weights (so its state_dict loads); calling a
# layer in forward() runs PyTorch's implementation.
HOLDERS = {"Parameter", "ParameterList", "ParameterDict", "ModuleList", "ModuleDict", "Buffer", "Module"}

# module: (rule, why), refused wherever it is imported or used
FORBIDDEN_MODULES = {
    "importlib": ("computed_name", "imports modules by computed names"),
    "builtins": ("computed_name", "reaches builtins by name"),
    "operator": ("computed_name", "attrgetter/methodcaller look attributes up by computed names"),
    "pickle": ("dynamic_code", "unpickling builds calls at run time"),
    "marshal": ("dynamic_code", "loads code at run time"),
    "dill": ("dynamic_code", "unpickling builds calls at run time"),
    "cloudpickle": ("dynamic_code", "unpickling builds calls at run time"),
    "types": ("dynamic_code", "builds functions and code objects at run time"),
    "ctypes": ("forbidden_library", "loads native libraries past the build"),
    "cffi": ("forbidden_library", "loads native libraries past the build"),
    "triton": ("forbidden_library", "compiles kernels that are not your workspace's"),
    "cupy": ("forbidden_library", "computes outside your kernels"),
    "cupyx": ("forbidden_library", "compiles and runs kernels that are not your workspace's"),
    "cupy_backends": ("forbidden_library", "loads modules and launches past the build"),
    "gc": ("computed_name", "reaches live objects (the launcher's internals) by search"),
    "inspect": ("computed_name", "reads attributes and frames by computed names"),
    "numba": ("forbidden_library", "compiles kernels that are not your workspace's"),
    "pycuda": ("forbidden_library", "compiles and loads kernels that are not your workspace's"),
    "cuda": ("forbidden_library", "loads modules and libraries past the build"),
    "numpy": ("forbidden_library", "computes outside your kernels"),
    "scipy": ("forbidden_library", "computes outside your kernels"),
    "jax": ("forbidden_library", "computes outside your kernels"),
    "tensorflow": ("forbidden_library", "computes outside your kernels"),
    "torch.utils.cpp_extension": ("forbidden_library", "compiles and loads code past the build"),
    "torch.cuda.jiterator": ("forbidden_library", "compiles kernels at run time"),
    "torch.ops.load_library": ("forbidden_library", "loads native libraries past the build"),
    "torch.library": ("forbidden_library", "registers operators past the build"),
    "sys.modules": ("computed_name", "reaches modules by computed names"),
}
# Names whose aliases are followed (`T = torch`, `ext = cuda_extension`, `k = cuda_extension.k`).
_TRACKED = ("torch", "cuda_extension", *FORBIDDEN_MODULES)
# What the usual names mean where the module does not bind them itself.
CONVENTIONAL = {"torch": "torch", "F": "torch.nn.functional", "nn": "torch.nn"}


class ModuleNames:
    """What the module's names stand for: local name -> dotted target (`F` -> `torch.nn.functional`)."""

    def __init__(self, tree: ast.Module) -> None:
        self.targets: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".")[0]
                    self.targets[local] = alias.name if alias.asname else local
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.targets[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for _ in range(3):  # `T = torch`, then `G = T.nn.functional`
            for node in ast.walk(tree):
                if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                    continue
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    key = target.id
                elif (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    key = f"self.{target.attr}"  # a held reference: `self.k = cuda_extension.k`
                else:
                    continue
                resolved = self.resolve(node.value)
                if resolved is not None and resolved.split(".")[0] in _TRACKED:
                    self.targets[key] = resolved

    def resolve(self, node: ast.AST) -> str | None:
        """`T.nn.functional.relu` -> `torch.nn.functional.relu`, through the module's aliases; a
        constant getattr is an attribute (`getattr(torch, "relu")` -> `torch.relu`)."""
        parts: list[str] = []
        while True:
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "type"
                and len(node.args) == 1
            ):
                parts.append("__class__")  # type(x) is x's class: what it reaches, x reaches
                node = node.args[0]
            elif isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                parts.append(node.args[1].value)
                node = node.args[0]
            else:
                break
        if not isinstance(node, ast.Name):
            return None
        if node.id == "self" and parts and (held := self.targets.get(f"self.{parts[-1]}")):
            return ".".join([held, *reversed(parts[:-1])])
        head = self.targets.get(node.id, CONVENTIONAL.get(node.id))
        return ".".join([head, *reversed(parts)]) if head else None


def torch_compute(dotted: str, *, called: bool) -> bool:
    """Whether the torch name computes (a call of it, or handing it around)."""
    parts = dotted.split(".")
    if parts[0] != "torch" or len(parts) < 2:
        return False
    if parts[1] == "nn":
        if len(parts) >= 3 and parts[2] == "functional":
            return len(parts) > 3
        return called and len(parts) >= 3 and parts[-1] not in HOLDERS and parts[-1] not in ("init",)
    if parts[1] in _TORCH_COMPUTE_MODULES:
        return len(parts) > 2 or parts[1] == "compile"
    if parts[1] == "Tensor" and len(parts) == 3:
        return computes(parts[2])
    if len(parts) == 2:
        if called:
            return (parts[1] not in ALLOWED_TORCH_CALLS and computes(parts[1])) or parts[1] in (
                "compile",
                "vmap",
            )
        return computes(parts[1])
    return False


def spelled(node: ast.AST, dotted: str) -> str:
    """The name as written, with what it resolves to where that differs (`F.gelu (torch.nn.functional.gelu)`)."""
    written = ast.unparse(node)
    return written if written == dotted else f"{written} ({dotted})"


def forbidden(dotted: str, language: KernelLanguage = "cuda") -> tuple[str, str] | None:
    """(rule, why) where the name is refused in a workspace of `language`, else None."""
    if language == "triton" and (dotted == "triton" or dotted.startswith("triton.")):
        return triton_rule(dotted)
    for module, rule in FORBIDDEN_MODULES.items():
        if dotted == module or dotted.startswith(module + "."):
            return rule
    return None
