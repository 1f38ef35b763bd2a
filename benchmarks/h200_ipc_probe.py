"""Probe (issue 24, items 3 and 5): what torch's CUDA IPC reference counting does to memory a judge shares
with several workers, and what the judge can check about a mapping a worker describes.

    python benchmarks/h200_ipc_probe.py --out ipc_probe.json      (on a GPU machine, from the repo root)

1. Counters. A buffer in a MemPool of its own is shared once (as `staging` does) and mapped, in turn, by
   0 to 3 fresh worker processes that let go of it; then the judge drops it, collects torch's IPC limbo
   and empties its cache. Recorded: the counter slot before and after, and the memory still allocated
   (torch frees a dropped shared block only when its counter reads exactly 0). With `zeroed`, the judge
   sets the slot to 0 itself before dropping. Then a new buffer is shared and mapped by a new worker, to
   see whether later IPC mappings still work after pools were freed.
2. Mappings. The judge maps a worker's output, then asks the driver (`cuMemGetAddressRange`) for the
   allocation behind the mapped pointer: does it give the exporter's allocation size, so that an offset
   or size the worker lies about can be caught before anything is read?
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import gc
import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import torch

from cuda_agent_mcp.wire.refs import TensorRef
from cuda_agent_mcp.wire.transport import open_ref, share

MAPPER = r"""
import gc, sys, torch
from cuda_agent_mcp.wire.refs import TensorRef
from cuda_agent_mcp.wire.transport import open_ref
ref = TensorRef.model_validate_json(sys.stdin.read())
torch.empty(1, device="cuda")  # a worker's context exists before it maps anything
t = open_ref(ref, max_bytes=1 << 40, expected_device=0)
print(float(t[:4096].float().sum()))
del t
gc.collect()
torch.cuda.synchronize()
"""

EXPORTER = r"""
import sys, time, torch
from cuda_agent_mcp.wire.transport import share
n = int(sys.argv[1])
t = torch.arange(n, dtype=torch.float32, device="cuda")
view = t[1024:]  # an offset inside the allocation, as an output slice would have
print(share(view).model_dump_json(), flush=True)
sys.stdin.read()  # keep the allocation until the judge is done
"""

GIB = 1 << 30
# torch's counter files are RefcountedMapAllocator mappings: the allocator's own header (its refcount)
# takes the first TH_ALLOC_ALIGNMENT bytes, and slot i of the int64 counters follows at 64 + 8 * i.
HEADER = 64


def counter_path(ref: TensorRef) -> Path:
    name = base64.b64decode(ref.payload.ref_counter_handle).decode()
    return Path("/dev/shm") / name.lstrip("/")


def read_counter(ref: TensorRef) -> int:
    with open(counter_path(ref), "rb") as f:
        f.seek(HEADER + 8 * ref.payload.ref_counter_offset)
        return struct.unpack("<q", f.read(8))[0]


def write_counter(ref: TensorRef, value: int) -> None:
    with open(counter_path(ref), "r+b") as f:
        f.seek(HEADER + 8 * ref.payload.ref_counter_offset)
        f.write(struct.pack("<q", value))


def map_in_worker(ref: TensorRef) -> dict:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", MAPPER],
        input=ref.model_dump_json(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return {
        "rc": done.returncode,
        "s": round(time.perf_counter() - started, 2),
        "err": done.stderr.strip().splitlines()[-1:] if done.returncode else [],
    }


def counters_case(workers: int, zeroed: bool, nbytes: int) -> dict:
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        buffer = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    buffer.fill_(1)
    ref = share(buffer)
    at_share = read_counter(ref)
    mapped = [map_in_worker(ref) for _ in range(workers)]
    after_workers = read_counter(ref)
    if zeroed:
        write_counter(ref, 0)
    del buffer
    gc.collect()
    torch.cuda.ipc_collect()
    del pool
    gc.collect()
    torch.cuda.ipc_collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    return {
        "workers": workers,
        "zeroed": zeroed,
        "counter_at_share": at_share,
        "counter_after_workers": after_workers,
        "mapped": mapped,
        "still_allocated_gib": round((torch.cuda.memory_allocated() - base) / GIB, 3),
        "reserved_gib": round(torch.cuda.memory_reserved() / GIB, 3),
    }


def later_mapping_works(nbytes: int) -> dict:
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        buffer = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    buffer.fill_(2)
    ref = share(buffer)
    result = [map_in_worker(ref) for _ in range(2)]
    write_counter(ref, 0)
    del buffer, pool
    gc.collect()
    torch.cuda.ipc_collect()
    torch.cuda.empty_cache()
    return {"mapped": result, "allocated_gib_after": round(torch.cuda.memory_allocated() / GIB, 3)}


def address_range_case() -> dict:
    cuda = ctypes.CDLL("libcuda.so.1")
    get_range = cuda.cuMemGetAddressRange_v2
    get_range.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
    n = 3 * (1 << 20) + 17
    exporter = subprocess.Popen(
        [sys.executable, "-c", EXPORTER, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        ref = TensorRef.model_validate_json(exporter.stdout.readline())
        out: dict = {"sent": ref.payload.model_dump(exclude={"handle", "event_handle"})}
        tensor = open_ref(ref, max_bytes=1 << 40, expected_device=0)
        storage = tensor.untyped_storage()
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        rc = get_range(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(storage.data_ptr()))
        out.update(
            rc=rc,
            storage_ptr_minus_base=storage.data_ptr() - base.value,
            range_size=size.value,
            storage_nbytes=storage.nbytes(),
            exporter_bytes=4 * n,
            first=float(tensor[0]),
        )
        del tensor, storage
        gc.collect()
        return out
    finally:
        exporter.stdin.close()
        exporter.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args()
    nbytes = int(args.gib * GIB)
    torch.cuda.init()
    result: dict = {"commit": os.environ.get("BENCH_COMMIT", "unknown"), "torch": torch.__version__}
    result["gpu"] = torch.cuda.get_device_name()
    result["counters"] = []
    for workers, zeroed in [(0, False), (1, False), (2, False), (3, False), (0, True), (2, True), (3, True)]:
        case = counters_case(workers, zeroed, nbytes)
        print(json.dumps(case), flush=True)
        result["counters"].append(case)
        args.out.write_text(json.dumps(result, indent=1))
    result["later_mapping"] = later_mapping_works(nbytes)
    print(json.dumps(result["later_mapping"]), flush=True)
    try:
        result["address_range"] = address_range_case()
    except Exception as exc:  # a probe: record what failed and go on
        result["address_range"] = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(result["address_range"]), flush=True)
    result["final_allocated_gib"] = round(torch.cuda.memory_allocated() / GIB, 3)
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
