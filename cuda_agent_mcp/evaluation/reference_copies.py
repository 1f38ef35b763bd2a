"""Copies of the reference among the candidate's files (principle 6): whatever the file is called.

The candidate's directory never holds `model.py`, so `class ModelNew(Model)` cannot import it; a copy
written under another name (by the agent, or by its `run` command: `cp model.py ref.py`) would undo that.
A file counts as a copy when its code equals the reference's, or when it defines a class whose body is
the reference's `Model` (renamed or not), compared as syntax trees so formatting and comments do not
matter. No torch here: the tool layer runs this before any judge.
"""

from __future__ import annotations

import ast
from pathlib import Path

from cuda_agent_mcp.results import AuditFinding


def _tree(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _class_bodies(tree: ast.Module) -> dict[str, str]:
    """Each top-level class's body (bases and decorators included, name left out), as a dump."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            found[node.name] = ast.dump(ast.Module(body=node.body, type_ignores=[]))
    return found


def reference_copies(files: list[Path], reference_code: str) -> list[AuditFinding]:
    """Findings for the files among `files` that carry the reference's code."""
    reference = _tree(reference_code)
    if reference is None:
        return []
    whole = ast.dump(reference)
    model_body = _class_bodies(reference).get("Model")
    findings = []
    for path in files:
        try:
            tree = _tree(path.read_text(errors="replace"))
        except OSError:
            continue
        if tree is None:
            continue
        if ast.dump(tree) == whole:
            findings.append(_finding(path, None, "is a copy of the reference (model.py)"))
            continue
        for node in tree.body:
            if (
                model_body is not None
                and isinstance(node, ast.ClassDef)
                and ast.dump(ast.Module(body=node.body, type_ignores=[])) == model_body
            ):
                findings.append(_finding(path, node.lineno, f"class {node.name} is the reference's Model"))
    return findings


def _finding(path: Path, line: int | None, what: str) -> AuditFinding:
    return AuditFinding(
        file=path.name,
        line=line,
        rule="reference_copy",
        message=f"{path.name} {what}: the reference may not be imported or copied into the candidate; "
        "write ModelNew's own forward with your kernels",
    )
