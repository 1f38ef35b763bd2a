"""Check the Triton KernelBench solutions on a CPU machine, without a GPU.

Default mode (Triton's interpreter, TRITON_INTERPRET=1): for every solution `level<L>/<N>.py`, load the
reference `Model` from the KernelBench file, shrink its size globals to small (and odd) values, build
`Model` and `ModelNew` from the same init inputs, load the reference's state_dict into `ModelNew`
(strict), and compare the outputs on CPU tensors: `torch.testing.assert_close` (rtol = atol = 1e-4) and
the evaluator's relative error norm (||out - ref|| / ||ref|| <= 1e-4). Each input set runs twice: as
`get_inputs()` makes it (torch.rand, all positive) and with its float tensors redrawn as 3 * randn, so
negative branches (ReLU, LeakyReLU, GELU's lower half) are exercised too. An autotuned kernel is run once
per config (the interpreter cannot benchmark, and every config must be right), by pinning the
autotuner to that one config.

--compile (TRITON_INTERPRET unset): every kernel launch a solution makes is captured instead of run
(JITFunction.run and Autotuner.run are replaced), from which the kernel's signature, constexprs,
num_warps/num_stages and 16-byte divisibility attributes are derived, and the kernel is compiled with
`triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))` down to a cubin (ptxas included): this
catches code the interpreter accepts and the compiler does not. Every autotune config is compiled. The
launches are captured at the small sizes on CPU tensors and at KernelBench's full sizes on meta tensors
(no memory), so the 64-bit integer specialisations of the full sizes are compiled too.

A static lint runs in both modes: outside `__init__`, a solution may call `torch.*` only to allocate
(torch.empty*, torch.zeros*) and may not use torch.nn.functional; its forward's only compute is the
kernels.

    TRITON_INTERPRET=1 is set by the script itself; run it with the venv's python:
    python benchmarks/suites/triton_kernelbench/check_interpret.py [--compile] [--only 1/23 2/9 ...]

Exit status 1 when any check fails.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
# The worktree or checkout sits next to /work/shared (the README's `../shared`).
DEFAULT_KB = HERE.parents[2].parent / "shared" / "benchmarks" / "kernelbench"

# (level, task) -> small size sets: each overrides the reference module's size globals.
# Odd sizes (67, 131, 1031, ...) exercise every mask; some exceed one block (softmax 5000 > 4096,
# LayerNorm rows of 10385 > one 8192 chunk, reductions 300 > 128 columns).
TASKS: dict[tuple[int, int], list[dict[str, Any]]] = {
    (1, 1): [{"N": 64}, {"N": 131}],
    (1, 2): [{"M": 64, "K": 96, "N": 80}, {"M": 67, "K": 131, "N": 75}],
    (1, 19): [{"batch_size": 4, "dim": 300}, {"batch_size": 3, "dim": 1031}],
    (1, 21): [{"batch_size": 4, "dim": 300}, {"batch_size": 3, "dim": 1031}],
    (1, 23): [{"batch_size": 4, "dim": 300}, {"batch_size": 3, "dim": 5000}],
    (1, 25): [{"batch_size": 4, "dim": 300}, {"batch_size": 3, "dim": 1031}],
    (1, 26): [{"batch_size": 4, "dim": 300}, {"batch_size": 3, "dim": 1031}],
    (1, 36): [
        {"batch_size": 4, "features": 8, "dim1": 16, "dim2": 16},
        {"batch_size": 3, "features": 7, "dim1": 13, "dim2": 11},
    ],
    (1, 40): [
        {"batch_size": 4, "features": 8, "dim1": 16, "dim2": 16},
        {"batch_size": 2, "features": 5, "dim1": 67, "dim2": 31},
    ],
    (1, 47): [{"batch_size": 4, "dim1": 64, "dim2": 67}, {"batch_size": 3, "dim1": 131, "dim2": 300}],
    (1, 48): [{"batch_size": 4, "dim1": 64, "dim2": 67}, {"batch_size": 3, "dim1": 131, "dim2": 300}],
    (1, 49): [{"batch_size": 4, "dim1": 64, "dim2": 67}, {"batch_size": 3, "dim1": 131, "dim2": 300}],
    (2, 9): [
        {"batch_size": 4, "in_features": 64, "out_features": 96},
        {"batch_size": 5, "in_features": 131, "out_features": 67},
    ],
    (2, 12): [
        {"batch_size": 4, "in_features": 64, "out_features": 96},
        {"batch_size": 5, "in_features": 131, "out_features": 67},
    ],
    (2, 76): [
        {"batch_size": 4, "in_features": 64, "out_features": 96, "bias_shape": (96,)},
        {"batch_size": 5, "in_features": 131, "out_features": 67, "bias_shape": (67,)},
    ],
    (2, 86): [
        {"batch_size": 4, "input_size": 64, "output_size": 96},
        {"batch_size": 5, "input_size": 131, "output_size": 67},
    ],
}

RTOL = ATOL = 1e-4
REL_NORM_MAX = 1e-4
ALLOWED_TORCH_CALLS = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like"}


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_path(kb_dir: Path, level: int, task: int) -> Path:
    matches = sorted((kb_dir / f"level{level}").glob(f"{task}_*.py"))
    if len(matches) != 1:
        raise FileNotFoundError(f"level{level} task {task}: {len(matches)} reference files in {kb_dir}")
    return matches[0]


def _dotted(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def lint(path: Path) -> list[str]:
    """Torch compute outside __init__: any torch.* call but allocation, any functional op."""
    tree = ast.parse(path.read_text())
    problems = []
    init_nodes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            init_nodes.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and "functional" in node.module:
            problems.append(f"line {node.lineno}: imports {node.module}")
        if id(node) in init_nodes or not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        if name.startswith("torch.") and name.split(".", 1)[1] not in ALLOWED_TORCH_CALLS:
            problems.append(f"line {node.lineno}: calls {name}")
        if name.startswith(("F.", "torch.nn.functional.")):
            problems.append(f"line {node.lineno}: calls {name}")
    return problems


def autotuners(module: ModuleType) -> list[Any]:
    from triton.runtime.autotuner import Autotuner

    return [v for v in vars(module).values() if isinstance(v, Autotuner)]


def config_variants(tuners: list[tuple[Any, list[Any]]]) -> list[tuple[str, list[tuple[Any, Any]]]]:
    """One (label, [(autotuner, config)]) per config of (autotuner, its configs); one entry when none."""
    if not tuners:
        return [("-", [])]
    variants = []
    count = max(len(configs) for _, configs in tuners)
    for i in range(count):
        pins = [(t, configs[min(i, len(configs) - 1)]) for t, configs in tuners]
        label = "; ".join(_config_label(c) for _, c in pins)
        variants.append((label, pins))
    return variants


def _config_label(cfg: Any) -> str:
    blocks = "x".join(str(v) for k, v in cfg.kwargs.items() if k.startswith("BLOCK"))
    return f"{blocks} w{cfg.num_warps} s{cfg.num_stages}"


def signed_inputs(inputs: list[Any]) -> list[Any]:
    import torch

    return [
        3.0 * torch.randn_like(x) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
        for x in inputs
    ]


def compare(out: Any, ref: Any) -> tuple[bool, float, float, str]:
    import torch

    if not isinstance(out, torch.Tensor) or out.shape != ref.shape or out.dtype != ref.dtype:
        got = (tuple(out.shape), out.dtype) if isinstance(out, torch.Tensor) else type(out)
        return False, float("nan"), float("nan"), f"shape/dtype {got} vs {(tuple(ref.shape), ref.dtype)}"
    diff = out.double() - ref.double()
    max_abs = diff.abs().max().item() if diff.numel() else 0.0
    rel = (diff.norm() / ref.double().norm().clamp_min(1e-30)).item()
    try:
        torch.testing.assert_close(out, ref, rtol=RTOL, atol=ATOL)
    except AssertionError as e:
        return False, max_abs, rel, str(e).splitlines()[0]
    if rel > REL_NORM_MAX:
        return False, max_abs, rel, f"relative error norm {rel:.2e} > {REL_NORM_MAX}"
    return True, max_abs, rel, ""


def build_pair(ref_mod: ModuleType, sol_mod: ModuleType, sizes: dict[str, Any]) -> tuple[Any, Any]:
    import torch

    for name, value in sizes.items():
        if not hasattr(ref_mod, name):
            raise AttributeError(f"reference has no size global {name!r}")
        setattr(ref_mod, name, value)
    torch.manual_seed(0)
    init = ref_mod.get_init_inputs()
    ref_model = ref_mod.Model(*init)
    new_model = sol_mod.ModelNew(*init)
    new_model.load_state_dict(ref_model.state_dict(), strict=True)
    return ref_model.eval(), new_model.eval()


def run_interpret(kb_dir: Path, tasks: list[tuple[int, int]]) -> int:
    import torch

    failures = 0
    print(
        f"{'task':<8}{'sizes':<62}{'config':<24}{'inputs':<8}{'max abs':>10}{'rel norm':>10}{'s':>7}  result"
    )
    for level, task in tasks:
        sol_path = HERE / f"level{level}" / f"{task}.py"
        problems = lint(sol_path)
        if problems:
            failures += 1
            print(f"{level}/{task:<6}LINT FAIL: {'; '.join(problems)}")
        ref_mod = load_module(reference_path(kb_dir, level, task), f"ref_{level}_{task}")
        sol_mod = load_module(sol_path, f"sol_{level}_{task}")
        originals = [(t, list(t.configs)) for t in autotuners(sol_mod)]
        for sizes in TASKS[(level, task)]:
            ref_model, new_model = build_pair(ref_mod, sol_mod, sizes)
            torch.manual_seed(1)
            base_inputs = ref_mod.get_inputs()
            for kind, inputs in (("rand", base_inputs), ("signed", signed_inputs(base_inputs))):
                with torch.no_grad():
                    expected = ref_model(*inputs)
                for label, pins in config_variants(originals):
                    for tuner, cfg in pins:
                        tuner.configs = [cfg]
                        tuner.cache.clear()
                    start = time.time()
                    try:
                        with torch.no_grad():
                            out = new_model(
                                *[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
                            )
                        ok, max_abs, rel, why = compare(out, expected)
                    except Exception as e:  # a crash in a kernel is a failed check, reported, not raised
                        ok, max_abs, rel, why = False, float("nan"), float("nan"), f"{type(e).__name__}: {e}"
                    secs = time.time() - start
                    failures += not ok
                    size_txt = ",".join(f"{k}={v}" for k, v in sizes.items())
                    print(
                        f"{level}/{task:<6}{size_txt:<62}{label:<24}{kind:<8}{max_abs:>10.2e}{rel:>10.2e}"
                        f"{secs:>7.2f}  {'ok' if ok else 'FAIL ' + why[:200]}"
                    )
        for tuner, configs in originals:
            tuner.configs = configs
    return failures


# ---- --compile mode -----------------------------------------------------------------------------------

_TORCH_TO_TRITON = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float64": "fp64",
    "int32": "i32",
    "int64": "i64",
    "int8": "i8",
    "uint8": "u8",
    "bool": "i1",
}


def capture_launches(run_model: Any) -> list[tuple[Any, dict[str, Any]]]:
    """Run `run_model()` with every kernel launch recorded (as (JITFunction, bound kwargs)) and skipped."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    launches: list[tuple[Any, dict[str, Any]]] = []

    def jit_run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        launches.append((self, {**dict(zip(self.arg_names, args, strict=False)), **kwargs}))

    def tuner_run(self: Any, *args: Any, **kwargs: Any) -> None:
        for cfg in self.configs:
            extra = {**cfg.all_kwargs()}
            self.fn.run(*args, **kwargs, **extra)

    saved = (JITFunction.run, Autotuner.run)
    JITFunction.run, Autotuner.run = jit_run, tuner_run
    try:
        run_model()
    finally:
        JITFunction.run, Autotuner.run = saved
    return launches


