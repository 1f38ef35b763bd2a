"""Child side of the synthesis filters: run composed programs, one forked process each, and report.

Runs inside the isolating executor (the programs may come from an LLM: untrusted code). torch is imported
once; every candidate then runs in a process forked from this one, with its own memory limit and
deadline, so a program that hangs, allocates too much or kills itself costs only its own verdict. The
fork happens before CUDA is initialised here (this process never touches the GPU), so each candidate
makes its own context. The candidate reports each filter as it finishes, over a pipe; when it dies or
overruns, the filter it had begun is reported as failed with what happened.

Standard library and torch only: the parent validates what this prints (`synth/checks.py`).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import math
import os
import resource
import select
import signal
import statistics
import sys
import time
import traceback
import types
from collections.abc import Callable
from typing import Any

MARKER = "@@cuda-agent-synth@@"
NULL_ANSWERS = ("zeros", "ones", "constant_mean", "random", "first_input")
_PR_SET_DUMPABLE = 4


class Failed(Exception):
    """A filter's refusal, with its one-line reason and what was measured before it."""

    def __init__(self, reason: str, measured: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.measured = measured or {}


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)
    # A candidate runs as this process's uid: not dumpable, it cannot read our pipes or memory.
    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    import torch  # noqa: F401  (once, before the forks)

    for candidate in spec["candidates"]:
        events = _run_forked(candidate, spec)
        print(MARKER + json.dumps({"index": candidate["index"], "events": events}), flush=True)


# -- the parent: fork, watch, report --------------------------------------------------------------


def _run_forked(candidate: dict[str, Any], spec: dict[str, Any]) -> list[dict[str, Any]]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the candidate's process
        os.close(read_end)
        code = 0
        try:
            _limit_self(spec)
            _check_candidate(candidate, spec, lambda event: _send(write_end, event))
        except BaseException:  # anything the program raises past a filter is reported
            _send(write_end, {"fatal": _last_line(traceback.format_exc())})
            code = 1
        os._exit(code)
    os.close(write_end)
    events: list[dict[str, Any]] = []
    buffer = b""
    deadline = time.monotonic() + spec["timeout_s"]
    timed_out = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            os.kill(pid, signal.SIGKILL)
            break
        ready, _, _ = select.select([read_end], [], [], left)
        if not ready:
            continue
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        events += [json.loads(line) for line in lines if line.strip()]
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        events.append({"died": f"it ran past the {spec['timeout_s']:g} s limit and was killed"})
    elif os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        events.append({"died": f"it was killed by {signal.Signals(number).name}"})
    return events


def _send(fd: int, event: dict[str, Any]) -> None:
    data = (json.dumps(event, default=str) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def _limit_self(spec: dict[str, Any]) -> None:
    """Host memory (RLIMIT_DATA: what malloc and private mappings take; CUDA's address reservations are not
    counted), no core files, output to nowhere (the verdicts travel on the pipe)."""
    limit = spec["host_memory_bytes"]
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)


# -- the candidate's process: the filters ---------------------------------------------------------


