"""Runs in a sandboxed child, never in the tool process: executes a KernelBench single-file solution with
torch's extension loaders (`load_inline`, `load`) replaced by recorders, and writes what they were asked
to build as JSON. Nothing is compiled here. Standalone on purpose: it is copied next to the solution and
run with the interpreter alone (`python -I`), so it imports nothing of cuda_agent_mcp. Triton solutions
never reach it: they have nothing to extract (kernelbench_import lays them out as they are).

usage: python -I _kernelbench_child.py SOLUTION.py OUT.json
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any

MAX_SOURCE_CHARS = 1 << 20
MAX_CALLS = 16


class _Unbuilt(types.ModuleType):
    """What the recorders return: attribute access works, calling a function refuses."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("__"):
            raise AttributeError(name)

        def unbuilt(*args: object, **kwargs: object) -> None:
            raise RuntimeError(f"{name}: extensions are not built while their sources are extracted")

        return unbuilt


def _strings(value: object, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise TypeError(f"{what} must be a string or a list of strings")


def _functions(value: object) -> list[str] | dict[str, str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return dict(value)
    return _strings(value, "functions")


def main(solution: str, out: str) -> int:
    import torch.utils.cpp_extension as cpp_extension

    calls: list[dict[str, object]] = []

    def record(entry: dict[str, Any]) -> _Unbuilt:
        if len(calls) >= MAX_CALLS:
            raise RuntimeError(f"more than {MAX_CALLS} extension builds")
        if sum(len(s) for key in ("cpp_sources", "cuda_sources") for s in entry[key]) > MAX_SOURCE_CHARS:
            raise RuntimeError("extension sources larger than 1 MiB")
        calls.append(entry)
        return _Unbuilt(str(entry["name"]))

    def load_inline(name: Any, cpp_sources: Any, cuda_sources: Any = None, functions: Any = None,
                    extra_cflags: Any = None, extra_cuda_cflags: Any = None, extra_ldflags: Any = None,
                    extra_include_paths: Any = None, no_implicit_headers: Any = False, **rest: Any) -> _Unbuilt:  # fmt: skip
        return record(
            {
                "kind": "load_inline",
                "name": str(name),
                "cpp_sources": _strings(cpp_sources, "cpp_sources"),
                "cuda_sources": _strings(cuda_sources, "cuda_sources"),
                "functions": _functions(functions),
                "flags": _strings(extra_cflags, "extra_cflags")
                + _strings(extra_cuda_cflags, "extra_cuda_cflags")
                + _strings(extra_ldflags, "extra_ldflags"),
                "include_paths": _strings(extra_include_paths, "extra_include_paths"),
                "no_implicit_headers": bool(no_implicit_headers),
                "sources": {},
            }
        )

    def load(name: Any, sources: Any, extra_cflags: Any = None, extra_cuda_cflags: Any = None,
             extra_ldflags: Any = None, extra_include_paths: Any = None, **rest: Any) -> _Unbuilt:  # fmt: skip
        files: dict[str, str] = {}
        for path in _strings(sources, "sources"):
            base = os.path.basename(path)
            with open(base if os.path.exists(base) else path, encoding="utf-8") as handle:
                files[base] = handle.read(MAX_SOURCE_CHARS + 1)
        entry = {
            "kind": "load",
            "name": str(name),
            "cpp_sources": [],
            "cuda_sources": [],
            "functions": None,
            "flags": _strings(extra_cflags, "extra_cflags")
            + _strings(extra_cuda_cflags, "extra_cuda_cflags")
            + _strings(extra_ldflags, "extra_ldflags"),
            "include_paths": _strings(extra_include_paths, "extra_include_paths"),
            "no_implicit_headers": True,
            "sources": files,
        }
        return record(entry)

    cpp_extension.load_inline = load_inline
    cpp_extension.load = load
    try:
        namespace = runpy.run_path(solution, run_name="kernelbench_solution")
    except BaseException as exc:
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        report = {"calls": calls, "has_model_new": False, "error": f"{type(exc).__name__}: {exc}"[:2000],
                  "traceback": "".join(lines)[-3000:]}  # fmt: skip
    else:
        report = {"calls": calls, "has_model_new": isinstance(namespace.get("ModelNew"), type)}
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(report, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
