"""Turn a workspace into the `cuda_extension` Python module: plan, compile what changed, link.

Every translation unit is keyed by its bytes, the workspace's headers, the flags and the toolchain;
a unit whose key is in the cache is not compiled again. The harness's binding.cpp has a key that
depends on nothing in the workspace, so it is compiled once per toolchain and shared by all workspaces.
Compilers run through the session's executor in a staging copy that holds the pristine harness files,
confined to it and the toolchain (`confinement.py`); their output is redacted (`redact.py`) before any
of it becomes a diagnostic or the log.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import anyio
from anyio.lowlevel import RunVar
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.build.cache import BuildCache, ObjectRecord, copy_atomically
from cuda_agent_mcp.build.confine import EXIT_UNCONFINED
from cuda_agent_mcp.build.confinement import (
    TEMP_DIR,
    BuildView,
    build_environment,
    plan_view,
    toolchain_readable,
)
from cuda_agent_mcp.build.diagnostics import (
    demangle,
    parse_compiler_output,
    parse_ptxas_resources,
    parse_unresolved_symbols,
)
from cuda_agent_mcp.build.facts import file_identity
from cuda_agent_mcp.build.flags import (
    BuildFlags,
    cxx_command,
    fingerprint,
    link_command,
    nvcc_command,
    vendor_library_files,
)
from cuda_agent_mcp.build.inputs import planted_links, scan_directives, stage_inputs
from cuda_agent_mcp.build.nvrtc import (
    MODULE_TEMPLATE,
    bad_kernel_names,
    find_nvrtc,
    host_runtime_includes,
    launchable,
    module_text,
    nvrtc_command,
)
from cuda_agent_mcp.build.nvrtc import readable_paths as nvrtc_readable
from cuda_agent_mcp.build.redact import PathScope, place, redact_output, workspace_line_reader
from cuda_agent_mcp.build.registration import registration_problems
from cuda_agent_mcp.build.toolchain import Toolchain
from cuda_agent_mcp.build.triton import (
    COMPILE_SCRIPT,
    capability,
    declared_kernels,
    name_problems,
    read_report,
    syntax_problems,
    triton_command,
    triton_version,
)
from cuda_agent_mcp.build.triton import OUTPUT_DIR as TRITON_OUTPUT
from cuda_agent_mcp.build.triton import REFERENCE_NAME as TRITON_REFERENCE
from cuda_agent_mcp.build.triton import readable_paths as triton_readable
from cuda_agent_mcp.build.warm_compile import WAIT_S as WARM_WAIT_S
from cuda_agent_mcp.build.warm_compile import WarmCompiles
from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.executors import Executor, ProcessLimits, ProcessResult
from cuda_agent_mcp.results import (
    BuildFailure,
    BuildResult,
    Diagnostic,
    FileAction,
    FileBuild,
    KernelLanguage,
    KernelResources,
)
from cuda_agent_mcp.workspace import CANDIDATE_FILE, HARNESS_FILES, SourceFile, Workspace, harness_text
from cuda_agent_mcp.workspace.harness import EXTENSION_NAME, GENERATED_MODULE

# v2: objects compiled inside the build's view (earlier ones were not), keyed by whether they were.
CACHE_SCHEMA = "v2"


class BuildProgress(BaseModel):
    """One step of a build (or of the evaluation around it: `queue` for a GPU, `verify` or `profile` when
    the judge starts on it, `retry` after a harness failure), for progress displays."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stage: Literal["queue", "plan", "compile", "link", "done", "verify", "profile", "retry"]
    message: str
    done: int = 0
    total: int = 0
    file: str | None = Field(
        default=None, description="the unit a compile event is about ('binding.cpp': the harness's)"
    )


ProgressCallback = Callable[[BuildProgress], None]


@dataclass(frozen=True)
class BuildLimits:
    """Limits on the compilers: per translation unit, for the link, and on their output."""

    compile_timeout_s: float = 180.0
    link_timeout_s: float = 60.0
    max_output_bytes: int = 4 * 1024 * 1024
    jobs: int = max(1, os.cpu_count() or 1)

    def process(self, timeout_s: float) -> ProcessLimits:
        return ProcessLimits(timeout_s=timeout_s, max_output_bytes=self.max_output_bytes)


