"""Second isolation probe: CUDA IPC from a judge to a worker under each confinement, with the worker's
CUDA context created before it maps the judge's memory (the first probe's plain cases segfaulted for
lack of it). Run as root on the GPU machine:

    python benchmarks/probes/h200_ipc_probe2.py --out results.json
"""

from __future__ import annotations

import argparse
import base64
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
flags = (CLONE_NEWUSER if case.get("userns") else 0) | (CLONE_NEWNET if case.get("netns") else 0) | (CLONE_NEWNS if case.get("mountns") else 0)
if flags:
    if libc.unshare(flags) != 0:
        out["unshare_errno"] = ctypes.get_errno()
    elif case.get("userns"):
        open("/proc/self/setgroups", "w").write("deny")
        open("/proc/self/uid_map", "w").write(f"0 {uid} 1")
        open("/proc/self/gid_map", "w").write(f"0 {gid} 1")
if case.get("mountns") and "unshare_errno" not in out:
    libc.mount(None, b"/", None, 16384 | (1 << 18), None)
    for target in case.get("tmpfs", []):
        r = libc.mount(b"tmpfs", target.encode(), b"tmpfs", 0, b"size=64m")
        out[f"tmpfs {target}"] = r if r == 0 else ctypes.get_errno()
if case.get("drop_to"):
    os.setgid(case["drop_to"]); os.setuid(case["drop_to"])
import torch
torch.cuda.init(); torch.empty(1, device="cuda")
if case.get("landlock_fs"):
    # handled: all fs rights (ABI 1-3); allowed read everywhere, write only in /tmp/probe-own
    class Attr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]
    class Rule(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]
    ALL = (1 << 15) - 1
    READ = 1 | 4 | 8
    attr = Attr(ALL, 0, 3)
    rs = libc.syscall(444, ctypes.byref(attr), ctypes.c_size_t(24), 0)
    for path, access in (("/", READ), ("/dev/null", ALL & ~(1 << 3) & ((1 << 2) | 2 | (1 << 14) | 1)), ("/tmp/probe-own", ALL)):
        os.makedirs("/tmp/probe-own", exist_ok=True)
        fd = os.open(path, os.O_PATH)
        r = Rule(access, fd)
        out[f"rule {path}"] = libc.syscall(445, rs, 1, ctypes.byref(r), 0)
    for dev in os.listdir("/dev"):
        if dev.startswith("nvidia"):
            fd = os.open("/dev/" + dev, os.O_PATH)
            r = Rule(1 | 2 | 4, fd)
            libc.syscall(445, rs, 1, ctypes.byref(r), 0)
    libc.prctl(38, 1, 0, 0, 0)
    out["restrict"] = libc.syscall(446, rs, 0)
    try:
        open("/dev/shm/probe-write", "w").write("x"); out["shm_write"] = "allowed"
    except OSError as e:
        out["shm_write"] = type(e).__name__
payload = pickle.loads(base64.b64decode(sys.stdin.read()))
try:
    storage = torch.UntypedStorage._new_shared_cuda(*payload["args"])
    t = torch.empty(0, dtype=torch.float32, device=storage.device).set_(storage, payload["offset"], payload["shape"], payload["stride"])
    out["value"] = float(t.sum())
    t.mul_(2); torch.cuda.synchronize(); out["wrote"] = True
except Exception as e:
    out["ipc_error"] = f"{type(e).__name__}: {str(e)[:120]}"
try:
    y = torch.ones(10, device="cuda")
    s = y.untyped_storage()._share_cuda_()
    out["share_own_output"] = "ok"
except Exception as e:
    out["share_own_output"] = f"{type(e).__name__}: {str(e)[:160]}"
try:
    os.kill(os.getppid(), 0); out["signal_parent"] = "allowed"
except OSError as e:
    out["signal_parent"] = type(e).__name__
print("RESULT " + json.dumps(out), flush=True)
"""


def judge(spec: str) -> None:
    import ctypes

    import torch

    cases = json.loads(spec)
    results = []
    for case in cases:
        if case.get("judge_not_dumpable"):
            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
        x = torch.ones(1 << 20, device="cuda")
        args = x.untyped_storage()._share_cuda_()
        payload = {"args": args, "offset": 0, "shape": [1 << 20], "stride": [1]}
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(case)],
            input=base64.b64encode(pickle.dumps(payload)).decode(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        result = {
            "case": case["name"],
            "rc": done.returncode,
            "wall_s": round(time.perf_counter() - started, 2),
        }
        for line in done.stdout.splitlines():
            if line.startswith("RESULT "):
                result.update(json.loads(line[7:]))
        if "value" not in result:
            result["stderr"] = done.stderr[-600:]
        torch.cuda.synchronize()
        result["judge_sees_after"] = float(x[0])
        results.append(result)
    print("JUDGE " + json.dumps(results), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--judge", default=None)
    args = parser.parse_args()
    if args.judge:
        judge(args.judge)
        return
    report: dict = {}
    cases = [
        {"name": "plain"},
        {"name": "userns_netns", "userns": True, "netns": True},
        {"name": "userns_only", "userns": True},
        {"name": "netns_only_needs_root", "netns": True},
        {"name": "mountns_private_tmp_shm_needs_root", "mountns": True, "tmpfs": ["/tmp", "/dev/shm"]},
        {"name": "landlock_fs_no_shm_write", "landlock_fs": True},
        {"name": "judge_not_dumpable", "judge_not_dumpable": True},
    ]
    # 1. judge as root; 2. judge as uid 10001; 3. judge started by root inside fresh net+mount namespaces
    #    with a private /dev/shm and /tmp, then dropped to uid 10001 (workers inherit the namespaces)
    prefixes = {
        "judge_root": [],
        "judge_uid_10001": ["setpriv", "--reuid", "10001", "--regid", "10001", "--clear-groups"],
        "judge_root_made_ns_then_10001": [
            "unshare",
            "--net",
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            'mount -t tmpfs -o size=1g tmpfs /dev/shm && mount -t tmpfs tmpfs /tmp && exec setpriv --reuid 10001 --regid 10001 --clear-groups "$@"',
            "sh",
        ],
    }
    here = os.path.abspath(__file__)
    for key, prefix in prefixes.items():
        env = dict(os.environ, HOME="/tmp", USER="worker")
        t = time.perf_counter()
        done = subprocess.run(
            [*prefix, sys.executable, here, "--out", "-", "--judge", json.dumps(cases)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd="/",
        )
        report[key + "_wall_s"] = round(time.perf_counter() - t, 1)
        for line in done.stdout.splitlines():
            if line.startswith("JUDGE "):
                report[key] = json.loads(line[6:])
        if key not in report:
            report[key] = {"rc": done.returncode, "stderr": done.stderr[-1500:]}
    text = json.dumps(report, indent=1)
    print(text)
    if args.out != "-":
        with open(args.out, "w") as handle:
            handle.write(text)


if __name__ == "__main__":
    main()
