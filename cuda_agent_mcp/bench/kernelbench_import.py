"""Import a KernelBench single-file solution (ModelNew + `load_inline`) into the workspace layout.

Nothing of the solution runs in this process and nothing is compiled inside the evaluation worker. A
sandboxed child (`_kernelbench_child.py`) executes the file with torch's extension loaders replaced by
recorders and reports the sources each call would have built; this module then writes them as workspace
files the project's builder compiles and caches like any other:

    kernels/<name>.cu            the call's cuda_sources, after the headers load_inline adds
    kernels/<name>_binding.cpp   its cpp_sources, then the bindings load_inline would have generated,
                                 registered with the harness (REGISTER_BINDING)
    model_new.py                 the solution, each loader call replaced by the built `cuda_extension`

The `.cu` files include torch's headers, so they build only under the kernelbench rule set (the task's
`torch_headers_in_cuda`). The loaders' extra flags are ignored (the project's fixed flags apply) and
said so in the notes. Whatever the child reports is untrusted data: it is validated and size-capped.

KernelBench's Triton format (the file imports `triton`: `@triton.jit` kernels launched from `ModelNew`)
is a Triton workspace's `model_new.py` as it stands: nothing is extracted, so no child runs (the Triton
build imports it, confined, and compiles every launch it records).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuda_agent_mcp.executors import Executor, ProcessLimits, isolating_executor
from cuda_agent_mcp.executors.local import scrubbed_env
from cuda_agent_mcp.results import KernelLanguage
from cuda_agent_mcp.tools.run import runtime_paths

CHILD = Path(__file__).with_name("_kernelbench_child.py")
MAX_SOLUTION_BYTES = 1 << 20
_SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cuh", ".h", ".hpp")
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")
_PYBIND_MODULE = re.compile(r"PYBIND11_MODULE\s*\(\s*\w+\s*,\s*(\w+)\s*\)")
_LOADERS = {"load_inline", "load"}
# The headers load_inline puts before each kind of source (torch/utils/cpp_extension.py).
_CUDA_HEADERS = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
_CPP_HEADERS = "#include <torch/extension.h>\n"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _ChildCall(_Frozen):
    kind: Literal["load_inline", "load"]
    name: str = Field(max_length=200)
    cpp_sources: list[str] = Field(max_length=64)
    cuda_sources: list[str] = Field(max_length=64)
    functions: list[str] | dict[str, str] | None
    flags: list[str] = Field(max_length=256)
    include_paths: list[str] = Field(max_length=64)
    no_implicit_headers: bool
    sources: dict[str, str] = Field(max_length=32)


class _ChildReport(_Frozen):
    calls: list[_ChildCall] = Field(max_length=16)
    has_model_new: bool
    error: str | None = Field(default=None, max_length=4000)
    traceback: str | None = Field(default=None, max_length=6000)


class ImportedCall(_Frozen):
    """One loader call of the solution and the workspace files it became."""

    kind: Literal["load_inline", "load"]
    name: str
    functions: list[str]
    files: list[str]
    ignored_flags: list[str] = Field(default_factory=list)


class KernelBenchImport(_Frozen):
    """The outcome of importing one solution file: the workspace files, or why there are none."""

    ok: bool
    source: str = Field(description="the solution file")
    language: KernelLanguage = Field(
        default="cuda", description="the workspace language the files are for: cuda (load_inline) or triton"
    )
    message: str = Field(default="", description="why the import failed: one line the author can act on")
    files: dict[str, str] = Field(default_factory=dict, description="workspace path -> content")
    calls: list[ImportedCall] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    log_tail: str = ""


async def import_kernelbench_solution(
    path: Path, *, executor: Executor, scratch_root: Path, timeout_s: float = 120.0
) -> KernelBenchImport:
    """Extract the sources of `path` in a sandboxed child and lay them out as workspace files."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return KernelBenchImport(ok=False, source=source, message=f"cannot read the solution: {exc}")
    if len(raw) > MAX_SOLUTION_BYTES:
        return KernelBenchImport(ok=False, source=source, message="the solution is larger than 1 MiB")
    try:
        code = raw.decode("utf-8")
        tree = ast.parse(code, filename=path.name)
    except (UnicodeDecodeError, SyntaxError) as exc:
        return KernelBenchImport(ok=False, source=source, message=f"not a Python file: {exc}")
    if imports_triton(tree):
        return _lay_out_triton(source, code, tree)
    scratch_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kernelbench-import-", dir=scratch_root) as tmp:
        work = Path(tmp)
        report, log = await _extract(path, code, work, executor, timeout_s)
    if isinstance(report, str):
        return KernelBenchImport(ok=False, source=source, message=report, log_tail=log)
    if report.error is not None:
        return KernelBenchImport(
            ok=False,
            source=source,
            message=f"the solution raised while it was imported: {report.error}",
            log_tail=report.traceback or "",
        )
    return _lay_out(source, code, tree, report)


