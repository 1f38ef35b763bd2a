"""Containment probe (issue 24): what the GPU machine offers to cage a candidate's processes and to see
foreign work on the GPU. Plain torch and the standard library (no project imports), run as root:

    python benchmarks/probes/h200_containment_probe.py --out containment.json

Cases: the cgroup v2 tree (can a subtree get the pids controller, does cgroup.kill end a setsid
double-forked daemon, what each step costs); NVML's process list (nvidia-smi and libnvidia-ml through
ctypes); how much a foreign GPU spinner slows a calibration kernel; whether MPS starts and caps memory;
CUDA IPC into a child in a fresh PID namespace.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

CG = Path("/sys/fs/cgroup")


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as exc:
        return f"<{type(exc).__name__}: {exc}>"


def _write(path: Path, text: str) -> str:
    try:
        path.write_text(text)
        return "ok"
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


DAEMON = r"""
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(sys.argv[1], "w").write(str(os.getpid()))
        while True:
            time.sleep(0.05)
    os._exit(0)
os.wait()
time.sleep(30)
"""


def probe_cgroups() -> dict:
    out: dict = {
        "proc_self_cgroup": _read(Path("/proc/self/cgroup")),
        "mounts": [line for line in _read(Path("/proc/mounts")).splitlines() if "cgroup" in line],
        "root_controllers": _read(CG / "cgroup.controllers"),
        "root_subtree_control": _read(CG / "cgroup.subtree_control"),
        "root_has_kill": (CG / "cgroup.kill").exists(),
        "root_procs_count": len(_read(CG / "cgroup.procs").split()),
    }
    own = _read(Path("/proc/self/cgroup")).split("::", 1)[-1].strip()
    out["own_cgroup"] = own
    top = CG / "cuda-agent-probe"
    try:
        if top.exists():
            for child in top.glob("*/"):
                child.rmdir()
            top.rmdir()
        t0 = time.perf_counter()
        out["enable_pids_at_root"] = _write(CG / "cgroup.subtree_control", "+pids")
        top.mkdir()
        (top / "main").mkdir()
        out["enable_pids_in_top"] = _write(top / "cgroup.subtree_control", "+pids")
        out["top_subtree_control"] = _read(top / "cgroup.subtree_control")
        out["setup_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
        costs = []
        for i in range(5):
            t0 = time.perf_counter()
            leaf = top / f"eval-{i}"
            leaf.mkdir()
            pm = _write(leaf / "pids.max", "64")
            made = time.perf_counter()
            marker = Path(f"/tmp/probe-daemon-{i}")
            marker.unlink(missing_ok=True)
            # the child moves itself into the leaf before exec (as a worker launcher would)
            proc = subprocess.Popen(
                [sys.executable, "-c", DAEMON, str(marker)],
                preexec_fn=lambda leaf=leaf: (leaf / "cgroup.procs").write_text("0"),
            )
            for _ in range(200):
                if marker.exists() and marker.read_text():
                    break
                time.sleep(0.01)
            daemon_pid = int(marker.read_text() or 0)
            members = _read(leaf / "cgroup.procs").split()
            events_before = _read(leaf / "pids.events")
            t_kill = time.perf_counter()
            kill = _write(leaf / "cgroup.kill", "1")
            proc.wait(timeout=5)
            for _ in range(500):
                if _read(leaf / "cgroup.events").find("populated 0") >= 0:
                    break
                time.sleep(0.001)
            killed = time.perf_counter()
            rm = "ok"
            try:
                leaf.rmdir()
            except OSError as exc:
                rm = str(exc)
            done = time.perf_counter()
            alive = Path(f"/proc/{daemon_pid}").exists() if daemon_pid else None
            costs.append(
                {
                    "pids_max": pm,
                    "members_before_kill": len(members),
                    "daemon_pid": daemon_pid,
                    "daemon_in_leaf": str(daemon_pid) in members,
                    "kill": kill,
                    "daemon_alive_after": alive,
                    "rmdir": rm,
                    "events": events_before,
                    "mkdir_ms": round((made - t0) * 1e3, 3),
                    "kill_to_empty_ms": round((killed - t_kill) * 1e3, 3),
                    "rmdir_ms": round((done - killed) * 1e3, 3),
                }
            )
        out["per_evaluation"] = costs
        # fork bomb capped: pids.max 8, a process forking 20 children
        leaf = top / "bomb"
        leaf.mkdir()
        _write(leaf / "pids.max", "8")
        bomb = subprocess.run(
            [
                sys.executable,
                "-c",
                "import os,time\nn=0\nfor i in range(20):\n  try:\n    if os.fork()==0:\n      time.sleep(3); os._exit(0)\n    n+=1\n  except OSError: pass\nprint(n)",
            ],
            preexec_fn=lambda: (leaf / "cgroup.procs").write_text("0"),
            capture_output=True,
            text=True,
            timeout=20,
        )
        out["bomb_forks_made"] = bomb.stdout.strip()
        out["bomb_events"] = _read(leaf / "pids.events")
        _write(leaf / "cgroup.kill", "1")
        time.sleep(0.2)
        # delegation: give a subtree to uid 10001 and have it make a leaf and move a child there
        deleg = top / "judge-10001"
        deleg.mkdir()
        (deleg / "main").mkdir()
        out["deleg_enable_pids"] = _write(deleg / "cgroup.subtree_control", "+pids")
        for path in (deleg, deleg / "main"):
            os.chown(path, 10001, 10001)
            for entry in ("cgroup.procs", "cgroup.subtree_control", "cgroup.threads", "cgroup.kill"):
                if (path / entry).exists():
                    os.chown(path / entry, 10001, 10001)
        script = (
            "import os,subprocess,sys\nfrom pathlib import Path\n"
            f"d=Path('{deleg}')\n(d/'main'/'cgroup.procs').write_text(str(os.getpid()))\n"
            "leaf=d/'w1'; leaf.mkdir(); r=[]\n"
            "try: (leaf/'pids.max').write_text('16'); r.append('pids.max ok')\nexcept OSError as e: r.append(str(e))\n"
            "p=subprocess.Popen(['sleep','30'],preexec_fn=lambda:(leaf/'cgroup.procs').write_text('0'))\n"
            "r.append('member:'+(leaf/'cgroup.procs').read_text().strip())\n"
            "try: (leaf/'cgroup.kill').write_text('1'); r.append('kill ok')\nexcept OSError as e: r.append('kill '+str(e))\n"
            "p.wait(); r.append('rc %s'%p.returncode)\n"
            "import time; time.sleep(0.1)\n"
            "try: leaf.rmdir(); r.append('rmdir ok')\nexcept OSError as e: r.append('rmdir '+str(e))\n"
            "try: (d/'..'/'escape').mkdir(); r.append('ESCAPED: made a sibling')\nexcept OSError as e: r.append('sibling refused: '+e.strerror)\n"
            "print(r)\n"
        )

        def _drop() -> None:
            (deleg / "main" / "cgroup.procs").write_text("0")
            os.setgid(10001)
            os.setuid(10001)

        res = subprocess.run(
            [sys.executable, "-c", script],
            preexec_fn=_drop,
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
        )
        out["delegated_uid_10001"] = (res.stdout + res.stderr).strip()[-800:]
    except Exception:
        out["error"] = traceback.format_exc()[-1500:]
    finally:
        for leaf in sorted(top.glob("**/"), key=lambda p: -len(p.parts)):
            if leaf == top:
                continue
            _write(leaf / "cgroup.kill", "1")
            time.sleep(0.05)
            with contextlib.suppress(OSError):
                leaf.rmdir()
        try:
            top.rmdir()
        except OSError as exc:
            out["cleanup"] = str(exc)
    out["memory_controller"] = "memory" in out["root_controllers"]
    return out


SPINNER = r"""
import sys, time, torch
mode = sys.argv[1]
x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
if mode == "hog":
    big = torch.empty(int(sys.argv[2]) << 30, dtype=torch.uint8, device="cuda")