def _check_candidate(candidate: dict[str, Any], spec: dict[str, Any], send: Callable[[dict], None]) -> None:
    import torch

    torch.set_num_threads(spec["threads"])
    device = spec["device"]
    if device == "cuda":
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, spec["gpu_memory_bytes"] / total))
        torch.zeros(1, device="cuda").add_(1)  # the context, made before the Landlock domain
        torch.cuda.synchronize()
    if spec.get("confine"):
        _confine(
            spec["confine"]
        )  # after CUDA is up (it does not initialise under Landlock), before the program
    # The meta probe reads the program at its own sizes (free on meta); the runs use `code`, which on the
    # CPU is the same program with smaller sizes.
    probed = candidate.get("probe_code") or candidate["code"]
    stages: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("shape_probe", lambda: _shape_probe(_load(probed, types.ModuleType("model"))))
    ]
    if "runtime" in spec["stages"]:
        run = _Runs(candidate["code"], device, spec["seed"])
        stages += [
            ("eager", run.eager),
            ("deterministic", run.deterministic),
            ("non_degenerate", lambda: run.non_degenerate(spec["atol"], spec["rtol"])),
        ]
        if spec["compile"]:
            stages.append(("compile", lambda: run.compiled(spec["atol"], spec["rtol"])))
        if device == "cuda":
            stages.append(("runtime", lambda: run.timed(spec["timing"], spec["lock_path"], spec["compile"])))
    for name, check in stages:
        send({"begin": name})
        started = time.monotonic()
        try:
            measured = check()
        except Failed as failure:
            measured = {**failure.measured, "seconds": round(time.monotonic() - started, 3)}
            send({"outcome": {"name": name, "passed": False, "reason": str(failure), "measured": measured}})
            return
        except Exception as exc:  # the program's own error is the filter's reason
            reason = _program_error(exc, spec)
            send({"outcome": {"name": name, "passed": False, "reason": reason, "measured": {}}})
            return
        measured["seconds"] = round(time.monotonic() - started, 3)
        send({"outcome": {"name": name, "passed": True, "reason": "", "measured": measured}})


def _confine(paths: dict[str, list[str]]) -> None:
    """The Landlock domain an evaluation worker has: the system and Python read-only, its directory (its
    TMPDIR is inside) and /dev writable. Without Landlock the program is not run, unless reduced isolation
    was asked for."""
    from cuda_agent_mcp.isolation import landlock

    writable = paths["writable"]
    confined = landlock.confine(readable=paths["readable"], writable=writable)
    if not confined and os.environ.get("CUDA_AGENT_ALLOW_REDUCED_ISOLATION") != "1":
        raise RuntimeError(
            "no Landlock here: the program is not run (CUDA_AGENT_ALLOW_REDUCED_ISOLATION=1 runs it anyway)"
        )


def _load(code: str, module: types.ModuleType) -> types.ModuleType:
    """Import the program into `module` (the later filters use the same one)."""
    module.__file__ = "model.py"
    exec(compile(code, "model.py", "exec"), module.__dict__)  # the program under test, in its own process
    return module


def _shape_probe(module: types.ModuleType) -> dict[str, Any]:
    """Entry points and forward on the meta device: shapes without compute or memory."""
    import torch

    with torch.device("meta"):
        init_inputs = module.get_init_inputs()
        if not isinstance(init_inputs, list | tuple):
            raise Failed(f"get_init_inputs() returned {type(init_inputs).__name__}, not a list")
        model = module.Model(*init_inputs)
        if not isinstance(model, torch.nn.Module):
            raise Failed("Model is not a torch.nn.Module")
        inputs = module.get_inputs()
        if not isinstance(inputs, list | tuple) or not any(isinstance(x, torch.Tensor) for x in inputs):
            raise Failed("get_inputs() must return a list holding tensors")
        measured: dict[str, Any] = {
            "inputs": [list(x.shape) if isinstance(x, torch.Tensor) else repr(x)[:40] for x in inputs],
            "parameters": sum(p.numel() for p in model.parameters()),
            "input_bytes": sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)),
        }
        try:
            output = model(*inputs)
        except NotImplementedError as exc:  # an op without a meta kernel: its shapes are checked at run time
            measured["forward_on_meta"] = f"not checked: {_last_line(str(exc))[:120]}"
            return measured
    tensors = _tensors(output)
    measured["outputs"] = [list(t.shape) for t in tensors]
    return measured


def _tensors(output: Any) -> list[Any]:
    import torch

    items = list(output) if isinstance(output, list | tuple) else [output]
    if not items or not all(isinstance(t, torch.Tensor) for t in items):
        raise Failed(f"forward() must return a tensor or a tuple of tensors, got {type(output).__name__}")
    return items


