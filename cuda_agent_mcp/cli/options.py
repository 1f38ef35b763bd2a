"""The options `verify`, `profile`, `eval` and `bench run` share: one name and one help text each, so an
option means the same thing wherever it is accepted (tests/cli/test_cpu_path.py checks it). Their limits
are the request models' (a refusal is then one usage line, as for every other bad value)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

DeviceOption = Annotated[
    str,
    typer.Option(
        help="cuda (CUDA kernels need an NVIDIA GPU), or cpu: checks pure-PyTorch candidates only, where "
        "ModelNew needs no kernel sources (and --no-audit or the kernelbench rules, since the audit "
        "refuses PyTorch compute)"
    ),
]
AuditOption = Annotated[
    bool,
    typer.Option(
        "--audit/--no-audit",
        help="refuse PyTorch compute in ModelNew (static, and at run time in verify); --no-audit is for "
        "pure-PyTorch candidates on the CPU",
    ),
]
TorchGlueOption = Annotated[
    bool,
    typer.Option(
        "--torch-glue",
        help="the kernelbench rules' audit: PyTorch ops beside the kernels (in ModelNew and host code) are "
        "allowed; every other check stays (bench run: --rules kernelbench)",
    ),
]
PrecisionCheckOption = Annotated[
    bool | None,
    typer.Option(
        "--precision-check/--no-precision-check",
        help="refuse float32/float64 outputs whose error norm shows lower-precision arithmetic "
        "(default: the task's policy, on unless it allows reduced precision)",
        show_default=False,
    ),
]
TrialsOption = Annotated[int, typer.Option(help="verify's input sets, each from a fresh secret seed")]
StrictOption = Annotated[bool, typer.Option(help="verify's fp32 tolerance 1e-4 instead of 1e-2")]
BaselinesOption = Annotated[
    str, typer.Option(help="eager and torch.compile baselines: cached, measure or skip")
]
BudgetOption = Annotated[float, typer.Option(help="timing budget per implementation, seconds")]
CallTimeoutOption = Annotated[
    float,
    typer.Option(help="seconds one forward() call may take (a hung kernel is killed)"),
]


class LanguageChoice(StrEnum):
    """The kernel languages a workspace can be laid out in (results.KernelLanguage's values)."""

    cuda = "cuda"
    cupy = "cupy"
    triton = "triton"


LanguageOption = Annotated[
    LanguageChoice,
    typer.Option(
        help="kernel language of a new workspace: cuda (nvcc builds a torch extension), cupy (NVRTC "
        "compiles kernels/*.cu, launched through CuPy; no host code) or triton (@triton.jit kernels in "
        "model_new.py); its SKILL.md says how",
    ),
]