print("ready", flush=True)
end = time.time() + float(sys.argv[3] if len(sys.argv) > 3 else 20)
while time.time() < end:
    if mode == "spin":
        torch.cuda._sleep(10_000_000)
    elif mode == "copy":
        y = x.clone()
    torch.cuda.synchronize() if mode != "hog" else time.sleep(0.1)
"""


class _NVML:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        assert self.lib.nvmlInit_v2() == 0
        self.dev = ctypes.c_void_p()
        assert self.lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.dev)) == 0

    def processes(self) -> list[tuple[int, int]]:
        class Info(ctypes.Structure):
            _fields_ = [
                ("pid", ctypes.c_uint),
                ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint),
            ]

        count = ctypes.c_uint(64)
        infos = (Info * 64)()
        rc = self.lib.nvmlDeviceGetComputeRunningProcesses_v3(self.dev, ctypes.byref(count), infos)
        if rc != 0:
            return [(-rc, 0)]
        return [(infos[i].pid, infos[i].usedGpuMemory) for i in range(count.value)]

    def utilization(self) -> tuple[int, int]:
        class Util(ctypes.Structure):
            _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]

        u = Util()
        self.lib.nvmlDeviceGetUtilizationRates(self.dev, ctypes.byref(u))
        return u.gpu, u.memory


def _calibrate(torch, reps: int = 9) -> dict:
    """A fixed piece of GPU work timed with events: a 1 GiB device copy and a bf16 matmul."""
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    m = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    res = {}
    work = {"copy_1GiB": lambda: b.copy_(a), "mm_4096_bf16": lambda: torch.mm(m, m)}
    for name, fn in work.items():
        fn()
        times = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        times.sort()
        res[name] = {
            "median_ms": round(times[len(times) // 2], 4),
            "min_ms": round(times[0], 4),
            "max_ms": round(times[-1], 4),
        }
    work.clear()
    torch.cuda.empty_cache()
    return res


def probe_gpu_sharing() -> dict:
    import torch

    out: dict = {}
    torch.cuda.init()
    torch.empty(1, device="cuda")
    try:
        nvml = _NVML()
        t0 = time.perf_counter()
        procs = nvml.processes()
        out["nvml_call_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
        out["nvml_self_listed"] = [p for p in procs if p[0] == os.getpid()]
        out["nvml_processes_idle"] = procs
        out["nvml_util_idle"] = nvml.utilization()
    except Exception as exc:
        nvml = None
        out["nvml_error"] = repr(exc)
    try:
        import pynvml  # noqa: F401

        out["pynvml"] = "importable"
    except ImportError as exc:
        out["pynvml"] = repr(exc)
    t0 = time.perf_counter()
    smi = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    out["nvidia_smi_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
    out["nvidia_smi_apps_idle"] = smi.stdout.strip()
    out["compute_mode"] = subprocess.run(
        ["nvidia-smi", "--query-gpu=compute_mode", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.strip()
    out["calibration_alone"] = _calibrate(torch)
    for mode in ("spin", "copy", "hog"):
        foreign = subprocess.Popen(
            [sys.executable, "-c", SPINNER, mode, "40", "25"], stdout=subprocess.PIPE, text=True
        )
        foreign.stdout.readline()
        time.sleep(1.0)
        row: dict = {"calibration": _calibrate(torch)}
        if nvml:
            row["nvml_processes"] = nvml.processes()
            row["nvml_util"] = nvml.utilization()
            row["foreign_listed"] = any(p[0] == foreign.pid for p in row["nvml_processes"])
        foreign.kill()
        foreign.wait()
        out[f"with_foreign_{mode}"] = row
    out["calibration_after"] = _calibrate(torch)
    return out


MPS_CLIENT = r"""
import torch, sys
try:
    x = torch.empty(int(sys.argv[1]) << 30, dtype=torch.uint8, device="cuda")
    print("allocated", sys.argv[1], "GiB")