class _Runs:
    """The program run for real: seeded weights and inputs, then the checks that compare runs."""

    def __init__(self, code: str, device: str, seed: int) -> None:
        self.code = code
        self.module = types.ModuleType("model")
        self.device = device
        self.seed = seed
        self.model: Any = None
        self.inputs: list[Any] = []
        self.outputs: list[Any] = []

    def _seed(self, seed: int) -> None:
        import torch

        torch.manual_seed(seed)
        if self.device == "cuda":
            torch.cuda.manual_seed_all(seed)

    def _build(self, seed: int) -> tuple[Any, list[Any]]:
        import torch

        with torch.device(self.device):
            self._seed(seed)
            model = self.module.Model(*self.module.get_init_inputs())
            self._seed(seed + 1)
            inputs = list(self.module.get_inputs())
        model = model.to(self.device)
        inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs]
        return model, inputs

    def _call(self, model: Any, inputs: list[Any]) -> list[Any]:
        import torch

        with torch.no_grad():
            outputs = _tensors(model(*inputs))
        if self.device == "cuda":
            torch.cuda.synchronize()
        return [t.detach().clone() for t in outputs]

    def eager(self) -> dict[str, Any]:
        import torch

        started = time.monotonic()
        _load(self.code, self.module)
        self.model, self.inputs = self._build(self.seed)
        self.outputs = self._call(self.model, self.inputs)
        finite = all(torch.isfinite(t).all().item() for t in self.outputs if t.is_floating_point())
        measured = {
            "outputs": [list(t.shape) for t in self.outputs],
            "dtypes": [str(t.dtype).removeprefix("torch.") for t in self.outputs],
            "first_call_s": round(time.monotonic() - started, 3),
        }
        if not finite:
            raise Failed("the output holds NaN or infinity", measured)
        return measured

    def deterministic(self) -> dict[str, Any]:
        """Built again from the same seed: the same output; called again after the global random state
        moved on: still the same (a random op in forward, dropout in training mode, is what fails)."""
        # One working set on the GPU at a time: the first run's outputs wait on the host while the program
        # is built again, which then becomes the working set.
        first = [t.cpu() for t in self.outputs]
        self.model, self.inputs, self.outputs = None, [], []
        _release_cached_memory(self.device)
        self.model, self.inputs = self._build(self.seed)
        self.outputs = self._call(self.model, self.inputs)
        rebuilt = _max_difference(first, self.outputs)
        del first
        self._seed(self.seed + 7919)
        moved = _max_difference(self.outputs, self._call(self.model, self.inputs))
        measured = {"rebuilt_max_difference": rebuilt, "reseeded_max_difference": moved}
        if moved > _NOISE:
            raise Failed(
                "stochastic: the output changes with the random state (a random op or dropout in forward)",
                measured,
            )
        if rebuilt > _NOISE:
            raise Failed("not reproducible: two runs from the same seed differ", measured)
        return measured

    def non_degenerate(self, atol: float, rtol: float) -> dict[str, Any]:
        """The paper's filter and the task audit's null candidates, at the task's tolerance: a second draw
        of inputs must change the output, and no answer that does no work may pass."""
        import torch

        self._seed(self.seed + 104729)
        with torch.device(self.device):
            other_inputs = list(self.module.get_inputs())
        other = self._call(
            self.model, [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in other_inputs]
        )
        del other_inputs
        passing = [name for name in NULL_ANSWERS if _all_close(self.outputs, self._null(name), atol, rtol)]
        measured: dict[str, Any] = {
            "null_answers_passing": passing,
            "input_sensitivity": _max_difference(self.outputs, other),
        }
        if passing:
            raise Failed(
                f"degenerate: a null answer ({passing[0]}) matches the output at atol={atol:g}, rtol={rtol:g}",
                measured,
            )
        if _all_close(self.outputs, other, atol, rtol):
            raise Failed("the output does not depend on the inputs (two input draws give the same)", measured)
        return measured

    def _null(self, name: str) -> list[Any]:
        import torch

        first = self.inputs[0] if self.inputs else None
        answers = []
        for out in self.outputs:
            if name == "zeros":
                answers.append(torch.zeros_like(out))
            elif name == "ones":
                answers.append(torch.ones_like(out))
            elif name == "constant_mean" and out.numel() > 1:  # a scalar's mean is the answer itself
                answers.append(torch.full_like(out, float(out.float().mean())))
            elif name == "random":
                answers.append(torch.rand_like(out) if out.is_floating_point() else torch.zeros_like(out))
            elif (
                name == "first_input"
                and isinstance(first, torch.Tensor)
                and first.shape == out.shape
                and first.dtype == out.dtype
            ):
                answers.append(first)
            else:
                answers.append(torch.zeros_like(out))
        return answers

    def compiled(self, atol: float, rtol: float) -> dict[str, Any]:
        import torch

        started = time.monotonic()
        self.compiled_model = torch.compile(self.model)
        outputs = self._call(self.compiled_model, self.inputs)
        measured = {
            "compile_first_call_s": round(time.monotonic() - started, 3),
            "max_difference": _max_difference(self.outputs, outputs),
        }
        if not _all_close(self.outputs, outputs, atol, rtol):
            raise Failed("torch.compile's output differs from eager's at the task's tolerance", measured)
        return measured

    def timed(self, timing: dict[str, int], lock_path: str | None, compiled: bool) -> dict[str, Any]:
        """Eager (and compiled) time per call with CUDA events, median of `repeats` after `warmup`; alone
        on the GPU among the synthesis workers (an exclusive lock), so their work does not skew it."""
        with _exclusive(lock_path):
            measured = {"eager_ms": self._median_ms(self.model, timing)}
            if compiled:
                measured["compile_ms"] = self._median_ms(self.compiled_model, timing)
        return measured

    def _median_ms(self, model: Any, timing: dict[str, int]) -> float:
        import torch

        with torch.no_grad():
            for _ in range(timing["warmup"]):
                model(*self.inputs)
            samples = []
            for _ in range(timing["repeats"]):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(*self.inputs)
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end))
        return round(statistics.median(samples), 4)


