"""File tools over the session's workspace, for agents without file access of their own."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.tools.session import Session
from cuda_agent_mcp.workspace import files


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


WORKSPACE_PATH = "a path inside the workspace, e.g. kernels/relu.cu"
GLOB = "glob pattern, relative to the workspace"


class ReadFileRequest(_Model):
    path: str = Field(description=WORKSPACE_PATH)


class WriteFileRequest(_Model):
    path: str = Field(description=WORKSPACE_PATH)
    content: str = Field(description="the whole new content of the file")


class EditFileRequest(_Model):
    path: str = Field(description=WORKSPACE_PATH)
    old_text: str = Field(description="exact text to replace; must occur once unless replace_all")
    new_text: str = Field(description="the text to put in its place")
    replace_all: bool = Field(default=False, description="replace every occurrence")


class ListFilesRequest(_Model):
    pattern: str = Field(default="**/*", description=GLOB)


class SearchFilesRequest(_Model):
    regex: str = Field(description="a regular expression (Python syntax) to find in each line")
    pattern: str = Field(default="**/*", description="glob pattern of the files to search")
    max_hits: int = Field(default=200, ge=1, le=1000, description="return at most this many lines")


class FileContent(_Model):
    path: str
    content: str


class FileWritten(_Model):
    path: str
    bytes_written: int


class FileEdited(_Model):
    path: str
    replacements: int


class FileList(_Model):
    files: list[str]


class SearchHit(_Model):
    path: str
    line: int
    text: str


class SearchResult(_Model):
    hits: list[SearchHit]
    truncated: bool = Field(description="more lines matched than were returned")


async def read_file(session: Session, path: str) -> FileContent:
    return FileContent(path=path, content=files.read_text(session.workspace.root, path))


async def write_file(session: Session, path: str, content: str) -> FileWritten:
    return FileWritten(path=path, bytes_written=files.write_text(session.workspace.root, path, content))


async def edit_file(
    session: Session, path: str, old_text: str, new_text: str, *, replace_all: bool = False
) -> FileEdited:
    count = files.edit_text(session.workspace.root, path, old_text, new_text, replace_all=replace_all)
    return FileEdited(path=path, replacements=count)


async def list_files(session: Session, pattern: str = "**/*") -> FileList:
    return FileList(files=files.list_paths(session.workspace.root, pattern))


async def search_files(
    session: Session, regex: str, pattern: str = "**/*", *, max_hits: int = 200
) -> SearchResult:
    hits = files.search_text(session.workspace.root, regex, pattern, max_hits=max_hits + 1)
    return SearchResult(
        hits=[SearchHit(path=p, line=n, text=t) for p, n, t in hits[:max_hits]],
        truncated=len(hits) > max_hits,
    )
