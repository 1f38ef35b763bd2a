"""The `compile` tool: build the session's workspace into its extension."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.build import ProgressCallback
from cuda_agent_mcp.results import BuildResult
from cuda_agent_mcp.tools.session import Session


class CompileRequest(BaseModel):
    """Arguments of `compile`. Flags are the harness's; only the target may be overridden."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arch: str | None = Field(
        default=None,
        pattern=r"^sm_\d+[af]?$",
        description="GPU target; default: this machine's GPU (sm_90a on Hopper) or sm_90a",
    )


async def compile_kernels(
    session: Session, request: CompileRequest | None = None, *, progress: ProgressCallback | None = None
) -> BuildResult:
    """Compile what changed in the workspace and link `cuda_extension`; failures are in the result."""
    request = request or CompileRequest()
    session.prewarm_judge()  # evaluation usually follows a build: its judge starts meanwhile
    return await session.builder.build(session.workspace, session.build_flags(request.arch), progress)
