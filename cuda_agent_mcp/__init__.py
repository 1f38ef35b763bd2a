"""cuda-agent-mcp: an environment in which agents write, build, verify and time CUDA kernels.

The public API is the tool layer (async functions with pydantic models in and out) and its types.
"""

from cuda_agent_mcp.errors import (
    CudaAgentError,
    ExecutorUnavailable,
    GpuUnavailable,
    InfraError,
    TaskLoadError,
    TaskNotFound,
    ToolchainMissing,
    UsageError,
    WorkspaceError,
)
from cuda_agent_mcp.results import (
    BuildResult,
    Diagnostic,
    EvalResult,
    FileBuild,
    KernelResources,
    ProfileResult,
    Verdict,
    VerifyResult,
)
from cuda_agent_mcp.tasks import Task, TaskCatalog, load_dataset, load_kernelbench, load_task_file
from cuda_agent_mcp.tools import (
    CompileRequest,
    EvaluateRequest,
    ProfileRequest,
    Session,
    VerifyRequest,
    audit_task,
    compile_kernels,
    edit_file,
    evaluate_kernels,
    list_files,
    list_tasks,
    new_workspace,
    profile_kernels,
    read_file,
    search_files,
    show_task,
    verify_kernels,
    write_file,
)
from cuda_agent_mcp.workspace import Workspace

__version__ = "0.1.0"

__all__ = [
    "BuildResult",
    "CompileRequest",
    "CudaAgentError",
    "Diagnostic",
    "EvalResult",
    "EvaluateRequest",
    "ExecutorUnavailable",
    "FileBuild",
    "GpuUnavailable",
    "InfraError",
    "KernelResources",
    "ProfileRequest",
    "ProfileResult",
    "Session",
    "Task",
    "TaskCatalog",
    "TaskLoadError",
    "TaskNotFound",
    "ToolchainMissing",
    "UsageError",
    "Verdict",
    "VerifyRequest",
    "VerifyResult",
    "Workspace",
    "WorkspaceError",
    "audit_task",
    "compile_kernels",
    "edit_file",
    "evaluate_kernels",
    "list_files",
    "list_tasks",
    "load_dataset",
    "load_kernelbench",
    "load_task_file",
    "new_workspace",
    "profile_kernels",
    "read_file",
    "search_files",
    "show_task",
    "verify_kernels",
    "write_file",
]