@dataclass(frozen=True)
class _Unit:
    file: str  # workspace-relative path ("binding.cpp" for the harness)
    kind: Literal["cu", "cpp"]
    key: str
    nvrtc: bool = False  # a CuPy workspace's unit: compiled to a cubin by NVRTC, not to an object by nvcc


@dataclass
class _UnitOutcome:
    unit: _Unit
    action: Literal["compiled", "cached", "failed", "timed_out"]
    record: ObjectRecord | None
    wall_s: float
    diagnostics: list[Diagnostic]
    failure: BuildFailure | None = None
    log: str = ""


class Builder:
    """Builds workspaces with one toolchain, one cache and one executor."""

    def __init__(
        self,
        toolchain: Toolchain,
        cache: BuildCache,
        executor: Executor,
        limits: BuildLimits | None = None,
        view: BuildView | None = None,
    ) -> None:
        self.toolchain = toolchain
        self.cache = cache
        self.executor = executor
        self.limits = limits or BuildLimits()
        self._view = view
        self._readable = toolchain_readable(toolchain)
        self._nvrtc: Path | None = None
        self._warm_triton = WarmCompiles()
        self._warm_nvrtc = WarmCompiles()

    @property
    def nvrtc(self) -> Path:
        """libnvrtc for CuPy workspaces, found on first use (ToolchainMissing where there is none)."""
        if self._nvrtc is None:
            self._nvrtc = find_nvrtc(self.toolchain)
        return self._nvrtc

    @property
    def view(self) -> BuildView:
        """The build's confinement, planned on first use (ExecutorUnavailable where none can be made)."""
        if self._view is None:
            self._view = plan_view(self.executor)
        return self._view

    async def build(
        self, workspace: Workspace, flags: BuildFlags, progress: ProgressCallback | None = None
    ) -> BuildResult:
        started = time.monotonic()
        notify = progress or (lambda _event: None)
        view = self.view
        language = workspace.language
        if language == "triton":
            return await self._build_triton(workspace, flags, notify, started)
        sources = workspace.build_sources()
        header_names = sorted(workspace.build_headers())
        harness_digest = fingerprint(*(harness_text(n) for n in _harness(language)))
        ignored = workspace.modified_protected_files()
        staging = self.cache.staging_dir()
        try:
            # Hashes come from the bytes copied into staging: what the compilers see is what the keys say.
            staged = stage_inputs(workspace.root, staging, [s.relpath for s in sources] + header_names)
            hashes = staged.hashes
            source_hash = fingerprint(
                CACHE_SCHEMA,
                sorted((s.relpath, hashes.get(s.relpath, "")) for s in sources),
                sorted((h, hashes.get(h, "")) for h in header_names),
                harness_digest,
            )

            def finish(**fields: Any) -> BuildResult:
                return BuildResult(
                    source_hash=source_hash,
                    ignored_protected_files=ignored,
                    arch=flags.arch,
                    confinement=list(view.layers),
                    wall_s=round(time.monotonic() - started, 3),
                    language=language,
                    **fields,
                )

            if not sources:
                wanted = "kernels/<name>.cu" + (
                    " and kernels/<name>_binding.cpp" if language == "cuda" else ""
                )
                return finish(ok=False, failure="no_sources", summary=f"no kernel sources: add {wanted}")
            refused = [*staged.refused, *planted_links(workspace.root)]
            if language == "cupy":
                refused += [_host_code_refusal(s.relpath) for s in sources if s.kind != "cu"]
                refused += host_runtime_includes(staging, sorted(hashes))
            refused += scan_directives(staging, sorted(hashes))
            if refused:
                first = refused[0]
                assert first.file is not None  # a refusal always names its file (inputs._refusal)
                where = first.file + (f":{first.line}" if first.line else "")
                return finish(
                    ok=False,
                    failure="refused_input",
                    summary=f"{len(refused)} input(s) refused; first: {where}: {first.message}",
                    diagnostics=refused,
                )
            for name in workspace.harness_files:
                (staging / name).write_text(harness_text(name))
            (staging / TEMP_DIR).mkdir()
            return await self._build_staged(
                sources, hashes, header_names, harness_digest, staging, flags, notify, workspace, finish
            )
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    async def _build_staged(
        self,
        sources: list[SourceFile],
        hashes: dict[str, str],
        header_names: list[str],
        harness_digest: str,
        staging: Path,
        flags: BuildFlags,
        notify: ProgressCallback,
        workspace: Workspace,
        finish: Callable[..., BuildResult],
    ) -> BuildResult:
        header_digest = fingerprint(sorted((h, hashes[h]) for h in header_names))
        language = workspace.language
        units = (
            [
                _Unit(
                    "binding.cpp",
                    "cpp",
                    self._unit_key("binding.cpp", "cpp", harness_digest, "", harness_digest, flags),
                )
            ]
            if language == "cuda"
            else []
        )
        units += [
            _Unit(
                s.relpath,
                s.kind,
                self._unit_key(
                    s.relpath, s.kind, hashes[s.relpath], header_digest, harness_digest, flags, language
                ),
                nvrtc=language == "cupy",
            )
            for s in sources
        ]
        cached = {u.key: rec for u in units if (rec := self.cache.lookup_object(u.key)) is not None}
        misses = [u for u in units if u.key not in cached]
        notify(
            BuildProgress(
                stage="plan", message=f"{len(misses)} to compile, {len(cached)} cached", total=len(units)
            )
        )

        outcomes: dict[str, _UnitOutcome] = {
            u.key: _UnitOutcome(u, "cached", cached[u.key], 0.0, list(cached[u.key].diagnostics))
            for u in units
            if u.key in cached
        }
        if misses:
            outcomes |= await self._compile_all(misses, staging, flags, notify, len(units))
        ordered = [outcomes[u.key] for u in units]
        files = [
            FileBuild(
                file=o.unit.file,
                kind=o.unit.kind,
                action=o.action,
                wall_s=round(o.wall_s, 3),
                object_key=o.unit.key,
            )
            for o in ordered
        ]
        diagnostics = [d for o in ordered for d in o.diagnostics]
        kernels: list[KernelResources] = [k for o in ordered if o.record for k in o.record.kernels]
        failed = [o for o in ordered if o.failure is not None]
        if failed:
            return finish(
                ok=False,
                failure=failed[0].failure,
                summary=_failure_summary(failed, diagnostics),
                files=files,
                diagnostics=diagnostics,
                kernels=kernels,
                log="\n".join(o.log for o in failed),
            )
        if language == "cupy":
            return self._assemble_module(ordered, files, diagnostics, kernels, workspace, notify, finish)
        if problems := registration_problems(workspace, sources):
            return finish(
                ok=False,
                failure="no_binding",
                summary=problems[0].message,
                files=files,
                diagnostics=diagnostics + problems,
                kernels=kernels,
            )

        notify(BuildProgress(stage="link", message="linking", done=len(units), total=len(units)))
        build_key = fingerprint(
            CACHE_SCHEMA,
            "extension",
            [u.key for u in units],
            self.toolchain.fingerprint,
            *((flags.vendor_libraries,) if flags.vendor_libraries else ()),
        )
        extension = self.cache.extension_path(build_key)
        if self.cache.lookup_extension(build_key) is None:  # missing, or evicted for a bad hash
            link_diagnostics, link_log = await self._link(units, staging, build_key, flags)
            if link_diagnostics:
                diagnostics += link_diagnostics
                return finish(
                    ok=False,
                    failure="link_error",
                    summary=f"link failed: {link_diagnostics[0].message}",
                    files=files,
                    diagnostics=diagnostics,
                    kernels=kernels,
                    log=link_log,
                )
        return self._built(extension, build_key, files, diagnostics, kernels, workspace, notify, finish)

    def _built(
        self,
        extension: Path,
        build_key: str,
        files: list[FileBuild],
        diagnostics: list[Diagnostic],
        kernels: list[KernelResources],
        workspace: Workspace,
        notify: ProgressCallback,
        finish: Callable[..., BuildResult],
        note: str = "",
    ) -> BuildResult:
        """A build that succeeded: its module copied into the workspace (for the agent's own scripts)."""
        in_workspace = workspace.root / extension.name
        copy_atomically(extension, in_workspace)
        compiled = sum(1 for f in files if f.action == "compiled")
        result = finish(
            ok=True,
            summary=f"built {len(files)} files ({compiled} compiled, {len(files) - compiled} cached){note}",
            build_key=build_key,
            extension_path=str(extension),
            workspace_extension_path=str(in_workspace),
            files=files,
            diagnostics=diagnostics,
            kernels=kernels,
        )
        notify(BuildProgress(stage="done", message=result.summary, done=len(files), total=len(files)))
        return result

    def _assemble_module(
        self,
        ordered: list[_UnitOutcome],
        files: list[FileBuild],
        diagnostics: list[Diagnostic],
        kernels: list[KernelResources],
        workspace: Workspace,
        notify: ProgressCallback,
        finish: Callable[..., BuildResult],
    ) -> BuildResult:
        """A CuPy workspace's "link": its cubins and kernel names into the generated cuda_extension.py."""
        exposed = launchable(kernels)
        seen: dict[str, str] = {}
        for kernel in kernels:
            if (first := seen.setdefault(kernel.mangled_name, kernel.file)) != kernel.file:
                message = (
                    f"kernel {kernel.mangled_name} is defined in {first} and {kernel.file}: "
                    "cuda_extension needs one kernel per name (rename one, or make it static)"
                )
                diagnostics = [
                    *diagnostics,
                    Diagnostic(file=kernel.file, severity="error", message=message, tool="linker"),
                ]
                return finish(
                    ok=False,
                    failure="link_error",
                    summary=message,
                    files=files,
                    diagnostics=diagnostics,
                    kernels=kernels,
                )
        if not exposed:
            message = (
                'no extern "C" __global__ kernel in kernels/*.cu: cuda_extension would have nothing to launch'
            )
            return finish(
                ok=False,
                failure="no_binding",
                summary=message,
                files=files,
                diagnostics=diagnostics,
                kernels=kernels,
            )
        build_key = fingerprint(
            CACHE_SCHEMA, "cupy-module", [o.unit.key for o in ordered], harness_text(MODULE_TEMPLATE)
        )
        module = self.cache.lookup_extension(build_key, GENERATED_MODULE)
        if module is None:
            cubins = {o.unit.file: self.cache.object_path(o.unit.key).read_bytes() for o in ordered}
            built = self.cache.staging_dir() / GENERATED_MODULE
            try:
                built.write_text(module_text(cubins, exposed))
                module = self.cache.store_extension(built, build_key, GENERATED_MODULE)
            finally:
                shutil.rmtree(built.parent, ignore_errors=True)
        note = f"; kernels: {', '.join(sorted(exposed))}"
        return self._built(module, build_key, files, diagnostics, kernels, workspace, notify, finish, note)

    async def _build_triton(
        self, workspace: Workspace, flags: BuildFlags, notify: ProgressCallback, started: float
    ) -> BuildResult:
        """A Triton workspace: its Python modules staged, every recorded launch compiled by
        `triton_compile.py` in the build's view; the result (diagnostics, kernels) cached by content."""
        view = self.view
        modules = workspace.python_sources()
        staging = self.cache.staging_dir()
        try:
            staged = stage_inputs(workspace.root, staging, sorted(modules))
            hashes = staged.hashes
            reference_sha = hashlib.sha256(workspace.reference_code.encode()).hexdigest()
            source_hash = fingerprint(CACHE_SCHEMA, "triton", sorted(hashes.items()), reference_sha)

            def finish(**fields: Any) -> BuildResult:
                return BuildResult(
                    source_hash=source_hash,
                    ignored_protected_files=workspace.modified_protected_files(),
                    arch=flags.arch,
                    confinement=list(view.layers),
                    wall_s=round(time.monotonic() - started, 3),
                    language="triton",
                    **fields,
                )

            refused = [*staged.refused, *planted_links(workspace.root)]
            refused += [_not_triton(s.relpath) for s in workspace.build_sources()]
            if refused:
                first = refused[0]
                where = (first.file or "") + (f":{first.line}" if first.line else "")
                return finish(
                    ok=False,
                    failure="refused_input",
                    summary=f"{len(refused)} input(s) refused; first: {where}: {first.message}",
                    diagnostics=refused,
                )
            texts = {name: (staging / name).read_text(encoding="utf-8", errors="replace") for name in hashes}
            if problems := syntax_problems(texts):
                first = problems[0]
                return finish(
                    ok=False,
                    failure="compile_error",
                    summary=f"{first.file}:{first.line}: {first.message}",
                    diagnostics=problems,
                )
            declared = declared_kernels(texts)
            if CANDIDATE_FILE not in hashes or not declared:
                return finish(
                    ok=False,
                    failure="no_sources",
                    summary="no @triton.jit kernel: write your kernels and ModelNew in model_new.py",
                )
            if problems := name_problems(declared):
                return finish(
                    ok=False, failure="compile_error", summary=problems[0].message, diagnostics=problems
                )
            key = fingerprint(
                CACHE_SCHEMA, "triton", sorted(hashes.items()), reference_sha, COMPILE_SCRIPT.read_text(),
                triton_version(), self.toolchain.fingerprint, flags.arch,
                "confined" if view.confined else "unconfined",
            )  # fmt: skip
            files = sorted(hashes)
            async with _unit_lock(key):
                cached = self.cache.lookup_object(key)
                action: FileAction = "cached"
                if cached is not None:
                    record = cached
                else:
                    notify(
                        BuildProgress(stage="compile", message=f"compiling {len(declared)} Triton kernel(s)")
                    )
                    record, failure, log = await self._compile_triton(
                        key, staging, workspace.reference_code, declared, set(files), flags
                    )
                    action = "compiled" if failure is None else "failed"
                    if failure is not None:
                        error = next((d for d in record.diagnostics if d.severity == "error"), None)
                        where = f"{error.file}:{error.line}: " if error and error.file and error.line else ""
                        return finish(
                            ok=False,
                            failure=failure,
                            summary=f"{where}{error.message if error else 'the Triton compile failed'}",
                            files=_python_files(files, "failed", record.compile_wall_s, key),
                            diagnostics=record.diagnostics,
                            kernels=record.kernels,
                            log=log,
                        )
            summary = f"built {len(files)} Python file(s) ({action}); kernels: {', '.join(sorted(declared))}"
            result = finish(
                ok=True,
                summary=summary,
                build_key=key,
                files=_python_files(
                    files, action, record.compile_wall_s if action == "compiled" else 0.0, key
                ),
                diagnostics=record.diagnostics,
                kernels=record.kernels,
            )
            notify(BuildProgress(stage="done", message=summary, done=len(files), total=len(files)))
            return result
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    async def _compile_triton(
        self,
        key: str,
        staging: Path,
        reference: str,
        declared: dict[str, tuple[str, int]],
        files: set[str],
        flags: BuildFlags,
    ) -> tuple[ObjectRecord, BuildFailure | None, str]:
        (staging / TRITON_REFERENCE).write_text(reference)
        argv = triton_command(capability(flags.arch))
        readable = [*self._readable, *triton_readable()]
        warm = self._warm_triton.take(argv)
        try:
            if warm is not None:  # its imports are paid: fill its staging and let it go
                result = await warm.compile(staging, [*sorted(files), TRITON_REFERENCE])
                output = warm.staging / TRITON_OUTPUT
            else:
                (staging / TEMP_DIR).mkdir(exist_ok=True)
                result = await self._run(argv, staging, readable, self.limits.compile_timeout_s)
                output = staging / TRITON_OUTPUT
            return self._triton_outcome(key, output, result, declared, files, flags)
        finally:
            if warm is not None:
                shutil.rmtree(warm.staging, ignore_errors=True)
            ahead = [*argv, "--wait", str(WARM_WAIT_S)]
            self._warm_triton.after_build(argv, self._warm_staging, partial(self._run_ahead, ahead, readable))

    def _warm_staging(self) -> Path:
        staging = self.cache.staging_dir()
        (staging / TEMP_DIR).mkdir()
        return staging

    def _run_ahead(self, argv: list[str], readable: list[Path], staging: Path) -> ProcessResult:
        """A compile started ahead (`argv` asks it to wait up to WAIT_S for work), on its own thread and
        event loop."""
        timeout = WARM_WAIT_S + self.limits.compile_timeout_s
        return anyio.run(self._run, argv, staging, readable, timeout)

    def _triton_outcome(
        self,
        key: str,
        output: Path,
        result: ProcessResult,
        declared: dict[str, tuple[str, int]],
        files: set[str],
        flags: BuildFlags,
    ) -> tuple[ObjectRecord, BuildFailure | None, str]:
        diagnostics, kernels, note = read_report(output, declared, files, flags.arch, result.returncode or 0)
        failure: BuildFailure | None = None
        if result.timed_out:
            failure = "timeout"
            diagnostics.append(
                Diagnostic(
                    file=None,
                    severity="error",
                    message=f"compiling took longer than {self.limits.compile_timeout_s:.0f} s and was stopped",
                    tool="triton",
                )
            )
        elif result.output_limit_hit:
            failure = "output_limit"
        elif not result.ok or any(d.severity == "error" for d in diagnostics):
            failure = "compile_error"
        if failure is None:
            diagnostics.append(Diagnostic(file=None, severity="note", message=note, tool="triton"))
        record = ObjectRecord(
            key=key,
            file=CANDIDATE_FILE,
            kind="py",
            diagnostics=diagnostics,
            kernels=kernels,
            compile_wall_s=result.wall_s,
        )
        if failure is None:
            self.cache.store_object(output / "report.json", record)
        log = "" if failure is None else f"== triton ==\n{result.output[-20000:]}"
        return record, failure, log

    # -- steps ----------------------------------------------------------------------------------

    def _unit_key(
        self,
        file: str,
        kind: str,
        source_sha: str,
        header_digest: str,
        harness_digest: str,
        flags: BuildFlags,
        language: KernelLanguage = "cuda",
    ) -> str:
        # A C++ unit's object does not depend on the GPU arch or fast-math, so they stay out of its key.
        # What the link adds (vendor libraries) does not change an object.
        flag_part = (
            flags.model_dump(exclude={"vendor_libraries"})
            if kind == "cu"
            else {"optimization": flags.optimization}
        )
        # An object compiled without a view (reduced isolation) never serves a confined build.
        return fingerprint(
            CACHE_SCHEMA, kind, file, source_sha, header_digest, harness_digest, json.dumps(flag_part, sort_keys=True),
            self.toolchain.fingerprint, "confined" if self.view.confined else "unconfined",
            *((language, file_identity(self.nvrtc)) if language != "cuda" else ()),
        )  # fmt: skip

    async def _compile_all(
        self, units: list[_Unit], staging: Path, flags: BuildFlags, notify: ProgressCallback, total: int
    ) -> dict[str, _UnitOutcome]:
        limiter = anyio.CapacityLimiter(self.limits.jobs)
        outcomes: dict[str, _UnitOutcome] = {}
        done = total - len(units)

        async def compile_one(unit: _Unit) -> None:
            nonlocal done

            def event(message: str) -> None:  # two per unit: its start, then its end
                notify(
                    BuildProgress(stage="compile", message=message, done=done, total=total, file=unit.file)
                )

            async with limiter:
                event(f"compiling {unit.file}")
                outcomes[unit.key] = await self._compile(unit, staging, flags)
                done += 1
                event(f"{unit.file}: {outcomes[unit.key].action}")

        async with anyio.create_task_group() as group:
            # The slow C++ units first, so the short nvcc runs fill in behind them.
            for unit in sorted(units, key=lambda u: u.kind != "cpp"):
                group.start_soon(compile_one, unit)
        return outcomes

    async def _compile(self, unit: _Unit, staging: Path, flags: BuildFlags) -> _UnitOutcome:
        # One compile per object key at a time in this process: concurrent sessions building the same
        # harness binding or kernel wait for the first and then find it in the cache.
        async with _unit_lock(unit.key):
            cached = self.cache.lookup_object(unit.key)
            if cached is not None:
                return _UnitOutcome(unit, "cached", cached, 0.0, list(cached.diagnostics))
            return await self._compile_now(unit, staging, flags)

    async def _compile_now(self, unit: _Unit, staging: Path, flags: BuildFlags) -> _UnitOutcome:
        if unit.nvrtc:
            return await self._compile_nvrtc(unit, staging, flags)
        # "./" first: a file name can never be read as an option.
        build = nvcc_command if unit.kind == "cu" else cxx_command
        argv = build(self.toolchain, flags, f"./{unit.file}", f"./{unit.file}.o", ["."])
        result = await self._run(argv, staging, self._readable, self.limits.compile_timeout_s)
        return self._unit_outcome(unit, result, staging, self._readable)

    async def _compile_nvrtc(self, unit: _Unit, staging: Path, flags: BuildFlags) -> _UnitOutcome:
        """A CuPy workspace's source, in the NVRTC process started ahead when one waits (build/warm_compile.py:
        its staging gets a copy of this build's), else in a fresh one."""
        readable = [*self._readable, *nvrtc_readable(self.nvrtc)]
        ahead = nvrtc_command(self.toolchain, flags, self.nvrtc, wait_s=WARM_WAIT_S)
        warm = self._warm_nvrtc.take(ahead)
        try:
            if warm is not None:  # its start-up is paid: fill its staging and let it go
                names = [str(p.relative_to(staging)) for p in sorted(staging.rglob("*")) if p.is_file()]
                result = await warm.compile(staging, names, go=unit.file)
                return self._unit_outcome(unit, result, warm.staging, readable)
            argv = nvrtc_command(
                self.toolchain, flags, self.nvrtc, source=f"./{unit.file}", output=f"./{unit.file}.o"
            )
            result = await self._run(argv, staging, readable, self.limits.compile_timeout_s)
            return self._unit_outcome(unit, result, staging, readable)
        finally:
            if warm is not None:
                shutil.rmtree(warm.staging, ignore_errors=True)
            self._warm_nvrtc.after_build(ahead, self._warm_staging, partial(self._run_ahead, ahead, readable))

    def _unit_outcome(
        self, unit: _Unit, result: ProcessResult, staging: Path, readable: list[Path]
    ) -> _UnitOutcome:
        """What one unit's compile gave (its object, in `staging`, stored in the cache when it built)."""
        output = f"./{unit.file}.o"
        tool = "nvcc" if unit.kind == "cu" else "c++"
        scope = PathScope.of(staging, readable)
        diagnostics = [
            place(d, scope, unit.file)
            for d in parse_compiler_output(
                result.output,
                tool=tool,
                path_map={},
                unit_file=unit.file,
                source_line=workspace_line_reader(scope),
            )
        ]
        if not result.ok:
            return self._failed_unit(unit, result, diagnostics)
        kernels = (
            parse_ptxas_resources(result.output, file=unit.file, demangle=demangle)
            if unit.kind == "cu"
            else []
        )
        if unit.nvrtc:
            diagnostics += bad_kernel_names(kernels, unit.file)
        record = ObjectRecord(
            key=unit.key,
            file=unit.file,
            kind=unit.kind,
            diagnostics=diagnostics,
            kernels=kernels,
            compile_wall_s=result.wall_s,
        )
        self.cache.store_object(staging / output, record)
        return _UnitOutcome(unit, "compiled", record, result.wall_s, diagnostics)

    async def _run(
        self, argv: list[str], staging: Path, readable: list[Path], timeout_s: float
    ) -> ProcessResult:
        """One compiler or linker command inside the build's view, its output redacted."""
        view = self.view
        result = await view.executor.run(
            view.command(argv, staging=staging, readable=readable),
            cwd=staging,
            limits=self.limits.process(timeout_s),
            env=build_environment(self.toolchain, staging),
            readable=view.executor_readable(readable),
        )
        if view.landlock and result.returncode == EXIT_UNCONFINED and "confine:" in result.output:
            reason = result.output.strip().splitlines()[-1].removeprefix("confine: ")
            raise ExecutorUnavailable("the build's confinement", f"{reason} (executor: {view.executor.name})")
        scope = PathScope.of(staging, readable)
        return result.model_copy(update={"output": redact_output(result.output, scope), "argv": argv})

    def _failed_unit(self, unit: _Unit, result: ProcessResult, diagnostics: list[Diagnostic]) -> _UnitOutcome:
        tool: Literal["nvcc", "c++"] = "nvcc" if unit.kind == "cu" else "c++"
        if result.timed_out:
            message = f"compiling took longer than {self.limits.compile_timeout_s:.0f} s and was stopped"
            failure: BuildFailure = "timeout"
        elif result.output_limit_hit:
            message = f"the compiler printed more than {self.limits.max_output_bytes} bytes and was stopped"
            failure = "output_limit"
        else:
            message = ""
            failure = "compile_error"
        if message:
            diagnostics = [
                *diagnostics,
                Diagnostic(file=unit.file, severity="error", message=message, tool=tool),
            ]
        elif not any(d.severity == "error" for d in diagnostics):
            last = result.output.strip().splitlines()[-1:] or [f"exit status {result.returncode}"]
            diagnostics = [
                *diagnostics,
                Diagnostic(file=unit.file, severity="error", message=last[0], tool=tool),
            ]
        action: Literal["failed", "timed_out"] = "timed_out" if result.timed_out else "failed"
        log = f"== {tool} {unit.file} ==\n{result.output}"
        return _UnitOutcome(unit, action, None, result.wall_s, diagnostics, failure=failure, log=log)

    async def _link(
        self, units: list[_Unit], staging: Path, build_key: str, flags: BuildFlags
    ) -> tuple[list[Diagnostic], str]:
        objects = [str(self.cache.object_path(u.key)) for u in units]
        output = staging / f"{EXTENSION_NAME}.so"
        argv = link_command(self.toolchain, objects, str(output), flags.vendor_libraries)
        library_dirs = [
            found.parent for _, found in vendor_library_files(self.toolchain, flags.vendor_libraries) if found
        ]
        readable = [*self._readable, *library_dirs, *map(Path, objects)]
        result = await self._run(argv, staging, readable, self.limits.link_timeout_s)
        object_to_file = {f"{u.key}.o": u.file for u in units}
        diagnostics = parse_unresolved_symbols(result.output, object_to_file)
        if not result.ok and not diagnostics:
            reason = "timed out" if result.timed_out else _last_error_line(result.output)
            diagnostics = [Diagnostic(file=None, severity="error", message=reason, tool="linker")]
        if diagnostics:
            return diagnostics, f"== link ==\n{result.output}"
        self.cache.store_extension(output, build_key)
        return [], ""


