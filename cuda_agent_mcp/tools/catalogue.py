"""Every tool of the tool layer, declared once (`TOOLS`): the MCP server, the agent's actions, `KernelEnv`
and the trainer adapters register theirs from here. A new tool enters by a declaration in this list (or,
for a front-end's own tools such as MCP sessions, by `TOOLS.with_tools(...)`). Runs in the tool process.
"""

from __future__ import annotations

from cuda_agent_mcp.build import ProgressCallback
from cuda_agent_mcp.results import BuildResult, EvalResult, ProfileResult, VerifyResult
from cuda_agent_mcp.tasks import TaskCatalog
from cuda_agent_mcp.tools.build import CompileRequest, compile_kernels
from cuda_agent_mcp.tools.evaluate import (
    EvaluateRequest,
    ProfileRequest,
    VerifyRequest,
    evaluate_kernels,
    profile_kernels,
    verify_kernels,
)
from cuda_agent_mcp.tools.files import (
    EditFileRequest,
    FileContent,
    FileEdited,
    FileList,
    FileWritten,
    ListFilesRequest,
    ReadFileRequest,
    SearchFilesRequest,
    SearchResult,
    WriteFileRequest,
    edit_file,
    list_files,
    read_file,
    search_files,
    write_file,
)
from cuda_agent_mcp.tools.registry import Tool, ToolRegistry
from cuda_agent_mcp.tools.run import RunRequest, RunResult, run_command
from cuda_agent_mcp.tools.session import Session
from cuda_agent_mcp.tools.tasks import TaskList, TaskQuery, list_tasks

# The functions in the registry's one shape, (context, request, progress) -> result.


async def _list_tasks(
    catalog: TaskCatalog, request: TaskQuery, progress: ProgressCallback | None
) -> TaskList:
    return await list_tasks(catalog, request)


async def _read(session: Session, request: ReadFileRequest, progress: ProgressCallback | None) -> FileContent:
    return await read_file(session, request.path)


async def _write(
    session: Session, request: WriteFileRequest, progress: ProgressCallback | None
) -> FileWritten:
    return await write_file(session, request.path, request.content)


async def _edit(session: Session, request: EditFileRequest, progress: ProgressCallback | None) -> FileEdited:
    return await edit_file(
        session, request.path, request.old_text, request.new_text, replace_all=request.replace_all
    )


async def _list(session: Session, request: ListFilesRequest, progress: ProgressCallback | None) -> FileList:
    return await list_files(session, request.pattern)


async def _search(
    session: Session, request: SearchFilesRequest, progress: ProgressCallback | None
) -> SearchResult:
    return await search_files(session, request.regex, request.pattern, max_hits=request.max_hits)


async def _compile(
    session: Session, request: CompileRequest, progress: ProgressCallback | None
) -> BuildResult:
    return await compile_kernels(session, request, progress=progress)


async def _verify(
    session: Session, request: VerifyRequest, progress: ProgressCallback | None
) -> VerifyResult:
    return await verify_kernels(session, request, progress=progress)


async def _profile(
    session: Session, request: ProfileRequest, progress: ProgressCallback | None
) -> ProfileResult:
    return await profile_kernels(session, request, progress=progress)


async def _evaluate(
    session: Session, request: EvaluateRequest, progress: ProgressCallback | None
) -> EvalResult:
    return await evaluate_kernels(session, request, progress=progress)


async def _run(session: Session, request: RunRequest, progress: ProgressCallback | None) -> RunResult:
    return await run_command(session, request)


TOOLS = ToolRegistry(
    [
        Tool(
            name="list_tasks",
            title="List tasks",
            description="Tasks this server can start sessions on (bundled examples and configured sources).",
            request=TaskQuery,
            result=TaskList,
            run=_list_tasks,
            context=TaskCatalog,
            read_only=True,
            idempotent=True,
            surfaces=frozenset({"mcp"}),
            nested="query",
        ),
        Tool(
            name="read_file",
            title="Read a file",
            description="Read a text file of the workspace.",
            request=ReadFileRequest,
            result=FileContent,
            run=_read,
            context=Session,
            read_only=True,
            idempotent=True,
        ),
        Tool(
            name="write_file",
            title="Write a file",
            description="Create or replace a file of the workspace (model.py and the binding harness are "
            "protected).",
            request=WriteFileRequest,
            result=FileWritten,
            run=_write,
            context=Session,
            destructive=True,  # it replaces what was there
            idempotent=True,
        ),
        Tool(
            name="edit_file",
            title="Edit a file",
            description="Replace exact text in a workspace file.",
            request=EditFileRequest,
            result=FileEdited,
            run=_edit,
            context=Session,
            destructive=True,
        ),
        Tool(
            name="list_files",
            title="List files",
            description="Workspace files matching a glob pattern.",
            request=ListFilesRequest,
            result=FileList,
            run=_list,
            context=Session,
            read_only=True,
            idempotent=True,
        ),
        Tool(
            name="search_files",
            title="Search files",
            description="Lines matching a regular expression in workspace files.",
            request=SearchFilesRequest,
            result=SearchResult,
            run=_search,
            context=Session,
            read_only=True,
            idempotent=True,
            policy_fields=("regex", "pattern"),
        ),
        Tool(
            name="compile",
            title="Compile",
            description="Build the workspace's kernels incrementally; diagnostics name file, line and column.",
            request=CompileRequest,
            result=BuildResult,
            run=_compile,
            context=Session,
            idempotent=True,
            long_running=True,
            policy_fields=(),
            nested="request",
        ),
        Tool(
            name="verify",
            title="Verify",
            description="Build, then check ModelNew against the reference on fresh secret inputs in a "
            "separate process.",
            request=VerifyRequest,
            result=VerifyResult,
            run=_verify,
            context=Session,
            uses_gpu=True,
            long_running=True,
            policy_fields=("trials",),
            nested="request",
        ),
        Tool(
            name="profile",
            title="Profile",
            description="Build, then time ModelNew against PyTorch eager and torch.compile (every timed "
            "output rechecked).",
            request=ProfileRequest,
            result=ProfileResult,
            run=_profile,
            context=Session,
            uses_gpu=True,
            long_running=True,
            policy_fields=(),
            nested="request",
        ),
        Tool(
            name="evaluate",
            title="Evaluate",
            description="verify + profile + reward (paper milestones: -1 fail, 1 correct, 2 beats eager, "
            "3 beats both).",
            request=EvaluateRequest,
            result=EvalResult,
            run=_evaluate,
            context=Session,
            uses_gpu=True,
            long_running=True,
            policy_fields=("verify.trials",),
            nested="request",
        ),
        Tool(
            name="run",
            title="Run a command",
            description="Run a command in the workspace (e.g. a tuning script) in the sandbox: no network, "
            "limits, killed with its whole process tree at the time limit; stdout and stderr come back "
            "capped.",
            request=RunRequest,
            result=RunResult,
            run=_run,
            context=Session,
            destructive=True,  # a command may change or delete any file of the workspace
            nested="request",
        ),
    ]
)
