"""Compile a Triton workspace's kernels in the build's view (the Triton language's "compiler").

    python -I .../cuda_agent_mcp/build/triton_compile.py --reference REF.py --out OUT_DIR --capability 90
        [--wait SECONDS]   (started ahead: imports first, then wait for staging to be filled)

Run in the staging directory, which holds the candidate's Python modules. It imports them, runs
`ModelNew` on the meta device (the reference's `get_init_inputs()` and `get_inputs()`: shapes, no data)
with every kernel launch recorded instead of run, and compiles each distinct launch (every config of an
autotuned kernel) for the GPU with `triton.compile`, down to a cubin. It writes `OUT_DIR/report.json`:

    {"kernels": [{"name", "file", "line"}],          every @triton.jit function the modules define
     "compiled": [{"kernel", "cubin", "shared", "num_warps", "num_stages", "launch"}],
     "diagnostics": [{"file", "line", "column", "severity", "message"}],
     "traced": bool, "seconds": {"import", "load", "trace", "compile"}}

and each cubin beside it. Exit status 0 when nothing failed to compile, 1 when something did, 2 when
Triton cannot be used here. Candidate code runs in this process, so the builder trusts nothing of the
report but its diagnostics: kernel names come from its own reading of the sources, registers from the
cubins. Launches that cannot be recorded (a forward that needs real data or a GPU) are a warning: their
kernels are compiled at the evaluation's first call instead. A launch whose arguments do not fit its
kernel (one missing, one too many, a keyword it has no parameter for) is an error at the launch's line:
the JIT would raise at the first call.

Standard library, torch and Triton only: it runs as a script, not as part of the package.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import Any

MAX_COMPILES = 64
GO_FILE = ".go"  # written by the builder into staging once a started-ahead process may begin
EXTRA_POSITIONAL = "*args"  # a launch's count of positional arguments, where there are more than parameters
_DTYPES = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int64": "i64",
    "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "uint16": "u16", "uint32": "u32",
    "uint64": "u64", "bool": "i1", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
}  # fmt: skip


class Report:
    def __init__(self, staging: str) -> None:
        self.staging = staging
        self.kernels: list[dict[str, Any]] = []
        self.compiled: list[dict[str, Any]] = []
        self.diagnostics: list[dict[str, Any]] = []
        self.traced = False
        self.seconds: dict[str, float] = {}
        self._clock = time.perf_counter()

    def lap(self, phase: str) -> None:
        """Wall time since the last lap, as this phase's (import, load, trace, compile)."""
        now = time.perf_counter()
        self.seconds[phase] = round(now - self._clock, 3)
        self._clock = now

    def add(self, severity: str, message: str, file: str | None = None, line: int | None = None,
            column: int | None = None) -> None:  # fmt: skip
        self.diagnostics.append(
            {"file": file, "line": line, "column": column, "severity": severity, "message": message}
        )

    def add_exception(self, severity: str, what: str, exc: BaseException) -> None:
        """An exception, placed at the innermost frame in a workspace file."""
        file = line = None
        for frame in traceback.extract_tb(exc.__traceback__):
            relative = self.relative(frame.filename)
            if relative is not None:
                file, line = relative, frame.lineno
        text = str(exc).strip().splitlines()
        self.add(severity, f"{what}: {type(exc).__name__}: {text[-1] if text else ''}"[:1000], file, line)

    def relative(self, path: str) -> str | None:
        path = os.path.abspath(path)
        inside = path.startswith(self.staging + os.sep) and os.path.dirname(path) == self.staging
        return os.path.basename(path) if inside else None

    def write(self, out: str) -> None:
        with open(os.path.join(out, "report.json"), "w") as handle:
            json.dump(
                {
                    "kernels": self.kernels,
                    "compiled": self.compiled,
                    "diagnostics": self.diagnostics,
                    "traced": self.traced,
                    "seconds": self.seconds,
                },
                handle,
            )


