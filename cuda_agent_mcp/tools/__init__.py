"""The tool layer: one async function per tool, pydantic in and out, each declared once in `TOOLS`.
Every front-end calls these."""

from cuda_agent_mcp.tools.build import CompileRequest, compile_kernels
from cuda_agent_mcp.tools.catalogue import TOOLS
from cuda_agent_mcp.tools.evaluate import (
    EvaluateRequest,
    JudgeFailed,
    ProfileRequest,
    VerifyRequest,
    evaluate_kernels,
    profile_kernels,
    verify_kernels,
)
from cuda_agent_mcp.tools.files import edit_file, list_files, read_file, search_files, write_file
from cuda_agent_mcp.tools.registry import Surface, Tool, ToolRegistry
from cuda_agent_mcp.tools.rules import TaskRules, task_rules
from cuda_agent_mcp.tools.session import Session
from cuda_agent_mcp.tools.source_audit import SourceAuditResult, audit_sources
from cuda_agent_mcp.tools.task_audit import TaskAuditRequest, TaskAuditResult, audit_task
from cuda_agent_mcp.tools.tasks import (
    TaskDetails,
    TaskList,
    TaskQuery,
    WorkspaceInfo,
    list_tasks,
    new_workspace,
    show_task,
)

__all__ = [
    "TOOLS",
    "CompileRequest",
    "EvaluateRequest",
    "JudgeFailed",
    "ProfileRequest",
    "Session",
    "SourceAuditResult",
    "Surface",
    "TaskAuditRequest",
    "TaskAuditResult",
    "TaskDetails",
    "TaskList",
    "TaskQuery",
    "TaskRules",
    "Tool",
    "ToolRegistry",
    "VerifyRequest",
    "WorkspaceInfo",
    "audit_sources",
    "audit_task",
    "compile_kernels",
    "edit_file",
    "evaluate_kernels",
    "list_files",
    "list_tasks",
    "new_workspace",
    "profile_kernels",
    "read_file",
    "search_files",
    "show_task",
    "task_rules",
    "verify_kernels",
    "write_file",
]