async def _extract(
    path: Path, code: str, work: Path, executor: Executor, timeout_s: float
) -> tuple[_ChildReport | str, str]:
    (work / "solution.py").write_text(code)
    shutil.copy(CHILD, work / CHILD.name)
    for sibling in sorted(path.parent.iterdir())[:256]:  # sources a `load(sources=[...])` call may name
        if (
            sibling.suffix in _SOURCE_SUFFIXES
            and sibling.is_file()
            and sibling.stat().st_size <= MAX_SOLUTION_BYTES
        ):
            shutil.copy(sibling, work / sibling.name)
    sandbox = isolating_executor(executor)
    result = await sandbox.run(
        [sys.executable, "-I", CHILD.name, "solution.py", "extracted.json"],
        cwd=work,
        limits=ProcessLimits(timeout_s=timeout_s, max_output_bytes=1 << 20),
        env=scrubbed_env({"CUDA_VISIBLE_DEVICES": ""}),  # extraction never needs a GPU
        readable=runtime_paths(""),
    )
    log = result.output[-3000:]
    if result.timed_out:
        return f"importing the solution took longer than {timeout_s:.0f} s", log
    out = work / "extracted.json"
    if not out.is_file() or out.stat().st_size > 8 * MAX_SOLUTION_BYTES:
        return f"the import child produced no report (exit {result.returncode})", log
    try:
        return _ChildReport.model_validate(json.loads(out.read_text())), log
    except (ValueError, ValidationError) as exc:
        return f"the import child's report is malformed: {str(exc).splitlines()[0]}", log


def _lay_out(source: str, code: str, tree: ast.Module, report: _ChildReport) -> KernelBenchImport:
    def failed(message: str) -> KernelBenchImport:
        return KernelBenchImport(ok=False, source=source, message=message)

    if not report.has_model_new:
        return failed("the solution defines no class ModelNew")
    sites = loader_calls(tree)
    if not report.calls:
        where = " (call load_inline at module level, not in ModelNew)" if sites else ""
        return failed(f"the solution builds no extension: no load_inline or load call ran on import{where}")
    if len(sites) != len(report.calls):
        return failed(
            f"{len(report.calls)} load_inline/load call(s) ran on import but {len(sites)} appear in the source: "
            "call them once each, at module level"
        )
    files: dict[str, str] = {}
    calls: list[ImportedCall] = []
    notes: list[str] = []
    used: set[str] = set()
    for call in report.calls:
        name = _unique(re.sub(r"\W", "_", call.name) or "ext", used)
        laid = _lay_out_call(call, name)
        if isinstance(laid, str):
            return failed(laid)
        files |= laid[0]
        calls.append(
            ImportedCall(
                kind=call.kind,
                name=call.name,
                functions=laid[1],
                files=sorted(laid[0]),
                ignored_flags=[f for f in call.flags if f.strip()],
            )
        )
        if flags := [f for f in call.flags if f.strip()]:
            notes.append(f"{call.name}: flags {flags} ignored (the project's fixed flags apply)")
        if call.include_paths:
            notes.append(f"{call.name}: include paths {call.include_paths} ignored")
    files["model_new.py"] = rewrite_model_new(code, sites)
    return KernelBenchImport(ok=True, source=source, files=files, calls=calls, notes=notes)


