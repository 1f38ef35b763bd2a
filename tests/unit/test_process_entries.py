"""The processes start each other by module name, which import-linter cannot see: the judge server is
`python -m wire.JUDGE_MODULE`, a fork server preloads `wire.PRELOAD_MODULE`, a forked worker imports
`wire.WORKER_MODULE`, a container runs `python -m wire.WORKER_PACKAGE`. These names must be the modules
they say, and no other code may name the worker's modules (or the judge's entry) on its own."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

from cuda_agent_mcp import wire
from tests.conftest import REPO

PACKAGE = REPO / "cuda_agent_mcp"
WORKER_DIR = PACKAGE / "worker"


def test_the_worker_module_is_the_workers_entry_for_forks_and_for_python_dash_m() -> None:
    entry = importlib.import_module(wire.WORKER_MODULE)
    assert callable(entry.main) and callable(entry.run_forked)
    assert Path(entry.__file__) == WORKER_DIR / "__main__.py" == wire.module_file(wire.WORKER_MODULE)
    # `python -m WORKER_PACKAGE` runs the package's __main__, which is that module.
    assert f"{wire.WORKER_PACKAGE}.__main__" == wire.WORKER_MODULE
    assert importlib.util.find_spec(wire.WORKER_PACKAGE).submodule_search_locations == [str(WORKER_DIR)]


def test_the_preloaded_module_brings_the_forked_workers_entry() -> None:
    preload = importlib.import_module(wire.PRELOAD_MODULE)
    assert preload.run_forked is importlib.import_module(wire.WORKER_MODULE).run_forked


def test_the_sanitizer_and_ncu_targets_are_worker_modules() -> None:
    sanitize_target = importlib.import_module(wire.SANITIZE_TARGET_MODULE)
    assert callable(sanitize_target.main)
    assert Path(sanitize_target.__file__).parent == WORKER_DIR
    ncu_target = wire.module_file(wire.NCU_TARGET_MODULE)  # run by its path, never imported here
    assert ncu_target.parent == WORKER_DIR and ncu_target.is_file()

    from cuda_agent_mcp.tools import ncu

    assert ncu_target == ncu.TARGET


def test_the_judge_module_is_the_judge_servers_entry() -> None:
    spec = importlib.util.find_spec(f"{wire.JUDGE_MODULE}.__main__")
    assert spec is not None and Path(spec.origin) == PACKAGE / "judge" / "__main__.py"
    entry = importlib.import_module(f"{wire.JUDGE_MODULE}.__main__")  # its main() runs only as __main__
    from cuda_agent_mcp.judge import server

    assert entry.main is server.main


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _namings_of_process_entries(path: Path) -> list[tuple[int, str]]:
    """(line, what) wherever `path` names a worker module or the judge's entry other than through `wire`."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = _docstrings(tree)
    worker_files = {p.name for p in WORKER_DIR.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            found += [(line, f"imports {n}") for n in names if n.startswith(wire.WORKER_PACKAGE)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
            if wire.WORKER_PACKAGE in text or text == wire.JUDGE_MODULE or text in worker_files:
                found.append((line, repr(text)))
        elif (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Div)
            and _is_constant(node.right, "worker")
        ):
            found.append((line, "a path into worker/"))
    return sorted(found)


def _is_constant(node: ast.AST, value: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == value


def test_no_code_but_the_wire_names_the_workers_modules_or_the_judges_entry() -> None:
    namings = []
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "wire" / "__init__.py" or path.is_relative_to(WORKER_DIR):
            continue
        namings += [
            f"{path.relative_to(REPO)}:{line}: {what}" for line, what in _namings_of_process_entries(path)
        ]
    assert namings == []


def test_the_scan_catches_each_way_of_naming_a_worker_module(tmp_path: Path) -> None:
    """The scan above can fail: an import, a module name, the judge's entry, a path and a file name."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Docstrings may say cuda_agent_mcp.worker."""\n'
        "import importlib\nfrom pathlib import Path\n"
        "from cuda_agent_mcp.worker import runner\n"
        'a = importlib.import_module("cuda_agent_mcp.worker.__main__")\n'
        'b = ["python", "-m", "cuda_agent_mcp.judge"]\n'
        'c = Path(__file__).parent / "worker" / "x.py"\n'
        'd = "ncu_target.py"\n'
    )
    assert [line for line, _ in _namings_of_process_entries(sample)] == [4, 5, 6, 7, 8]