def load(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def jit_functions(report: Report) -> dict[int, Any]:
    """Every JITFunction defined in a workspace module (unwrapping autotune and heuristics)."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction

    found: dict[int, Any] = {}
    modules = [m for m in list(sys.modules.values()) if report.relative(getattr(m, "__file__", None) or "")]
    for module in modules:
        for value in list(vars(module).values()):
            while isinstance(value, Autotuner | Heuristics):  # autotune(heuristics(jit(f)))
                value = value.fn
            if not isinstance(value, JITFunction) or id(value) in found:
                continue
            code = getattr(value.fn, "__code__", None)
            file = report.relative(code.co_filename) if code is not None else None
            if file is not None:
                found[id(value)] = value
                report.kernels.append({"name": value.__name__, "file": file, "line": def_line(value)})
    return found


def def_line(jit: Any) -> int:
    """The line of the function's `def` (its code object starts at the first decorator)."""
    import inspect

    lines, start = inspect.getsourcelines(jit.fn)
    offset = next((i for i, text in enumerate(lines) if text.lstrip().startswith("def ")), 0)
    return start + offset


def capture(run_model: Any, relative: Any) -> list[tuple[Any, dict[str, Any], tuple[str | None, int | None]]]:
    """Run `run_model()` with every launch recorded as (JITFunction, bound arguments, the launch's
    file and line in the workspace) and skipped. `relative` is `Report.relative`."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    launches: list[tuple[Any, dict[str, Any], tuple[str | None, int | None]]] = []

    def jit_run(self: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> None:
        bound = {**dict(zip(self.arg_names, args, strict=False)), **kwargs}
        if len(args) > len(self.arg_names):  # checked with the rest in typed_launch
            bound[EXTRA_POSITIONAL] = len(args)
        launches.append((self, bound, launch_site(relative)))

    def tuner_run(self: Any, *args: Any, **kwargs: Any) -> None:
        for config in self.configs:  # every config: each must compile
            self.fn.run(*args, **{**kwargs, **config.all_kwargs()})

    saved = (JITFunction.run, Autotuner.run)
    JITFunction.run, Autotuner.run = jit_run, tuner_run
    try:
        run_model()
    finally:
        JITFunction.run, Autotuner.run = saved
    return launches


class LaunchMismatch(TypeError):
    """A launch whose arguments do not fit the kernel's parameters: it fails at the first call too."""


def launch_site(relative: Any) -> tuple[str | None, int | None]:
    """The innermost frame of the caller's stack in a workspace module: where the launch is written."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        file = relative(frame.f_code.co_filename)
        if file is not None:
            return file, frame.f_lineno
        frame = frame.f_back
    return None, None


def typed_launch(fn: Any, bound: dict[str, Any], backend: Any) -> tuple[Any, dict[str, Any], str]:
    """(ASTSource, options, a description) of one launch, typed as Triton's JIT types it."""
    import torch
    from triton.compiler import ASTSource

    if EXTRA_POSITIONAL in bound:
        raise LaunchMismatch(
            f"it takes {len(fn.params)} arguments but was launched with {bound[EXTRA_POSITIONAL]} positional ones"
        )
    known = {p.name for p in fn.params} | set(vars(backend.parse_options({})))
    if unknown := sorted(set(bound) - known):
        raise LaunchMismatch(
            f"it has no parameter {', '.join(unknown)} (besides its parameters, a launch takes only options "
            "such as num_warps and num_stages)"
        )
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    attrs: dict[tuple[int, ...], Any] = {}
    for index, param in enumerate(fn.params):
        if param.name in bound:
            value = bound[param.name]
        elif getattr(param, "has_default", False):
            value = param.default
        else:
            raise LaunchMismatch(f"it is launched without a value for its parameter {param.name}")
        if param.is_constexpr or value is None:
            signature[param.name] = "constexpr"
            constexprs[param.name] = value
            continue
        aligned = False
        if isinstance(value, torch.Tensor):
            kind = _DTYPES.get(str(value.dtype).removeprefix("torch."))
            if kind is None:
                raise TypeError(f"{param.name}: a tensor of {value.dtype}, which this check cannot type")
            signature[param.name] = "*" + kind
            aligned = value.data_ptr() % 16 == 0  # meta tensors: 0, as aligned as torch's allocations
        elif isinstance(value, bool):
            signature[param.name] = "i1"
        elif isinstance(value, int):
            signature[param.name] = "i32" if -(2**31) <= value < 2**31 else "i64"
            aligned = value % 16 == 0
        elif isinstance(value, float):
            signature[param.name] = "fp32"
        else:
            raise TypeError(f"{param.name}={type(value).__name__}, which this check cannot type")
        if aligned:
            attrs[(index,)] = backend.parse_attr("D")
    options: dict[str, Any] = {
        k: bound[k] for k in ("num_warps", "num_stages", "num_ctas", "maxnreg") if k in bound
    }
    described = ", ".join(
        f"{k}={v}" if k in constexprs else f"{k}:{t}"
        for k, t in signature.items()
        for v in [constexprs.get(k)]
    )
    extra = "".join(f", {k}={v}" for k, v in options.items())
    return (
        ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
        options,
        f"{described}{extra}",
    )


def compile_error(report: Report, kernels: dict[int, Any], fn: Any, exc: BaseException) -> None:
    """A compile error at its line: Triton's CompilationError names a node of the function it was in."""
    node = getattr(exc, "node", None)
    source = getattr(exc, "src", None)
    where = next((k for k in kernels.values() if source is not None and k.src == source), fn)
    file = report.relative(where.fn.__code__.co_filename)
    base = def_line(where)
    message = (
        getattr(exc, "error_message", None) or (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
    )
    if node is not None and getattr(node, "lineno", None):
        report.add(
            "error", f"in {where.__name__}: {message}", file, base + node.lineno - 1, node.col_offset + 1
        )
    else:
        report.add("error", f"in {where.__name__}: {type(exc).__name__}: {message}"[:1000], file, base)


def warm_up(capability: int) -> None:
    """First uses a process started ahead pays before it waits: the meta device, Triton's compiler."""
    import torch
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    with torch.device("meta"):  # get_inputs() draws on the meta device through torch._refs: 0.6 s at first
        torch.randn(2, 4).contiguous()
        torch.rand(2, 4)
        torch.randint(0, 4, (2,))

    @triton.jit
    def _warm_up(x_ptr, BLOCK: tl.constexpr) -> None:  # type: ignore[no-untyped-def]  # Triton reads annotations
        tl.store(x_ptr + tl.arange(0, BLOCK), tl.zeros([BLOCK], dtype=tl.float32))

    source = ASTSource(
        fn=_warm_up, signature={"x_ptr": "*fp32", "BLOCK": "constexpr"}, constexprs={"BLOCK": 32}
    )
    triton.compile(source, target=GPUTarget("cuda", capability, 32))


def wait_for_work(seconds: float) -> bool:
    """A process started ahead (imports paid) waits for the builder to fill staging and write GO_FILE;
    it gives up after `seconds`, or as soon as the process that started it is gone."""
    parent = os.getppid()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and os.getppid() == parent:
        if os.path.exists(GO_FILE):
            return True
        time.sleep(0.005)
    return False


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reference", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--capability", type=int, required=True)
    parser.add_argument("--wait", type=float, default=0.0, help="started ahead: wait this long for GO_FILE")
    args = parser.parse_args()
    staging = os.path.abspath(os.getcwd())
    report = Report(staging)
    os.makedirs(args.out, exist_ok=True)
    try:
        import torch
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import make_backend
    except Exception as exc:  # no Triton where the build runs
        report.add("error", f"Triton cannot be imported where the build runs: {type(exc).__name__}: {exc}")
        report.write(args.out)
        return 2
    report.lap("import")
    if args.wait > 0:
        warm_up(args.capability)
        if not wait_for_work(args.wait):
            return 3
        report.seconds.clear()
        report.lap("wait")
    sys.path.insert(0, staging)
    try:
        reference = load(args.reference, "_cuda_agent_reference")
        model_new = load(os.path.join(staging, "model_new.py"), "model_new")
        for name in sorted(os.listdir(staging)):
            if name.endswith(".py") and name != "model_new.py" and name[:-3] not in sys.modules:
                load(os.path.join(staging, name), name[:-3])
    except BaseException as exc:  # the candidate's import failed: its error, at its line
        report.add_exception("error", "importing the workspace's modules failed", exc)
        report.write(args.out)
        return 1
    kernels = jit_functions(report)
    report.lap("load")

    def run_model() -> None:
        with torch.device("meta"), torch.no_grad():
            model = model_new.ModelNew(*reference.get_init_inputs())
            model(*reference.get_inputs())

    try:
        launches = capture(run_model, report.relative)
        report.traced = True
    except BaseException as exc:
        report.add_exception(
            "warning",
            "ModelNew could not run on the meta device to record its launches, so they were not compiled "
            "here (they compile at the evaluation's first call)",
            exc,
        )
        launches = []
    report.lap("trace")
    target = GPUTarget("cuda", args.capability, 32)
    backend = make_backend(target)
    jobs: list[tuple[Any, Any, dict[str, Any], str]] = []  # (kernel, source, options, launch)
    seen: set[str] = set()
    failed = False
    for fn, bound, (file, line) in launches:
        if file is None:
            file, line = report.relative(fn.fn.__code__.co_filename), def_line(fn)
        try:
            source, options, launch = typed_launch(fn, bound, backend)
        except LaunchMismatch as exc:  # the first call would raise it: an error here, at the launch
            failed = True
            parameters = ", ".join(p.name for p in fn.params)
            report.add("error", f"this launch of {fn.__name__}({parameters}) does not fit it: {exc}"[:1000],
                       file, line)  # fmt: skip
            continue
        except Exception as exc:
            report.add(
                "warning", f"a launch of {fn.__name__} was not compiled here: {exc}"[:1000], file, line
            )
            continue
        if (key := f"{fn.__name__}({launch})") in seen:
            continue
        seen.add(key)
        if len(jobs) == MAX_COMPILES:
            report.add(
                "note", f"more than {MAX_COMPILES} distinct launches: the rest compile at the first call"
            )
            break
        jobs.append((fn, source, options, launch))

    def compile_one(job: tuple[Any, Any, dict[str, Any], str]) -> Any:
        try:
            return triton.compile(job[1], target=target, options=job[2])
        except BaseException as exc:
            return exc

    # In threads: ptxas runs as a process, and Triton releases the GIL in parts of its lowering.
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        outcomes = list(pool.map(compile_one, jobs))
    for (fn, _source, _options, launch), compiled in zip(jobs, outcomes, strict=True):
        if isinstance(compiled, BaseException):
            failed = True
            compile_error(report, kernels, fn, compiled)
            continue
        cubin = os.path.join(args.out, f"{len(report.compiled)}.cubin")
        with open(cubin, "wb") as handle:
            handle.write(compiled.asm["cubin"])
        metadata = compiled.metadata
        report.compiled.append(
            {
                "kernel": fn.__name__,
                "cubin": os.path.basename(cubin),
                "shared": int(metadata.shared),
                "num_warps": int(metadata.num_warps),
                "num_stages": int(metadata.num_stages),
                "launch": launch,
            }
        )
    report.lap("compile")
    report.write(args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # the report is written: skip the interpreter's teardown of torch (a noticeable share)