def imports_triton(tree: ast.Module) -> bool:
    """Whether a solution is written in Triton: it imports `triton` (or a module of it) anywhere."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "triton" for a in node.names):
            return True
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "triton"
        ):
            return True
    return False


def solution_language(code: str) -> KernelLanguage:
    """The workspace language a single-file solution is imported into: triton where it imports Triton,
    else cuda (load_inline); cuda where it is not Python (its import then says why)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return "cuda"
    return "triton" if imports_triton(tree) else "cuda"


def _lay_out_triton(source: str, code: str, tree: ast.Module) -> KernelBenchImport:
    """A Triton solution is its workspace's model_new.py, unchanged."""

    def failed(message: str) -> KernelBenchImport:
        return KernelBenchImport(ok=False, source=source, language="triton", message=message)

    if not any(isinstance(node, ast.ClassDef) and node.name == "ModelNew" for node in tree.body):
        return failed("the solution defines no class ModelNew (at module level)")
    if loader_calls(tree):
        return failed(
            "the solution imports Triton and also builds an extension with load_inline/load: a solution is "
            "one kernel language, Triton kernels or a CUDA extension"
        )
    note = "a Triton solution: laid out as a Triton workspace's model_new.py, unchanged"
    return KernelBenchImport(
        ok=True, source=source, language="triton", files={"model_new.py": code}, notes=[note]
    )


def _lay_out_call(call: _ChildCall, name: str) -> tuple[dict[str, str], list[str]] | str:
    """The workspace files of one loader call and the functions it binds, or why it cannot be laid out."""
    files: dict[str, str] = {}
    origin = f'// Imported by cuda-agent-mcp from load_inline(name="{call.name}")'
    if call.kind == "load":
        return _lay_out_load(call, name)
    if call.cuda_sources:
        headers = "" if call.no_implicit_headers else _CUDA_HEADERS
        files[f"kernels/{name}.cu"] = (
            f"{origin}: its cuda_sources.\n{headers}" + "\n".join(call.cuda_sources) + "\n"
        )
    functions = call.functions
    names = list(functions) if functions is not None else []
    if bad := [f for f in names if not _IDENTIFIER.match(f)]:
        return f"{call.name}: functions {bad} are not C++ identifiers"
    cpp = "\n".join(call.cpp_sources)
    if functions is None:
        if not _PYBIND_MODULE.search(cpp):
            return (
                f"{call.name}: neither functions=[...] nor a PYBIND11_MODULE in cpp_sources: nothing to call"
            )
        body = _as_registration(cpp, name)
    else:
        docs = functions if isinstance(functions, dict) else {f: f for f in functions}
        defs = "\n".join(
            f"  m.def({json.dumps(f)}, torch::wrap_pybind_function({f}), {json.dumps(doc)});"
            for f, doc in docs.items()
        )
        body = (
            f"{cpp}\n\nstatic void cuda_agent_register_{name}(pybind11::module& m) {{\n{defs}\n}}\n\n"
            f"REGISTER_BINDING({name}, cuda_agent_register_{name})\n"
        )
    headers = "" if call.no_implicit_headers else _CPP_HEADERS
    files[f"kernels/{name}_binding.cpp"] = (
        f"{origin}: its cpp_sources and the bindings load_inline generates.\n{headers}"
        f'#include "../binding_registry.h"\n{body}'
    )
    return files, names


