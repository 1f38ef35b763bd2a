"""Kernel names matched on the function name alone (no return type, no parameter list): ptxas (the
build's, demangled), CUPTI (the judge's trace) and Nsight Compute (the profile's ncu pass) spell
signatures differently.

Whether a name had a parameter list still counts: all three tools print an extern "C" kernel's name
bare (`relu`) and a C++ kernel's with its parameters (`relu(float*)`), so a library kernel of C++
linkage never passes for a workspace's extern "C" kernel of the same bare name. Library kernels that
are named bare themselves (cuBLAS, cuDNN, Inductor) cannot be told apart by name at all: their naming
schemes are reserved (`library_lookalike`).
"""

import re

# How vendor and PyTorch kernels are named where a workspace could copy the name exactly: arch-prefixed
# cuBLAS/cuDNN kernels (`sm90_xmma_gemm_..._cublas`, `ampere_sgemm_128x64_nn`, `nvjet_tst_...`),
# Inductor's `triton_*`, CUTLASS instantiations, and PyTorch's own namespaces (a C++ kernel declared
# there, templates included, demangles to the very name of PyTorch's).
_LIBRARY_NAMING = re.compile(
    r"^(?:sm_?\d{2,3}[a-z]?_|(?:ampere|volta|turing|maxwell|kepler|hopper|blackwell)_|nvjet_|triton_"
    r"|(?:at|c10|torch|at_cuda_detail|pytorch_flash|cudnn|cutlass)::)|xmma|cublas|cudnn|cutlass",
    re.IGNORECASE,
)


def _split(name: str) -> tuple[str, bool]:
    """(the name without return type and parameter list, whether it had a parameter list)."""
    head = name.strip().replace("(anonymous namespace)", "{anonymous}")
    depth = 0
    params = False
    for index, char in enumerate(head):  # cut at the parameter list, not inside template arguments
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "(" and depth == 0:
            head, params = head[:index], True
            break
    head = head.strip()
    if head.startswith("void "):
        head = head[len("void ") :]
    return head.strip(), params


def kernel_key(name: str) -> str:
    """`void ns::relu<4>(float const*, float*, long)` -> `ns::relu<4>`."""
    return _split(name)[0]


def kernel_identity(name: str) -> tuple[str, bool]:
    """What must agree for a traced kernel to be a built one: the key, and whether the name had a
    parameter list (C++ linkage) or not (extern "C")."""
    return _split(name)


def library_lookalike(name: str) -> bool:
    """Whether the name is spelled as a vendor library, Inductor or PyTorch names its kernels: the trace
    could not tell the workspace's kernel from theirs, so it is never credited as the workspace's."""
    return _LIBRARY_NAMING.search(kernel_key(name)) is not None