except Exception as exc:
    print("refused:", str(exc).splitlines()[0][:200])
"""


def probe_mps() -> dict:
    out: dict = {
        "control": shutil.which("nvidia-cuda-mps-control"),
        "server": shutil.which("nvidia-cuda-mps-server"),
    }
    if not out["control"]:
        return out
    env = dict(
        os.environ, CUDA_MPS_PIPE_DIRECTORY="/tmp/probe-mps-pipe", CUDA_MPS_LOG_DIRECTORY="/tmp/probe-mps-log"
    )
    os.makedirs(env["CUDA_MPS_PIPE_DIRECTORY"], exist_ok=True)
    os.makedirs(env["CUDA_MPS_LOG_DIRECTORY"], exist_ok=True)
    try:
        start = subprocess.run([out["control"], "-d"], env=env, capture_output=True, text=True, timeout=20)
        out["start_rc"] = start.returncode
        for gib in ("1", "3"):
            t0 = time.perf_counter()
            client = subprocess.run(
                [sys.executable, "-c", MPS_CLIENT, gib],
                env=dict(env, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=2G"),
                capture_output=True,
                text=True,
                timeout=60,
            )
            out[f"client_{gib}GiB_limit_2G"] = (client.stdout + client.stderr).strip()[-300:]
            out[f"client_{gib}GiB_s"] = round(time.perf_counter() - t0, 2)
    except Exception as exc:
        out["error"] = repr(exc)
    finally:
        subprocess.run([out["control"]], input="quit\n", env=env, capture_output=True, text=True, timeout=20)
        time.sleep(1)
        out["log_tail"] = _read(Path("/tmp/probe-mps-log/control.log"))[-600:]
    return out


IPC_CHILD = r"""
import base64, os, pickle, sys, torch
torch.empty(1, device="cuda")
fn, args = pickle.loads(base64.b64decode(sys.stdin.readline()))
t = fn(*args)
print("pid_in_ns", os.getpid(), "read", float(t[0].item()), flush=True)
t.fill_(7.0)
torch.cuda.synchronize()
print("wrote", flush=True)
"""


def probe_pidns_ipc() -> dict:
    import base64
    import pickle

    import torch
    from torch.multiprocessing.reductions import reduce_tensor

    t = torch.full((1 << 20,), 3.0, device="cuda")
    fn, args = reduce_tensor(t)
    payload = base64.b64encode(pickle.dumps((fn, args))).decode() + "\n"
    out = {}
    for name, prefix in (
        ("plain", []),
        ("pidns_mount_proc", ["unshare", "--pid", "--fork", "--mount-proc"]),
        ("pidns_net_ipc", ["unshare", "--pid", "--fork", "--mount-proc", "--net", "--ipc"]),
    ):
        t.fill_(3.0)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        res = subprocess.run(
            [*prefix, sys.executable, "-c", IPC_CHILD],
            input=payload,
            capture_output=True,
            text=True,
            timeout=60,
        )
        out[name] = {
            "rc": res.returncode,
            "stdout": res.stdout.strip()[-200:],
            "stderr": res.stderr.strip()[-300:],
            "judge_sees": float(t[0].item()),
            "wall_s": round(time.perf_counter() - t0, 2),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    result: dict = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "uname": os.uname().release,
        "uid": os.getuid(),
    }
    for name, fn in (
        ("cgroups", probe_cgroups),
        ("gpu_sharing", probe_gpu_sharing),
        ("pidns_ipc", probe_pidns_ipc),
        ("mps", probe_mps),
    ):
        t0 = time.perf_counter()
        try:
            result[name] = fn()
        except Exception:
            result[name] = {"error": traceback.format_exc()[-2000:]}
        result[f"{name}_s"] = round(time.perf_counter() - t0, 2)
        Path(args.out).write_text(json.dumps(result, indent=1))
        print(name, "done", result[f"{name}_s"], "s", flush=True)


if __name__ == "__main__":
    main()
