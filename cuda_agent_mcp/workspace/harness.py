"""The project's pristine harness files: the only copies the build and the evaluator ever use."""

from __future__ import annotations

from functools import cache
from importlib import resources

HARNESS_FILES = ("binding.cpp", "binding_registry.h")
EXTENSION_NAME = "cuda_extension"


@cache
def harness_text(name: str) -> str:
    """Contents of one packaged harness file (binding.cpp, binding_registry.h, SKILL.md, templates)."""
    return resources.files("cuda_agent_mcp.workspace").joinpath("pristine", name).read_text(encoding="utf-8")
