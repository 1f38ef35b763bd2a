"""Agent workspaces: the on-disk layout, the pristine harness files, and confined file operations."""

from cuda_agent_mcp.workspace.harness import EXTENSION_NAME, GENERATED_MODULE, HARNESS_FILES, harness_text
from cuda_agent_mcp.workspace.layout import (
    CANDIDATE_FILE,
    KERNELS_DIR,
    LANGUAGES,
    PROTECTED_FILES,
    REFERENCE_FILE,
    SourceFile,
    Workspace,
    recorded_language,
)

__all__ = [
    "CANDIDATE_FILE",
    "EXTENSION_NAME",
    "GENERATED_MODULE",
    "HARNESS_FILES",
    "KERNELS_DIR",
    "LANGUAGES",
    "PROTECTED_FILES",
    "REFERENCE_FILE",
    "SourceFile",
    "Workspace",
    "harness_text",
    "recorded_language",
]
