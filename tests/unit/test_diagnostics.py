"""Parsing of compiler, ptxas and linker output (texts recorded from nvcc 13.0, g++ 12 and GNU ld)."""

from __future__ import annotations

from cuda_agent_mcp.build.diagnostics import (
    parse_compiler_output,
    parse_ptxas_resources,
    parse_unresolved_symbols,
)

NVCC_ERRORS = """\
kernels/relu.cu(6): error: identifier "undefined_name" is undefined
   int broken = undefined_name;
                ^

kernels/relu.cu(9): warning #177-D: variable "unused" was declared but never referenced
    int unused = 3;
        ^

Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"

1 error detected in the compilation of "kernels/relu.cu".
"""

GCC_ERROR = """\
kernels/relu_binding.cpp: In function 'at::Tensor relu_forward(const at::Tensor&)':
kernels/relu_binding.cpp:12:3: error: expected ';' before 'relu_launcher'
   12 |   relu_launcher(input.data_ptr<float>(), out.data_ptr<float>(), input.numel(),
      |   ^~~~~~~~~~~~~
"""

PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z1tILi64EEvPf' for 'sm_90'
ptxas info    : Function properties for _Z1tILi64EEvPf
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 356 bytes cmem[0]
ptxas info    : Compile time = 2.684 ms
ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'
ptxas info    : Function properties for _Z1kPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 4096 bytes smem
ptxas error   : Entry function '_Z1kPf' uses too much shared data (0x10000 bytes, 0xc000 max)
"""

LINK = """\
/usr/bin/ld: /cache/objects/ab/abc123.o: in function `relu_forward(at::Tensor const&)':
relu_binding.cpp:(.text+0x5): undefined reference to `relu_launcher'
/usr/bin/ld: /cache/objects/ab/abc123.o: warning: undefined reference to `PyTuple_New'
/usr/bin/ld: /cache/objects/cd/cde456.o: in function `pybind11_init':
binding.cpp:(.text+0x9): undefined reference to `_Py_Dealloc'
"""


def test_nvcc_front_end_errors_and_warnings_are_located_with_a_column() -> None:
    source = {
        ("kernels/relu.cu", 6): "  int broken = undefined_name;",
        ("kernels/relu.cu", 9): "  int unused = 3;",
    }
    found = parse_compiler_output(
        NVCC_ERRORS,
        tool="nvcc",
        path_map={},
        unit_file="kernels/relu.cu",
        source_line=lambda f, n: source.get((f, n)),
    )
    assert [(d.file, d.line, d.column, d.severity) for d in found] == [
        ("kernels/relu.cu", 6, 16, "error"),
        ("kernels/relu.cu", 9, 7, "warning"),
    ]
    assert found[0].message == 'identifier "undefined_name" is undefined'
    assert found[0].tool == "nvcc"


def test_host_compiler_errors_keep_their_line_and_column() -> None:
    (error,) = parse_compiler_output(GCC_ERROR, tool="c++", path_map={}, unit_file="kernels/relu_binding.cpp")
    assert (error.file, error.line, error.column, error.tool) == ("kernels/relu_binding.cpp", 12, 3, "c++")
    assert error.message == "expected ';' before 'relu_launcher'"


def test_staging_paths_are_mapped_back_to_workspace_paths() -> None:
    output = "/tmp/stage/kernels/a.cu(3): error: oops\n"
    (error,) = parse_compiler_output(
        output, tool="nvcc", path_map={"/tmp/stage/kernels/a.cu": "kernels/a.cu"}, unit_file="kernels/a.cu"
    )
    assert error.file == "kernels/a.cu" and error.line == 3


def test_ptxas_errors_are_attributed_to_the_unit_and_resources_parsed_per_kernel() -> None:
    found = parse_compiler_output(PTXAS, tool="nvcc", path_map={}, unit_file="kernels/k.cu")
    assert [(d.file, d.severity, d.tool) for d in found] == [("kernels/k.cu", "error", "ptxas")]
    kernels = parse_ptxas_resources(
        PTXAS, file="kernels/k.cu", demangle=lambda names: [n.upper() for n in names]
    )
    assert [(k.mangled_name, k.name) for k in kernels] == [
        ("_Z1tILi64EEvPf", "_Z1TILI64EEVPF"),
        ("_Z1kPf", "_Z1KPF"),
    ]
    templated, tiled = kernels
    assert (templated.registers, templated.stack_frame_bytes, templated.spill_stores_bytes) == (8, 8, 4)
    assert (templated.spill_loads_bytes, templated.constant_memory_bytes) == (12, 356)
    assert (tiled.registers, tiled.shared_memory_bytes, tiled.barriers, tiled.arch) == (10, 4096, 1, "sm_90")


def test_unresolved_symbols_are_errors_except_the_python_c_api() -> None:
    (error,) = parse_unresolved_symbols(
        LINK, {"abc123.o": "kernels/relu_binding.cpp", "cde456.o": "binding.cpp"}
    )
    assert error.file == "kernels/relu_binding.cpp"
    assert "relu_launcher" in error.message
    assert error.severity == "error" and error.tool == "linker"


def test_real_demangling_reads_kernel_names() -> None:
    from cuda_agent_mcp.build.diagnostics import demangle

    assert demangle(["_Z1kPf", "plain_c_name"]) in (["k(float*)", "plain_c_name"], ["_Z1kPf", "plain_c_name"])


PTXAS_ON_GENERATED_PTX = """\
ptxas /tmp/tmpxft_00004092_00000000-7_w.compute_90.ptx, line 31; error   : Instruction 'wgmma.fence' not supported on .target 'sm_90'
ptxas fatal   : Ptx assembly aborted due to errors
"""


def test_ptxas_errors_in_generated_ptx_keep_their_reason_and_not_the_temporary_file() -> None:
    found = parse_compiler_output(
        PTXAS_ON_GENERATED_PTX, tool="nvcc", path_map={}, unit_file="kernels/wgmma.cu"
    )
    assert [(d.file, d.line, d.severity, d.tool) for d in found] == [
        ("kernels/wgmma.cu", None, "error", "ptxas"),
        ("kernels/wgmma.cu", None, "error", "ptxas"),
    ]
    assert found[0].message == "Instruction 'wgmma.fence' not supported on .target 'sm_90'"
    assert not any("/tmp" in d.message for d in found)