_NOISE = 1e-5  # two runs of the same deterministic program on one device agree this closely


def _release_cached_memory(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()


class _exclusive:
    def __init__(self, path: str | None) -> None:
        self.fd = os.open(path, os.O_RDONLY) if path else None

    def __enter__(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)


def _max_difference(a: list[Any], b: list[Any]) -> float:
    """The largest absolute difference between two runs' outputs (inf when their shapes differ)."""
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape:
            return math.inf
        if x.numel():  # float32, not float64: an output may be gigabytes, and the GPU share is fixed
            x, y = x.to(y.device), y
            difference = float((x.float() - y.float()).abs().max())
            worst = max(worst, math.inf if math.isnan(difference) else difference)
    return worst


def _all_close(a: list[Any], b: list[Any], atol: float, rtol: float) -> bool:
    import torch

    return all(
        x.shape == y.shape and torch.allclose(x.float(), y.to(x.device).float(), atol=atol, rtol=rtol)
        for x, y in zip(a, b, strict=True)
    )


def _program_error(exc: BaseException, spec: dict[str, Any]) -> str:
    """The program's exception as one line, with its line in model.py when it has one."""
    frames = traceback.extract_tb(exc.__traceback__)
    frame = next((f for f in reversed(frames) if f.filename == "model.py"), None)
    where = f" (model.py line {frame.lineno})" if frame else ""
    message = _last_line(str(exc)) or type(exc).__name__
    if "can't allocate memory" in message or isinstance(exc, MemoryError):
        return f"it needs more host memory than a candidate may use ({spec['host_memory_bytes'] / 2**30:g} GiB){where}"
    if "CUDA out of memory" in message or type(exc).__name__ == "OutOfMemoryError":
        return f"it needs more GPU memory than a candidate may use ({spec['gpu_memory_bytes'] / 2**30:g} GiB){where}"
    return f"{type(exc).__name__}: {message[:300]}{where}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


if __name__ == "__main__":
    main()
