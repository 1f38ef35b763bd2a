"""Agent workspaces: the on-disk layout, the pristine harness files, and confined file operations."""

from cuda_agent_mcp.workspace.harness import EXTENSION_NAME, HARNESS_FILES, harness_text
from cuda_agent_mcp.workspace.layout import (
    CANDIDATE_FILE,
    KERNELS_DIR,
    PROTECTED_FILES,
    REFERENCE_FILE,
    SourceFile,
    Workspace,
)

__all__ = [
    "CANDIDATE_FILE",
    "EXTENSION_NAME",
    "HARNESS_FILES",
    "KERNELS_DIR",
    "PROTECTED_FILES",
    "REFERENCE_FILE",
    "SourceFile",
    "Workspace",
    "harness_text",
]