def build_source(fn: Any, bound: dict[str, Any]) -> tuple[Any, dict[str, Any], str]:
    """(ASTSource, options, description) of one captured launch, typed as Triton's JIT would type it."""
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend

    backend = make_backend(GPUTarget("cuda", 90, 32))
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    attrs: dict[tuple[int, ...], Any] = {}
    div16: list[str] = []
    for i, param in enumerate(fn.params):
        if param.name not in bound:
            raise TypeError(
                f"{fn.__name__}: no value for {param.name} (defaults are not used by these kernels)"
            )
        value = bound[param.name]
        if param.is_constexpr:
            signature[param.name] = "constexpr"
            constexprs[param.name] = value
            continue
        if isinstance(value, torch.Tensor):
            signature[param.name] = "*" + _TORCH_TO_TRITON[str(value.dtype).replace("torch.", "")]
            # torch's allocations are 16-byte aligned (meta tensors report 0); the JIT marks them so.
            aligned = value.data_ptr() % 16 == 0
        elif isinstance(value, bool):
            signature[param.name], aligned = "i1", False
        elif isinstance(value, int):
            signature[param.name] = "i32" if -(2**31) <= value < 2**31 else "i64"
            aligned = value % 16 == 0
        elif isinstance(value, float):
            signature[param.name], aligned = "fp32", False
        else:
            raise TypeError(f"{fn.__name__}: argument {param.name}={value!r} of an unhandled type")
        if aligned:
            attrs[(i,)] = backend.parse_attr("D")
            div16.append(param.name)
    options: dict[str, Any] = {k: bound[k] for k in ("num_warps", "num_stages", "num_ctas") if k in bound}
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    ints = ",".join(f"{k}:{v}" for k, v in signature.items() if v in ("i32", "i64"))
    consts = ",".join(f"{k}={v}" for k, v in constexprs.items())
    opts = ",".join(f"{k}={v}" for k, v in options.items())
    desc = f"{fn.__name__}[{consts}] ({opts}) ints {ints} div16 {','.join(div16)}"
    return src, options, desc


