"""What the GPU machine allows, measured once: CUDA IPC across users, user/mount/network namespaces,
Landlock scoped signals and a non-dumpable judge; private memory pools; compute-sanitizer's cost.

    python benchmarks/probes/h200_isolation_probe.py --out results.json

Plain torch (no project imports), so it runs on a bare GPU machine. Each case runs a "judge" that shares
a CUDA tensor and a child process that maps it under the case's confinement and reports what it read.
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import json
import os
import pickle
import subprocess
import sys
import time

CHILD = r"""
import base64, ctypes, os, pickle, sys, json
libc = ctypes.CDLL(None, use_errno=True)
case = json.loads(sys.argv[1])
out = {}
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
uid, gid = os.getuid(), os.getgid()
flags = 0
if case.get("userns"): flags |= CLONE_NEWUSER
if case.get("netns"): flags |= CLONE_NEWNET
if case.get("mountns"): flags |= CLONE_NEWNS
if flags:
    if libc.unshare(flags) != 0:
        out["unshare_errno"] = ctypes.get_errno()
    elif case.get("userns"):
        try:
            open("/proc/self/setgroups", "w").write("deny")
            open("/proc/self/uid_map", "w").write(f"0 {uid} 1")
            open("/proc/self/gid_map", "w").write(f"0 {gid} 1")
        except OSError as e:
            out["map_error"] = str(e)
if case.get("mountns") and "unshare_errno" not in out:
    MS_REC, MS_PRIVATE = 16384, 1 << 18
    libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
    for target in case.get("tmpfs", []):
        r = libc.mount(b"tmpfs", target.encode(), b"tmpfs", 0, b"size=64m")
        out[f"tmpfs {target}"] = r if r == 0 else ctypes.get_errno()
