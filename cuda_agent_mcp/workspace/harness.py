"""The project's pristine harness files: the only copies the build and the evaluator ever use."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import PurePosixPath

HARNESS_FILES = ("binding.cpp", "binding_registry.h")
EXTENSION_NAME = "cuda_extension"
# What a CuPy workspace's build writes beside the candidate: the build's file, never the candidate's
# (the evaluation copies the build cache's, and neither the audit nor the staging takes a workspace copy).
GENERATED_MODULE = f"{EXTENSION_NAME}.py"


@cache
def harness_text(name: str | PurePosixPath) -> str:
    """Contents of one packaged harness file (binding.cpp, binding_registry.h, SKILL.md, templates;
    another language's under its folder, `cupy/SKILL.md`)."""
    folder = resources.files("cuda_agent_mcp.workspace").joinpath("pristine")
    for part in PurePosixPath(name).parts:
        folder = folder.joinpath(part)
    return folder.read_text(encoding="utf-8")
