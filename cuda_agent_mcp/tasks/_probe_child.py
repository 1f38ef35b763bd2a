"""Child side of the task probe: import one model.py, call its entry points on `meta`, print one report line."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from types import ModuleType

from cuda_agent_mcp.tasks.probe import PROBE_MARKER, HiddenSize, InputSpec, ProbeReport


def _describe(value: object) -> InputSpec:
    import torch

    if isinstance(value, torch.Tensor):
        return InputSpec(
            kind="tensor", shape=list(value.shape), dtype=str(value.dtype).removeprefix("torch.")
        )
    return InputSpec(kind=type(value).__name__, value=repr(value)[:80])


def _last_frame(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    frame = next((f for f in reversed(frames) if f.filename.endswith("model.py")), None)
    where = f" (model.py line {frame.lineno})" if frame else ""
    return f"{type(exc).__name__}: {exc}{where}"


def probe(path: str) -> ProbeReport:
    import torch

    spec = importlib.util.spec_from_file_location("model", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        return ProbeReport(error=f"importing the reference failed: {_last_frame(exc)}")

    with torch.device("meta"):
        try:
            init_inputs = module.get_init_inputs()
        except Exception as exc:
            return ProbeReport(error=f"get_init_inputs() raised {_last_frame(exc)}")
        if not isinstance(init_inputs, list | tuple):
            return ProbeReport(
                error=f"get_init_inputs() must return a list, got {type(init_inputs).__name__}"
            )
        try:
            model = module.Model(*init_inputs)
        except Exception as exc:
            return ProbeReport(error=f"Model(*get_init_inputs()) raised {_last_frame(exc)}")
        try:
            inputs = module.get_inputs()
        except Exception as exc:
            return ProbeReport(error=f"get_inputs() raised {_last_frame(exc)}")

    if not isinstance(inputs, list | tuple):
        return ProbeReport(error=f"get_inputs() must return a list of tensors, got {type(inputs).__name__}")
    specs = [_describe(v) for v in inputs]
    if not any(s.kind == "tensor" for s in specs):
        kinds = ", ".join(s.kind for s in specs) or "an empty list"
        return ProbeReport(error=f"get_inputs() must return a list of tensors, got [{kinds}]")
    if not isinstance(model, torch.nn.Module):
        return ProbeReport(error="Model must subclass torch.nn.Module")
    params = sum(p.numel() for p in model.parameters())
    return ProbeReport(
        inputs=specs,
        init_inputs=[repr(v)[:80] for v in init_inputs],
        parameter_count=params,
        hidden_sizes=_hidden_sizes(module),
    )


def _hidden_sizes(module: ModuleType) -> list[HiddenSize]:
    """The judge's own plan (the same function, on the same module), so what is shown is what runs."""
    from cuda_agent_mcp.judge.sizes import size_globals

    try:
        plan = size_globals(module)
    except Exception:
        return []  # no plan to show; the judge would meet the same error in its resized trial
    return [HiddenSize(name=n, visible=getattr(module, n), hidden=v) for n, v in sorted(plan.items())]


def main() -> None:
    try:
        report = probe(sys.argv[1])
    except BaseException as exc:  # report anything, including SystemExit from the reference
        report = ProbeReport(error=f"inspecting the reference failed: {type(exc).__name__}: {exc}")
    print(PROBE_MARKER + report.model_dump_json(), flush=True)


if __name__ == "__main__":
    main()