def _lay_out_load(call: _ChildCall, name: str) -> tuple[dict[str, str], list[str]] | str:
    files: dict[str, str] = {}
    modules = 0
    for filename, text in call.sources.items():
        _, dot, suffix = filename.rpartition(".")
        if not dot or f".{suffix}" not in _SOURCE_SUFFIXES or not re.fullmatch(r"[\w.-]+", filename):
            return f"{call.name}: cannot import the source file {filename!r}"
        if f".{suffix}" in (".cpp", ".cc") and _PYBIND_MODULE.search(text):
            modules += 1
            text = '#include "../binding_registry.h"\n' + _as_registration(text, f"{name}_{modules}")
        files[f"kernels/{filename}"] = text
    if modules == 0:
        return f"{call.name}: no source of load(...) defines a PYBIND11_MODULE: nothing to call"
    return files, []


def _as_registration(cpp: str, name: str) -> str:
    """A PYBIND11_MODULE block turned into a function the harness's single module applies."""
    body = _PYBIND_MODULE.sub(rf"static void cuda_agent_module_{name}(pybind11::module& \1)", cpp, count=1)
    return f"{body}\n\nREGISTER_BINDING({name}, cuda_agent_module_{name})\n"


def loader_calls(tree: ast.Module) -> list[ast.Call]:
    """Calls of torch's `load_inline`/`load` however the solution imported them."""
    direct: set[str] = set()  # names bound to the functions themselves
    modules = {"torch.utils.cpp_extension"}  # names bound to the module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "torch.utils.cpp_extension":
            direct |= {a.asname or a.name for a in node.names if a.name in _LOADERS}
        elif isinstance(node, ast.ImportFrom) and node.module == "torch.utils":
            modules |= {a.asname or a.name for a in node.names if a.name == "cpp_extension"}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == "torch.utils.cpp_extension" and a.asname}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Name) and func.id in direct) or (
            isinstance(func, ast.Attribute) and func.attr in _LOADERS and ast.unparse(func.value) in modules
        ):
            found.append(node)
    return found


def rewrite_model_new(code: str, sites: list[ast.Call]) -> str:
    """The solution with each loader call replaced, in place, by the built module `cuda_extension`."""
    lines = code.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode("utf-8")))
    data = code.encode("utf-8")
    spans = sorted(
        (
            offsets[n.lineno - 1] + n.col_offset,
            offsets[(n.end_lineno or n.lineno) - 1] + (n.end_col_offset or 0),
        )
        for n in sites
    )
    for start, end in reversed(spans):
        data = data[:start] + b"cuda_extension" + data[end:]
    text = _without_unused_loader_imports(data.decode("utf-8"))
    marker = (
        "import cuda_extension  # the extension built from this file's load_inline sources (cuda-agent)\n"
    )
    return _after_future_imports(text, marker)


def _without_unused_loader_imports(text: str) -> str:
    """Drop `from torch.utils.cpp_extension import load_inline, load` (and `from torch.utils import
    cpp_extension`) once no call of them is left: the import alone is what the audit refuses (code that
    compiles and loads past the build), and after the rewrite nothing uses it."""
    tree = ast.parse(text)
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    used |= {ast.unparse(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    lines = text.splitlines(keepends=True)
    for node in reversed(tree.body):
        if not isinstance(node, ast.ImportFrom):
            continue
        names = {a.asname or a.name for a in node.names}
        loader = node.module == "torch.utils.cpp_extension" or (
            node.module == "torch.utils" and {a.name for a in node.names} == {"cpp_extension"}
        )
        if loader and not names & used:
            del lines[node.lineno - 1 : (node.end_lineno or node.lineno)]
    return "".join(lines)


def _after_future_imports(text: str, line: str) -> str:
    tree = ast.parse(text)
    last = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            last = node.end_lineno or node.lineno
    lines = text.splitlines(keepends=True)
    return "".join([*lines[:last], line, *lines[last:]])


def _unique(name: str, used: set[str]) -> str:
    candidate, n = name, 1
    while candidate in used:
        n += 1
        candidate = f"{name}_{n}"
    used.add(candidate)
    return candidate