import torch
if case.get("landlock"):
    # ruleset handling only signal scoping (ABI 6: scoped = LANDLOCK_SCOPE_SIGNAL 2 | ABSTRACT_UNIX 1)
    class Attr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]
    torch.empty(1, device="cuda")
    attr = Attr(0, 0, 3)
    fd = libc.syscall(444, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    out["landlock_fd"] = fd if fd >= 0 else -ctypes.get_errno()
    libc.prctl(38, 1, 0, 0, 0)
    out["restrict"] = libc.syscall(446, fd, 0)
    try:
        os.kill(os.getppid(), 0)
        out["signal_parent"] = "allowed"
    except PermissionError:
        out["signal_parent"] = "EPERM"
    except ProcessLookupError:
        out["signal_parent"] = "ESRCH"
try:
    ppid = os.getppid()
    open(f"/proc/{ppid}/mem", "rb").read(1)
    out["parent_mem"] = "readable"
except Exception as e:
    out["parent_mem"] = type(e).__name__
payload = pickle.loads(base64.b64decode(sys.stdin.read()))
try:
    storage = torch.UntypedStorage._new_shared_cuda(*payload["args"])
    t = torch.empty(0, dtype=torch.float32, device=storage.device).set_(storage, payload["offset"], payload["shape"], payload["stride"])
    out["value"] = float(t.sum())
    out["storage_bytes"] = storage.nbytes()
    t.mul_(2)
    torch.cuda.synchronize()
    out["wrote"] = True
except Exception as e:
    out["ipc_error"] = f"{type(e).__name__}: {str(e)[:200]}"
print("RESULT " + json.dumps(out), flush=True)
"""


def run_case(name: str, case: dict, user: int | None, dumpable: bool) -> dict:
    import torch

    libc = ctypes.CDLL(None, use_errno=True)
    if not dumpable:
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    x = torch.ones(1 << 20, device="cuda")
    neighbour = torch.full((1 << 20,), 3.0, device="cuda")  # same allocator segment, probably
    storage = x.untyped_storage()
    args = storage._share_cuda_()
    payload = {"args": args, "offset": x.storage_offset(), "shape": list(x.shape), "stride": list(x.stride())}
    env = dict(os.environ)
    cmd = [sys.executable, "-c", CHILD, json.dumps(case)]
    started = time.perf_counter()
    done = subprocess.run(
        cmd,
        input=base64.b64encode(pickle.dumps(payload)).decode(),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    result = {"case": name, "wall_s": round(time.perf_counter() - started, 2), "rc": done.returncode}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            result.update(json.loads(line[7:]))
    if done.returncode != 0 or "value" not in result:
        result["stderr"] = done.stderr[-800:]
    torch.cuda.synchronize()
    result["judge_sees_after"] = float(x[0])
    result["neighbour_intact"] = bool((neighbour == 3).all())
    result["ipc_storage_bytes_judge"] = int(args[2])
    return result


def judge_main(spec: str) -> None:
    cases = json.loads(spec)
    results = [run_case(c["name"], c, None, c.get("dumpable", True)) for c in cases]
    print("JUDGE " + json.dumps(results), flush=True)


def peaks() -> dict:
    import torch

    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda}
    p = torch.cuda.get_device_properties(0)
    out["sm_count"] = p.multi_processor_count
    out["l2_bytes"] = getattr(p, "L2_cache_size", None)
    out["total_memory"] = p.total_memory

    def bench(fn, reps=10):
        fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(reps):
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        times.sort()
        return times[len(times) // 2]

    n = 1 << 30  # 4 GiB fp32
    source = torch.empty(n, device="cuda")
    target = torch.empty_like(source)
    ms = bench(lambda: target.copy_(source))
    out["copy_bytes_per_s"] = 2 * n * 4 / (ms / 1e3)
    source = target = None
    torch.backends.cuda.matmul.allow_tf32 = False
    for dtype, name, size in (
        (torch.float32, "fp32", 8192),
        (torch.float64, "fp64", 4096),
        (torch.float16, "fp16", 8192),
        (torch.bfloat16, "bf16", 8192),
    ):
        x = torch.randn(size, size, device="cuda", dtype=dtype)
        y = torch.randn(size, size, device="cuda", dtype=dtype)
        ms = bench(lambda x=x, y=y: x @ y)
        out[f"matmul_{name}_flops_per_s"] = 2 * size**3 / (ms / 1e3)
    torch.backends.cuda.matmul.allow_tf32 = True
    x = torch.randn(8192, 8192, device="cuda")
    y = torch.randn(8192, 8192, device="cuda")
    out["matmul_tf32_flops_per_s"] = 2 * 8192**3 / (bench(lambda: x @ y) / 1e3)
    torch.backends.cuda.matmul.allow_tf32 = False
    out["elementwise_fma_chain_note"] = "see matmul_fp32 (SGEMM, FMA units) for the fp32 non-tensor peak"
    # memory pools: do two tensors in private pools export separate IPC allocations?
    try:
        pools = [torch.cuda.MemPool() for _ in range(2)]
        tensors = []
        for pool in pools:
            with torch.cuda.use_mem_pool(pool):
                tensors.append(torch.ones(1000, device="cuda"))
        shares = [t.untyped_storage()._share_cuda_() for t in tensors]
        out["mempool_ipc_sizes"] = [int(s[2]) for s in shares]
        out["mempool_ipc_offsets"] = [int(s[3]) for s in shares]
        out["mempool_handles_differ"] = shares[0][1] != shares[1][1]
        plain = [torch.ones(1000, device="cuda") for _ in range(2)]
        ps = [t.untyped_storage()._share_cuda_() for t in plain]
        out["plain_ipc_sizes"] = [int(s[2]) for s in ps]
        out["plain_handles_same_segment"] = ps[0][1] == ps[1][1]
    except Exception as e:
        out["mempool_error"] = f"{type(e).__name__}: {e}"
    return out


def sanitizer_cost() -> dict:
    prog = "import torch; x = torch.ones(1 << 20, device='cuda'); print(float((x * 2).sum()))"
    out = {}
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", prog], capture_output=True)
    out["plain_s"] = round(time.perf_counter() - t, 2)
    for tool in ("memcheck", "racecheck", "synccheck"):
        t = time.perf_counter()
        d = subprocess.run(
            ["compute-sanitizer", "--tool", tool, sys.executable, "-c", prog], capture_output=True, text=True
        )
        out[f"{tool}_s"] = round(time.perf_counter() - t, 2)
        out[f"{tool}_rc"] = d.returncode
        out[f"{tool}_tail"] = (d.stdout + d.stderr)[-300:]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--judge", default=None)
    args = parser.parse_args()
    if args.judge:
        judge_main(args.judge)
        return
    report: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
    report["uname"] = os.uname().release
    for mod in ("cupti", "pydantic", "mcp"):
        try:
            __import__(mod)
            report[f"import_{mod}"] = True
        except Exception as e:
            report[f"import_{mod}"] = f"{type(e).__name__}"
    cases = [
        {"name": "same_user_plain"},
        {"name": "same_user_netns_userns", "userns": True, "netns": True},
        {
            "name": "same_user_userns_mountns_private_tmp_shm",
            "userns": True,
            "netns": True,
            "mountns": True,
            "tmpfs": ["/tmp", "/dev/shm"],
        },
        {
            "name": "same_user_userns_mountns_private_tmp_only",
            "userns": True,
            "netns": True,
            "mountns": True,
            "tmpfs": ["/tmp"],
        },
        {"name": "same_user_landlock_scoped_signal", "landlock": True},
        {"name": "judge_not_dumpable", "dumpable": False},
        {"name": "judge_not_dumpable_userns", "dumpable": False, "userns": True, "netns": True},
    ]
    spec = json.dumps(cases)
    for who, prefix in (
        (None, []),
        (10001, ["setpriv", "--reuid", "10001", "--regid", "10001", "--clear-groups"]),
    ):
        env = dict(os.environ, HOME="/tmp", USER="worker")
        t = time.perf_counter()
        done = subprocess.run(
            [*prefix, sys.executable, __file__, "--out", "-", "--judge", spec],
            capture_output=True,
            text=True,
            env=env,
            timeout=400,
            cwd="/tmp",
        )
        key = "judge_root" if who is None else "judge_uid_10001"
        report[key + "_wall_s"] = round(time.perf_counter() - t, 1)
        for line in done.stdout.splitlines():
            if line.startswith("JUDGE "):
                report[key] = json.loads(line[6:])
        if key not in report:
            report[key] = {"rc": done.returncode, "stderr": done.stderr[-1500:]}
    report["peaks"] = peaks()
    report["sanitizer"] = sanitizer_cost()
    text = json.dumps(report, indent=1)
    print(text)
    if args.out != "-":
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
