"""Result models returned by the tool layer: frozen, no sentinels (None means "not measured")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


Severity = Literal["error", "warning", "note"]


class Diagnostic(_Frozen):
    """One compiler or linker message, located in a workspace file where the tool said where."""

    file: str | None = Field(description="workspace-relative path, None for messages not tied to a file")
    line: int | None = None
    column: int | None = None
    severity: Severity
    message: str
    tool: Literal["nvcc", "c++", "ptxas", "linker"]


class KernelResources(_Frozen):
    """Per-kernel resource usage reported by `ptxas -v`."""

    file: str
    name: str = Field(description="demangled kernel name")
    mangled_name: str
    arch: str
    registers: int
    shared_memory_bytes: int = Field(description="static shared memory")
    constant_memory_bytes: int = 0
    stack_frame_bytes: int = 0
    spill_stores_bytes: int = 0
    spill_loads_bytes: int = 0
    barriers: int = 0


FileAction = Literal["compiled", "cached", "failed", "timed_out"]


class FileBuild(_Frozen):
    """What the build did with one translation unit."""

    file: str = Field(description="workspace-relative path; the harness's binding.cpp is 'binding.cpp'")
    kind: Literal["cu", "cpp"]
    action: FileAction
    wall_s: float = Field(description="compile time now; 0 for a cache hit")
    object_key: str = Field(description="content address of the object in the build cache")


BuildFailure = Literal["no_sources", "compile_error", "link_error", "timeout", "output_limit"]


class BuildResult(_Frozen):
    """The outcome of turning a workspace into a Python extension."""

    ok: bool
    failure: BuildFailure | None = None
    summary: str = Field(description="one line a person or a model can act on")
    source_hash: str = Field(description="sha256 over every source and header the build used")
    build_key: str | None = Field(None, description="content address of the linked extension")
    extension_path: str | None = Field(None, description="the built extension in the build cache")
    workspace_extension_path: str | None = Field(None, description="the copy placed in the workspace")
    files: list[FileBuild] = []
    diagnostics: list[Diagnostic] = []
    kernels: list[KernelResources] = []
    ignored_protected_files: list[str] = Field(
        default_factory=list,
        description="protected files edited in the workspace; the pristine copies were used",
    )
    log: str = Field("", description="compiler and linker output of the failing steps, truncated")
    arch: str
    wall_s: float

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]
