"""What the judge service and its clients say to each other, and where they meet.

The service (`judge_daemon.py`) keeps warm judge servers for every process of one user and one cache
directory: the next CLI call, the MCP server and an RL environment reuse the judges the last one started.
It is reached only through a Unix socket of the calling user's: the socket is mode 0600 in a directory of
mode 0700 that this user owns (judges run as a shared uid, so permissions on the judges themselves would
not keep another user out), and the service also checks each connection's peer uid (SO_PEERCRED).

The uid is not enough where candidates run as the user's own uid (a judge that could not start as the
worker uid forks workers as ours): a candidate could connect and have the service start judges with an
environment of its choosing, outside its Landlock view. So every request also carries the service's
token, a random secret in a 0600 file beside the socket, which the service writes as it starts: a
candidate's Landlock view cannot read that directory, and a request without the token gets no answer.

Frames are the judge protocol's (length-prefixed JSON, `wire/protocol.py`). A job's seeds travel in its
`EvalJob`, as they do on a judge's stdin: only this user's processes can read either.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import socket
import stat
import struct
import sys
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.evaluation.job import EvalJob, JudgeReport

SERVICE_ENV = "CUDA_AGENT_JUDGE_SERVICE"  # off | auto (default) | on
IDLE_ENV = "CUDA_AGENT_JUDGE_SERVICE_IDLE_S"
DEFAULT_IDLE_S = 600.0
PACKAGE_ROOT = Path(__file__).resolve().parent.parent


class _Frame(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Request(_Frame):
    token: str = Field(
        default="", description="the service's secret (`token_path`), proof of a caller of ours"
    )


class RunJob(_Request):
    op: Literal["run"] = "run"
    job: EvalJob
    env: dict[str, str]
    timeout_s: float


class Prewarm(_Request):
    op: Literal["prewarm"] = "prewarm"
    env: dict[str, str]


class StatusQuery(_Request):
    op: Literal["status"] = "status"


class StopService(_Request):
    op: Literal["stop"] = "stop"


Request = Annotated[RunJob | Prewarm | StatusQuery | StopService, Field(discriminator="op")]
REQUEST: TypeAdapter[RunJob | Prewarm | StatusQuery | StopService] = TypeAdapter(Request)


class JobDone(_Frame):
    op: Literal["done"] = "done"
    report: JudgeReport
    startup_s: float


class JobFailed(_Frame):
    """The judge failed, hung or could not start (the client raises `JudgeFailed` with the message)."""

    op: Literal["failed"] = "failed"
    message: str


class ServiceStatus(_Frame):
    op: Literal["status"] = "status"
    pid: int
    uid: int
    code: str = Field(description="fingerprint of the installed package the service runs")
    python: str
    started_at: float
    idle_timeout_s: float
    jobs_run: int
    jobs_running: int
    judges_started: int
    judges_retired: int
    judges_idle: int
    log_dir: str


class Acknowledged(_Frame):
    op: Literal["ok"] = "ok"
    started: bool = False


Reply = Annotated[JobDone | JobFailed | ServiceStatus | Acknowledged, Field(discriminator="op")]
REPLY: TypeAdapter[JobDone | JobFailed | ServiceStatus | Acknowledged] = TypeAdapter(Reply)


def service_mode() -> Literal["off", "auto", "on"]:
    value = os.environ.get(SERVICE_ENV, "auto").strip().lower() or "auto"
    if value in ("off", "0", "no", "false"):
        return "off"
    if value in ("on", "1", "yes", "true"):
        return "on"
    return "auto"


def idle_timeout_s() -> float:
    try:
        return max(float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_S)), 1.0)
    except ValueError:
        return DEFAULT_IDLE_S


def private_directory() -> Path:
    """This user's directory for service sockets: $XDG_RUNTIME_DIR/cuda-agent where that is the user's
    (systemd makes it 0700), else /tmp/cuda-agent-<uid>. Made 0700 here; one that exists and is not
    ours alone is refused (somebody else could have put a socket there to receive our jobs)."""
    uid = os.getuid()
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = (
        Path(runtime) / "cuda-agent" if runtime and Path(runtime).is_dir() else Path(f"/tmp/cuda-agent-{uid}")
    )
    try:
        base.mkdir(mode=0o700, parents=False, exist_ok=True)
    except FileNotFoundError:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ExecutorUnavailable("judge service", f"cannot make {base}: {exc}") from None
    info = os.lstat(base)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or stat.S_IMODE(info.st_mode) & 0o077:
        raise ExecutorUnavailable(
            "judge service",
            f"{base} is not a directory of uid {uid} alone (mode {stat.S_IMODE(info.st_mode):o}, owner "
            f"{info.st_uid}): remove it, or set {SERVICE_ENV}=off",
        )
    return base


def socket_path(cache_dir: Path) -> Path:
    """One service per user, cache directory and setting (tests and tenants with their own caches get
    their own): the service starts judges with its starter's environment, so every variable that changes
    how a judge starts or runs (ours and the search paths; not those torch sets in a process as it runs)
    is part of its name.
    Named by a hash, as socket paths are limited to 107 bytes."""
    settings = sorted(
        (name, value)
        for name, value in os.environ.items()
        if (name.startswith(_SETTING_PREFIXES) or name in _SETTING_NAMES) and name not in _OWN_SETTINGS
    )
    key = hashlib.sha256(repr((str(cache_dir.resolve()), settings)).encode()).hexdigest()[:16]
    return private_directory() / f"judges-{key}.sock"


_SETTING_PREFIXES = ("CUDA_AGENT_",)
_SETTING_NAMES = frozenset({"PATH", "PYTHONPATH", "CUDA_VISIBLE_DEVICES"})
_OWN_SETTINGS = frozenset({SERVICE_ENV, IDLE_ENV, "CUDA_AGENT_DEBUG"})


@cache
def code_fingerprint() -> str:
    """The installed package and interpreter: a service started from other code is stopped and started
    again, so its judges never run rules or harness code the caller does not have."""
    digest = hashlib.sha256(sys.executable.encode())
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        with_stat = path.stat()
        digest.update(
            f"{path.relative_to(PACKAGE_ROOT)}:{with_stat.st_size}:{with_stat.st_mtime_ns}".encode()
        )
    return digest.hexdigest()[:16]


def token_path(socket: Path) -> Path:
    return socket.with_suffix(".token")


def write_token(socket: Path) -> str:
    """A new secret for the service at `socket`, in a file only this uid can read (replacing a dead
    service's)."""
    token = secrets.token_hex(32)
    path = token_path(socket)
    temporary = path.with_suffix(f".{secrets.token_hex(6)}.tmp")
    fd = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token)
    temporary.replace(path)
    return token


def read_token(socket: Path) -> str:
    """The secret of the service at `socket` (OSError where there is none)."""
    return token_path(socket).read_text().strip()


def same_token(offered: str, token: str) -> bool:
    """Constant-time comparison, of bytes: `hmac.compare_digest` raises on a non-ASCII str, and a forged
    token may be anything."""
    return hmac.compare_digest(offered.encode(), token.encode())


def peer_uid(connection: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket, from the kernel (SO_PEERCRED)."""
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", credentials)
    return int(uid)
