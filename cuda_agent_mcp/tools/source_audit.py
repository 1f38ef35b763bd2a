"""The `audit` tool: the static audit of a workspace's sources (evaluation/audit.py), alone, with no
build and no GPU. Verify runs the same audit first, and the runtime op audit after it; this is the
quick check an author (or a policy) can run while writing."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.evaluation.audit import audit_workspace
from cuda_agent_mcp.results import AuditFinding
from cuda_agent_mcp.tools.session import Session


class SourceAuditResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    workspace: str
    vendor_libraries: tuple[str, ...] = Field(description="libraries the task's policy allows")
    findings: list[AuditFinding]
    clean: bool = Field(description="no finding; the runtime op audit during verify may still refuse")


async def audit_sources(session: Session) -> SourceAuditResult:
    """What verify's static audit would refuse in the workspace as it is now."""
    libraries = tuple(session.task.vendor_libraries)
    findings = audit_workspace(session.workspace.root, libraries, language=session.workspace.language)
    return SourceAuditResult(
        task_id=session.task.id,
        workspace=str(session.workspace.root),
        vendor_libraries=libraries,
        findings=findings,
        clean=not findings,
    )
