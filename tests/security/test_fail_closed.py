"""Where bubblewrap is missing the view is built from the kernel's namespaces, for real; where no view
can be built at all the server refuses with one line naming what is missing and the fix, unless reduced
isolation is asked for, which the server then says at start and in every result."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.conftest import EXAMPLES
from tests.security.conftest import SSH_KEY, require_view, run, serve_http, server_environment, start, stop

NO_VIEW = {"CUDA_AGENT_SANDBOX_VIEW": "none"}  # the probe override: as a machine with no way to build one


def _path_without_bwrap(tmp_path: Path) -> str:
    """A PATH holding every command of this machine but bubblewrap (links to the real ones)."""
    farm = tmp_path / "bin-without-bwrap"
    farm.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            if entry.name != "bwrap" and not (farm / entry.name).exists():
                (farm / entry.name).symlink_to(entry.path)
    assert shutil.which("bwrap", path=str(farm)) is None
    return str(farm)


def test_without_bubblewrap_the_namespace_view_confines_commands_for_real(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    require_view()
    _, _, env = server_environment(tmp_path, shared_build_cache)
    env["PATH"] = _path_without_bwrap(tmp_path)
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from cuda_agent_mcp.executors.sandboxed import view_problems; print(dict(view_problems()))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "'bwrap': 'bubblewrap is not installed'" in probe.stdout and "'namespaces': ''" in probe.stdout
    server = serve_http(tmp_path, shared_build_cache, env={"PATH": env["PATH"]})

    async def work():  # type: ignore[no-untyped-def]
        async with server.client() as client:
            session = await start(client)
            return await run(
                client, session["session_id"], f"cat {server.home}/.ssh/id_ed25519 /etc/shadow; id -u"
            )

    try:
        result = anyio.run(work)
    finally:
        said = stop(server)
    assert "view:namespaces" in result.structured_content["isolation"]
    assert SSH_KEY not in result.structured_content["process"]["output"]
    assert "view:namespaces" in said


def _no_view_env(tmp_path: Path, cache: Path) -> dict[str, str]:
    _, _, env = server_environment(tmp_path, cache)
    return {**env, **NO_VIEW}


def test_with_no_way_to_build_a_view_the_server_refuses_to_start_in_one_line(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    env = _no_view_env(tmp_path, shared_build_cache)
    done = subprocess.run(
        [sys.executable, "-m", "cuda_agent_mcp", "serve", "--root", str(tmp_path / "s")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 3
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no filesystem view can be built here" in lines[0], done.stderr
    assert "CUDA_AGENT_ALLOW_REDUCED_ISOLATION=1" in lines[0] and "Traceback" not in done.stderr


@pytest.mark.nvcc
def test_with_no_view_a_build_refuses_rather_than_running_the_compiler_unconfined(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    env = _no_view_env(tmp_path, shared_build_cache)
    workspace = tmp_path / "ws"
    shutil.copytree(EXAMPLES / "relu", workspace, ignore=shutil.ignore_patterns("cuda_extension.so"))
    done = subprocess.run(
        [sys.executable, "-m", "cuda_agent_mcp", "compile", str(workspace), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "no filesystem view can be built here" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not (workspace / "cuda_extension.so").exists()


def test_reduced_isolation_is_an_explicit_choice_stated_at_start_and_in_every_result(
    tmp_path: Path, shared_build_cache: Path
) -> None:
    server = serve_http(tmp_path, shared_build_cache, "--allow-reduced-isolation", env=NO_VIEW)

    async def work():  # type: ignore[no-untyped-def]
        async with server.client() as client:
            session = await start(client)
            return session, await run(client, session["session_id"], "echo ran")

    try:
        session, result = anyio.run(work)
    finally:
        said = stop(server)
    assert "REDUCED ISOLATION" in said
    assert "reduced-isolation" in session["isolation"]
    assert "reduced-isolation" in result.structured_content["isolation"]
    assert json.loads(json.dumps(result.structured_content))["process"]["returncode"] == 0