def _run_small(ref_mod: ModuleType, sol_mod: ModuleType, sizes: dict[str, Any]) -> None:
    import torch

    _, new_model = build_pair(ref_mod, sol_mod, sizes)
    with torch.no_grad():
        new_model(*ref_mod.get_inputs())


def _run_full(full: ModuleType, sol_mod: ModuleType) -> None:
    import torch

    with torch.device("meta"), torch.no_grad():
        new_model = sol_mod.ModelNew(*full.get_init_inputs())
        new_model(*full.get_inputs())


def run_compile(kb_dir: Path, tasks: list[tuple[int, int]]) -> int:
    import triton
    from triton.backends.compiler import GPUTarget

    failures = 0
    for level, task in tasks:
        sol_path = HERE / f"level{level}" / f"{task}.py"
        problems = lint(sol_path)
        if problems:
            failures += 1
            print(f"{level}/{task}: LINT FAIL: {'; '.join(problems)}")
        ref_mod = load_module(reference_path(kb_dir, level, task), f"ref_{level}_{task}")
        sol_mod = load_module(sol_path, f"sol_{level}_{task}")
        launches: list[tuple[Any, dict[str, Any]]] = []

        # KernelBench's own sizes, on meta tensors: shapes without memory (no state_dict needed).
        full = load_module(reference_path(kb_dir, level, task), f"ref_full_{level}_{task}")
        runners = (
            ("small", partial(_run_small, ref_mod, sol_mod, TASKS[(level, task)][-1])),
            ("full", partial(_run_full, full, sol_mod)),
        )
        for label, runner in runners:
            try:
                launches += [(fn, b) for fn, b in capture_launches(runner)]
            except Exception as e:
                failures += 1
                print(f"{level}/{task} ({label} sizes): capture FAIL {type(e).__name__}: {e}")
        seen: set[str] = set()
        for fn, bound in launches:
            try:
                src, options, desc = build_source(fn, bound)
                if desc in seen:
                    continue
                seen.add(desc)
                start = time.time()
                compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
                cubin = len(compiled.asm.get("cubin", b""))
                print(
                    f"{level}/{task}: ok   {desc}  shared={compiled.metadata.shared} cubin={cubin}B "
                    f"({time.time() - start:.1f}s)"
                )
            except Exception as e:
                failures += 1
                first = str(e).strip().splitlines()
                print(f"{level}/{task}: FAIL {fn.__name__}: {type(e).__name__}: {first[0] if first else ''}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--compile", action="store_true", help="compile every launch for sm_90 instead of running"
    )
    parser.add_argument("--only", nargs="*", default=None, help="tasks as LEVEL/N, e.g. 1/23 2/9")
    parser.add_argument(
        "--kernelbench", type=Path, default=Path(os.environ.get("KERNELBENCH_DIR", DEFAULT_KB))
    )
    args = parser.parse_args()

    # The interpreter is chosen when @triton.jit runs, i.e. at the solutions' import: set it first.
    if args.compile:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = "1"
    # Keep Triton's compile cache out of the user's home.
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-check-cache-"))

    tasks = sorted(TASKS)
    if args.only:
        tasks = [tuple(int(p) for p in item.split("/")) for item in args.only]  # type: ignore[misc]
        unknown = [t for t in tasks if t not in TASKS]
        if unknown:
            parser.error(f"unknown tasks {unknown}")
    start = time.time()
    failures = (
        run_compile(args.kernelbench, tasks) if args.compile else run_interpret(args.kernelbench, tasks)
    )
    mode = "compile (sm_90)" if args.compile else "interpret"
    print(f"\n{mode}: {len(tasks)} tasks, {failures} failure(s), {time.time() - start:.0f}s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
