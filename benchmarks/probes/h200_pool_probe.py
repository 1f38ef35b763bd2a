"""Does CUDA IPC work for tensors of a private torch.cuda.MemPool? And what does the judge's staging do
on the GPU (the full message of a failing call)?  python benchmarks/probes/h200_pool_probe.py"""

from __future__ import annotations

import base64
import pickle
import subprocess
import sys

import torch

CHILD = r"""
import base64, pickle, sys, torch
torch.cuda.init(); torch.empty(1, device="cuda")
args = pickle.loads(base64.b64decode(sys.stdin.read()))
try:
    s = torch.UntypedStorage._new_shared_cuda(*args)
    t = torch.empty(0, dtype=torch.uint8, device="cuda").set_(s, 0, [s.nbytes()], [1])
    print("OK", int(t.sum()), s.nbytes())
except Exception as e:
    print("ERR", repr(e)[:3000])
"""


def child(args) -> str:
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=base64.b64encode(pickle.dumps(args)).decode(),
        capture_output=True,
        text=True,
    )
    return (done.stdout + done.stderr[-2000:]).strip()


def main() -> None:
    torch.cuda.init()
    plain = torch.ones(1 << 20, dtype=torch.uint8, device="cuda")
    print("plain:", child(plain.untyped_storage()._share_cuda_()))
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        pooled = torch.ones(1 << 20, dtype=torch.uint8, device="cuda")
    print("mempool:", child(pooled.untyped_storage()._share_cuda_()))
    big = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(big):
        large = torch.ones(64 << 20, dtype=torch.uint8, device="cuda")
    print("mempool 64 MiB:", child(large.untyped_storage()._share_cuda_()))
    sys.path.insert(0, ".")
    import tempfile
    from pathlib import Path

    from tests.evaluator.conftest import HONEST, judge

    report = judge(Path(tempfile.mkdtemp()), HONEST, device="cuda")
    print("judge on cuda:", report.verdict.model_dump_json()[:6000])


if __name__ == "__main__" and len(sys.argv) == 1:
    main()


def tool_layer() -> None:
    """Two verifies and a profile of the relu example per judge server, under switches that isolate the
    cause of a second job's mapping failure; every verdict in full."""
    import os

    import anyio

    from cuda_agent_mcp.evaluation.judge_service import close_shared_judge_pool
    from cuda_agent_mcp.tools import ProfileRequest, Session, VerifyRequest, profile_kernels, verify_kernels

    sys.path.insert(0, ".")
    import tempfile
    from pathlib import Path

    from tests.conftest import EXAMPLES
    from tests.evaluator.conftest import HONEST, judge

    for index in range(3):
        report = judge(Path(tempfile.mkdtemp()), HONEST, device="cuda")
        print(f"in-process judge {index}:", report.verdict.model_dump_json()[:3000])
    # The probe's "no shm cleanup" and "dumpable judge" variants used switches that were removed after it
    # ran (benchmarks/results/h200_ipc_probe2_e053dcd.json has their results): only the default is left.
    for label in ("default",):
        close_shared_judge_pool()
        session = Session.open(EXAMPLES / "relu")
        for attempt in range(2):
            result = anyio.run(lambda s=session: verify_kernels(s, VerifyRequest(audit=False, trials=2)))
            print(f"{label} verify {attempt}:", result.verdict.model_dump_json()[:2500])
        result = anyio.run(lambda s=session: profile_kernels(s, ProfileRequest(baselines="skip")))
        print(
            f"{label} profile:",
            result.verdict.model_dump_json()[:1500],
            result.candidate.model_dump_json(exclude={"samples_ms"}) if result.candidate else None,
        )
        print("  /dev/shm:", sorted(os.listdir("/dev/shm"))[:12])


if __name__ == "__main__" and len(sys.argv) > 1:
    tool_layer()
