"""A program's module-level size globals, read and rewritten: how a CPU run gets smaller sizes.

KernelBench programs keep their sizes in top-level assignments (`batch_size = 128`) that get_inputs()
and get_init_inputs() read when called, so setting them is enough to run the same program smaller.
"""

from __future__ import annotations

import ast

# Names an LLM-written program gives its batch dimension: the one size a CPU run may shrink without
# knowing what else depends on it (a programmatic candidate says exactly which sizes it can shrink).
_BATCH_NAMES = ("batch_size", "batch", "bs", "B", "N_BATCH")
_CPU_BATCH = 2


def size_globals(code: str) -> dict[str, int]:
    """The top-level `name = <int>` assignments of a program."""
    tree = ast.parse(code)
    sizes: dict[str, int] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and type(node.value.value) is int
        ):
            sizes[node.targets[0].id] = node.value.value
    return sizes


def with_sizes(code: str, overrides: dict[str, int]) -> str:
    """The program with the named top-level integer globals set to new values; unknown names are an error."""
    if not overrides:
        return code
    missing = sorted(set(overrides) - set(size_globals(code)))
    if missing:
        raise ValueError(f"no top-level integer global named {', '.join(missing)}")
    lines = code.splitlines(keepends=True)
    tree = ast.parse(code)
    for node in reversed(tree.body):  # from the bottom, so earlier line numbers stay right
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in overrides and node.end_lineno == node.lineno:
                line = lines[node.lineno - 1]
                indent = line[: len(line) - len(line.lstrip())]
                lines[node.lineno - 1] = f"{indent}{name} = {overrides[name]}\n"
    return "".join(lines)


def guessed_cpu_sizes(code: str) -> dict[str, int]:
    """For a program that names no CPU sizes: its batch global down to 2, if it has one."""
    try:
        sizes = size_globals(code)
    except SyntaxError:
        return {}
    return {name: _CPU_BATCH for name in _BATCH_NAMES if sizes.get(name, 0) > _CPU_BATCH}
