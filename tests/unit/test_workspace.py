"""Workspaces: layout from a task, opening an existing directory, protected files, confined file tools."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.errors import WorkspaceError
from cuda_agent_mcp.tasks import load_task_file
from cuda_agent_mcp.tools import Session, edit_file, list_files, read_file, search_files, write_file
from cuda_agent_mcp.workspace import Workspace, harness_text
from tests.conftest import EXAMPLES


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return Session.create(
        load_task_file(EXAMPLES / "row_sum" / "model.py", task_id="examples/row_sum"), tmp_path / "ws"
    )


def test_a_new_workspace_has_the_paper_layout_and_read_only_protected_files(session: Session) -> None:
    root = session.workspace.root
    assert sorted(p.name for p in root.iterdir()) == [
        ".cuda-agent", "SKILL.md", "binding.cpp", "binding_registry.h", "kernels", "model.py", "model_new.py",
    ]  # fmt: skip
    assert (root / "model.py").read_text() == session.task.code
    assert (root / "binding.cpp").read_text() == harness_text("binding.cpp")
    for name in ("model.py", "binding.cpp", "binding_registry.h"):
        assert not os.access(root / name, os.W_OK) or os.geteuid() == 0
        assert (root / name).stat().st_mode & 0o222 == 0


def test_the_model_new_skeleton_copies_the_reference_constructor_signature(session: Session) -> None:
    skeleton = (session.workspace.root / "model_new.py").read_text()
    assert "class ModelNew(nn.Module):" in skeleton
    assert "def __init__(self, dim: int):" in skeleton
    compile(skeleton, "model_new.py", "exec")


def test_a_workspace_is_not_laid_over_a_directory_with_files(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    task = load_task_file(EXAMPLES / "relu" / "model.py")
    with pytest.raises(WorkspaceError, match="not empty"):
        Workspace.create(task, tmp_path / "busy")
    Workspace.create(task, tmp_path / "busy", overwrite=True)
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"


def test_an_existing_directory_opens_with_its_recorded_task_and_frozen_reference(session: Session) -> None:
    root = session.workspace.root
    reopened = Workspace.open(root)
    assert reopened.task_id == "examples/row_sum"
    (root / "model.py").chmod(0o644)
    (root / "model.py").write_text(session.task.code.replace("keepdim=True", "keepdim=False"))
    assert session.workspace.modified_protected_files() == ["model.py"]
    assert "keepdim=True" in session.workspace.reference_code


def test_a_directory_without_model_py_is_not_a_workspace(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match=r"no model\.py"):
        Workspace.open(tmp_path)
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace.open(tmp_path / "missing")


def test_the_build_inputs_are_the_agents_sources_and_headers_only(session: Session) -> None:
    root = session.workspace.root
    (root / "kernels" / "a.cu").write_text("// a")
    (root / "kernels" / "a_binding.cpp").write_text("// b")
    (root / "kernels" / "common.cuh").write_text("// h")
    (root / "helper.cpp").write_text("// cublas")
    (root / "kernels" / "notes.md").write_text("not code")
    sources = session.workspace.build_sources()
    assert [(s.relpath, s.kind) for s in sources] == [
        ("helper.cpp", "cpp"), ("kernels/a.cu", "cu"), ("kernels/a_binding.cpp", "cpp"),
    ]  # fmt: skip
    assert list(session.workspace.build_headers()) == ["kernels/common.cuh"]


def test_file_tools_write_edit_list_and_search_inside_the_workspace(session: Session) -> None:
    async def scenario() -> None:
        await write_file(session, "kernels/k.cu", "__global__ void k() {}\n// TODO tune\n")
        assert (await read_file(session, "kernels/k.cu")).content.startswith("__global__")
        edited = await edit_file(session, "kernels/k.cu", "TODO tune", "tuned")
        assert edited.replacements == 1
        assert "kernels/k.cu" in (await list_files(session, "kernels/*")).files
        hits = (await search_files(session, r"__global__", "kernels/*")).hits
        assert [(h.path, h.line) for h in hits] == [("kernels/k.cu", 1)]

    anyio.run(scenario)


@pytest.mark.parametrize("path", ["../outside.py", "/etc/passwd", "kernels/../../x", ""])
def test_paths_outside_the_workspace_are_refused(session: Session, path: str) -> None:
    with pytest.raises(WorkspaceError):
        anyio.run(write_file, session, path, "x")


def test_a_symlink_leading_outside_is_refused(session: Session, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("seed")
    (session.workspace.root / "link").symlink_to(tmp_path)
    with pytest.raises(WorkspaceError, match="outside"):
        anyio.run(read_file, session, "link/secret.txt")


@pytest.mark.parametrize(
    "path", ["model.py", "binding.cpp", "binding_registry.h", ".cuda-agent/workspace.json"]
)
def test_protected_files_cannot_be_written_or_edited(session: Session, path: str) -> None:
    with pytest.raises(WorkspaceError, match="protected"):
        anyio.run(write_file, session, path, "x")
    with pytest.raises(WorkspaceError, match="protected"):
        anyio.run(lambda: edit_file(session, path, "a", "b"))


def test_an_ambiguous_edit_is_refused_unless_all_occurrences_are_meant(session: Session) -> None:
    anyio.run(write_file, session, "kernels/k.cu", "x x")
    with pytest.raises(WorkspaceError, match="occurs 2 times"):
        anyio.run(lambda: edit_file(session, "kernels/k.cu", "x", "y"))
    assert anyio.run(lambda: edit_file(session, "kernels/k.cu", "x", "y", replace_all=True)).replacements == 2
    with pytest.raises(WorkspaceError, match="not found"):
        anyio.run(lambda: edit_file(session, "kernels/k.cu", "x", "y"))
