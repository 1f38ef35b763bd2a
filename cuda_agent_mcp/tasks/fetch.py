"""Get KernelBench's problems onto this machine: a shallow git clone of the repository, else its tarball.

The repository goes to `<cache>/KernelBench` by default ($CUDA_AGENT_CACHE, else ~/.cache/cuda-agent-mcp),
where the catalog finds its `KernelBench/level1..` tree without any option (catalog.from_environment).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.cache_dir import default_cache_dir
from cuda_agent_mcp.errors import FetchFailed, UsageError
from cuda_agent_mcp.tasks.kernelbench import is_kernelbench_tree

KERNELBENCH_REPO = "https://github.com/ScalingIntelligence/KernelBench"
# Another repository (or a .tar.gz) to fetch from: a mirror, or an unreachable one in tests.
URL_ENV = "CUDA_AGENT_KERNELBENCH_URL"
TREE = "KernelBench"  # the folder of the repository that holds level1/, level2/, ...
GIT_TIMEOUT_S = 600.0
DOWNLOAD_TIMEOUT_S = 60.0  # per socket operation, not for the whole download


class KernelBenchFetch(BaseModel):
    """Where `cuda-agent tasks fetch` put KernelBench, and how the tools find it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tasks_path: str = Field(description="the task tree (levelN/ folders): what --tasks takes")
    repository: str = Field(description="the whole repository (results/, scripts/, ...)")
    url: str
    method: Literal["git", "tarball", "present"] = Field(description="present: it was already there")
    tasks: int = Field(description="problem files found, all levels")
    found_by_default: bool = Field(
        description="every command finds it without --tasks (it is in the default location)"
    )


def default_repository() -> Path:
    return default_cache_dir() / "KernelBench"


def fetched_tree() -> Path | None:
    """The task tree `tasks fetch` left in the default location, if there is one."""
    tree = default_repository() / TREE
    return tree if is_kernelbench_tree(tree) else None


def fetch_kernelbench(dest: Path | None = None, *, url: str | None = None) -> KernelBenchFetch:
    """Clone (git, depth 1) or download and unpack KernelBench into `dest`; a no-op if it is there."""
    url = url or os.environ.get(URL_ENV) or KERNELBENCH_REPO
    repository = (dest or default_repository()).expanduser().resolve()
    method: Literal["git", "tarball", "present"] = "present"
    if not is_kernelbench_tree(repository / TREE):
        if repository.exists() and any(repository.iterdir()):
            raise UsageError(
                f"{repository} exists and is not a KernelBench checkout (no {TREE}/level1/): "
                "pass another --dest, or remove it"
            )
        repository.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".kernelbench-", dir=repository.parent) as tmp:
            staged, method = _download(url, Path(tmp))
            if not is_kernelbench_tree(staged / TREE):
                raise FetchFailed(f"{url} holds no {TREE}/level1/ folder: is it KernelBench's repository?")
            if repository.exists():
                repository.rmdir()  # empty (checked above)
            staged.rename(repository)
    tree = repository / TREE
    return KernelBenchFetch(
        tasks_path=str(tree),
        repository=str(repository),
        url=url,
        method=method,
        tasks=sum(1 for _ in tree.glob("level*/*.py")),
        found_by_default=repository == default_repository().expanduser().resolve(),
    )


def _download(url: str, tmp: Path) -> tuple[Path, Literal["git", "tarball"]]:
    """The repository unpacked under `tmp`: by git if there is one and it works, else by the tarball."""
    reasons = []
    if shutil.which("git") and not url.endswith((".tar.gz", ".tgz")):
        clone = tmp / "clone"
        try:
            done = subprocess.run(
                ["git", "clone", "--quiet", "--depth", "1", url, str(clone)],
                capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},  # fail, never ask for a password
            )  # fmt: skip
            if done.returncode == 0:
                return clone, "git"
            reasons.append(_last_line(done.stderr) or f"git exited {done.returncode}")
        except subprocess.TimeoutExpired:
            reasons.append(f"git clone took over {GIT_TIMEOUT_S:.0f} s")
        shutil.rmtree(clone, ignore_errors=True)
    archive = url if url.endswith((".tar.gz", ".tgz")) else url.rstrip("/") + "/archive/HEAD.tar.gz"
    try:
        return _unpack(archive, tmp), "tarball"
    except (urllib.error.URLError, OSError, tarfile.TarError, ValueError) as exc:
        reasons.append(_describe(exc))
    host = urlsplit(url).netloc or url
    raise FetchFailed(
        f"could not download KernelBench from {host} ({reasons[-1]}): clone {KERNELBENCH_REPO} "
        f"yourself and pass --tasks <clone>/{TREE} (or set CUDA_AGENT_TASKS)"
    )


def _unpack(archive: str, tmp: Path) -> Path:
    """Download a GitHub-style tarball (one top-level folder) and unpack it safely; its top folder."""
    target = tmp / "tarball.tar.gz"
    with urllib.request.urlopen(archive, timeout=DOWNLOAD_TIMEOUT_S) as response, target.open("wb") as f:
        shutil.copyfileobj(response, f)
    unpacked = tmp / "unpacked"
    with tarfile.open(target) as tar:
        tar.extractall(unpacked, filter="data")  # no absolute paths, no links out, no devices
    target.unlink()
    tops = list(unpacked.iterdir())
    return tops[0] if len(tops) == 1 and tops[0].is_dir() else unpacked


def _describe(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        return getattr(reason, "strerror", None) or str(reason)
    return f"{type(exc).__name__}: {exc}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1].removeprefix("fatal: ") if lines else ""