def _not_triton(relpath: str) -> Diagnostic:
    return Diagnostic(
        file=relpath,
        severity="error",
        message="a Triton workspace has no CUDA C++ sources: its kernels are @triton.jit functions in "
        "model_new.py (lay out a cuda or cupy workspace to write CUDA C++)",
        tool="build",
    )


def _python_files(files: list[str], action: FileAction, wall_s: float, key: str) -> list[FileBuild]:
    return [
        FileBuild(file=f, kind="py", action=action, wall_s=round(wall_s, 3), object_key=key) for f in files
    ]


def _harness(language: KernelLanguage) -> tuple[str, ...]:
    """The pristine files whose text is part of every unit's key, per language."""
    return HARNESS_FILES if language == "cuda" else (MODULE_TEMPLATE,)


def _host_code_refusal(relpath: str) -> Diagnostic:
    return Diagnostic(
        file=relpath,
        severity="error",
        message="a CuPy workspace has no host code: NVRTC compiles kernels/*.cu only, and model_new.py "
        "launches their kernels through cuda_extension; delete this file (see SKILL.md)",
        tool="nvcc",
    )


def _last_error_line(output: str) -> str:
    lines = [ln for ln in output.splitlines() if "error" in ln.lower() or "ld:" in ln]
    return lines[0] if lines else (output.strip().splitlines() or ["the linker failed"])[-1]


def _failure_summary(failed: list[_UnitOutcome], diagnostics: list[Diagnostic]) -> str:
    errors = [d for d in diagnostics if d.severity == "error"]
    names = ", ".join(o.unit.file for o in failed)
    if not errors:
        return f"build failed in {names}"
    first = errors[0]
    where = first.file or ""
    if first.line is not None:
        where += f":{first.line}" + (f":{first.column}" if first.column else "")
    return f"{len(errors)} error(s) in {names}; first: {where}: {first.message}"


_UNIT_LOCKS: RunVar[dict[str, anyio.Lock]] = RunVar("cuda_agent_unit_locks")


def _unit_lock(key: str) -> anyio.Lock:
    """The lock for one object key, per event loop (anyio RunVar)."""
    try:
        locks = _UNIT_LOCKS.get()
    except LookupError:
        locks = {}
        _UNIT_LOCKS.set(locks)
    return locks.setdefault(key, anyio.Lock())
