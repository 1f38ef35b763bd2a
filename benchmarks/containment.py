"""Benchmark (issue 24): nothing a candidate starts outlives its evaluation, and what it leaves costs the
next honest evaluation nothing.

    python benchmarks/containment.py --out containment.json [--cooldown 2] [--concurrent 8]

1. The relu example scored alone (baselines cached), then for each way of detaching a process (fork,
   double fork + setsid, daemon(3), posix_spawn into a new session, a fork from a native thread) a
   hostile copy of it whose extension leaves a GPU spinner running when imported, then the honest example again after
   `--cooldown` seconds: the hostile one must be rejected (`process_left_running`), no spinner may be
   alive afterwards, and the honest speedup (median time against the same cached baseline) must stay
   within 5% of the first.
2. `--concurrent` evaluations at once, one of them hostile (`--hostile spinner`: its spinner left at
   import; `--hostile hog`: its extension takes all the GPU memory it can get, 1 GiB at a time, when
   imported, and keeps it), the rest honest examples: their rewards against the same examples scored alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import anyio
from reward_repeats import example_solution as example  # a script beside this one

from cuda_agent_mcp.agent.actions import EnvironmentSettings
from cuda_agent_mcp.env import Solution, score_batch
from cuda_agent_mcp.tools.gpu import gpu_specs

# Native code, so the static audit of Python sources has nothing to say and only the cage stands between
# the process and the next evaluation. A static initializer runs when the extension is imported (the
# worker's load call): it starts, by WAY, a process that becomes a Python GPU spinner for 60 s (or, where
# exec is refused, idles). Each is named by TAG in its command line or its name, so the benchmark finds
# it from outside (the judge's /dev/shm and /tmp are private: no marker file would reach us).
TAG = "cuda-agent-bench-leftover"
COMM = "cab-leftover"
LEAVE_CPP = r"""
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

extern char** environ;
static const char* kSpin =
    "import torch, time\n"
    "end = time.time() + 60\n"
    "while time.time() < end:\n"
    "    torch.cuda._sleep(20000000); torch.cuda.synchronize()\n";

[[noreturn]] static void become_spinner() {
  prctl(PR_SET_NAME, "COMM", 0, 0, 0);
  execl("/proc/self/exe", "python3", "-c", kSpin, "TAG", static_cast<char*>(nullptr));
  for (;;) pause();
}

static void leave_behind() {
  const char* way = "WAY";
  if (!std::strcmp(way, "fork")) {
    if (fork() == 0) become_spinner();
  } else if (!std::strcmp(way, "double_fork_setsid")) {
    pid_t first = fork();
    if (first == 0) { setsid(); if (fork() == 0) become_spinner(); _exit(0); }
    waitpid(first, nullptr, 0);
  } else if (!std::strcmp(way, "daemon")) {
    pid_t first = fork();
    if (first == 0) { if (daemon(0, 0) == 0) become_spinner(); _exit(0); }
    waitpid(first, nullptr, 0);
  } else if (!std::strcmp(way, "spawn_setsid")) {
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    char* argv[] = {const_cast<char*>("python3"), const_cast<char*>("-c"), const_cast<char*>(kSpin),
                    const_cast<char*>("TAG"), nullptr};
    pid_t child;
    posix_spawn(&child, "/proc/self/exe", nullptr, &attr, argv, environ);
  } else if (!std::strcmp(way, "from_thread")) {
    std::thread([] { if (fork() == 0) become_spinner(); }).join();
  }
}

static int started = (leave_behind(), 0);
"""
WAYS = ("fork", "double_fork_setsid", "daemon", "spawn_setsid", "from_thread")

# Every GiB it can get (up to 128), held until it is killed: the judge's memory watch must stop it before
# the concurrent evaluations beside it run out of memory for long.
HOG_CPP = r"""
#include <cuda_runtime.h>
static int grab() {
  int held = 0;
  void* block = nullptr;
  while (held < 128 && cudaMalloc(&block, size_t(1) << 30) == cudaSuccess) ++held;
  cudaGetLastError();
  return held;
}
static int held = grab();
"""


def hostile(how: str) -> Solution:
    """The relu example plus a C++ unit that leaves a process behind, `how`, when it is imported."""
    honest = example("relu")
    leave = LEAVE_CPP.replace('"WAY"', f'"{how}"').replace('"TAG"', f'"{TAG}"').replace('"COMM"', f'"{COMM}"')
    return Solution(task=honest.task, files={**honest.files, "kernels/leave.cpp": leave})


def hog() -> Solution:
    """The relu example plus a C++ unit that takes the GPU's memory when it is imported."""
    honest = example("relu")
    return Solution(task=honest.task, files={**honest.files, "kernels/hog.cpp": HOG_CPP})


def leftovers() -> list[int]:
    """Processes the hostile extensions started, found by their tag or name, that are not zombies."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            tagged = (
                TAG.encode() in (entry / "cmdline").read_bytes()
                or (entry / "comm").read_text().strip() == COMM
            )
            running = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            continue
        if tagged and running:
            found.append(int(entry.name))
    return found


def score(solutions: list[Solution], settings: EnvironmentSettings, concurrency: int = 1) -> list:
    return anyio.run(lambda: score_batch(solutions, settings=settings, concurrency=concurrency))


def row(s) -> dict:
    return {
        "reward": s.reward,
        "status": s.status,
        "speedup_vs_eager": s.speedup_vs_eager,
        "attempts": s.attempts,
        "message": s.message[:300],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cooldown", type=float, default=2.0)
    parser.add_argument("--concurrent", type=int, default=8)
    parser.add_argument("--ways", nargs="*", default=list(WAYS))
    parser.add_argument("--hostile", choices=("spinner", "hog"), default="spinner")
    args = parser.parse_args()
    settings = EnvironmentSettings(device="cuda", baselines="cached")
    result: dict = {
        "benchmark": "containment",
        "commit": os.environ.get("BENCH_COMMIT", "unknown"),
        "gpus": [g.name for g in gpu_specs().gpus],
        "cooldown_s": args.cooldown,
        "detach": {},
    }

    def save() -> None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")

    first = score([example("relu")], settings)[0]  # measures and caches the baselines
    before = score([example("relu")], settings)[0]
    result["honest_before"] = row(before)
    save()
    for how in args.ways:
        started = time.perf_counter()
        bad = score([hostile(how)], settings)[0]
        time.sleep(0.5)
        entry = {
            "hostile": row(bad),
            "hostile_wall_s": round(time.perf_counter() - started, 2),
            "alive_after": leftovers(),
        }
        time.sleep(args.cooldown)
        after = score([example("relu")], settings)[0]
        entry["honest_after"] = row(after)
        if before.speedup_vs_eager and after.speedup_vs_eager:
            entry["median_change"] = round(before.speedup_vs_eager / after.speedup_vs_eager - 1, 4)
        result["detach"][how] = entry
        print(how, json.dumps(entry), flush=True)
        save()
    del first

    names = ["relu", "bias_add_relu", "row_sum"]
    honest = [example(names[i % 3]) for i in range(args.concurrent - 1)]
    alone = {name: row(score([example(name)], settings)[0]) for name in names}
    started = time.perf_counter()
    bad = hostile("double_fork_setsid") if args.hostile == "spinner" else hog()
    together = score([bad, *honest], settings, args.concurrent)
    result["concurrent"] = {
        "evaluations": args.concurrent,
        "hostile_kind": args.hostile,
        "wall_s": round(time.perf_counter() - started, 2),
        "alone": alone,
        "hostile": row(together[0]),
        "alive_after": leftovers(),
        "honest": [{"example": names[i % 3], **row(s)} for i, s in enumerate(together[1:])],
        "honest_rewards_as_alone": sum(
            s.reward == alone[names[i % 3]]["reward"] for i, s in enumerate(together[1:])
        ),
    }
    changes = [e["median_change"] for e in result["detach"].values() if "median_change" in e]
    result["summary"] = {
        "hostile_rejected": sum(e["hostile"]["status"] == "rejected" for e in result["detach"].values()),
        "ways": len(result["detach"]),
        "left_alive_after": sum(len(e["alive_after"]) for e in result["detach"].values()),
        "worst_median_change": max(changes, key=abs) if changes else None,
        "median_of_changes": statistics.median(changes) if changes else None,
    }
    result["idle_judges"] = idle_judge_memory()
    save()
    print(json.dumps(result["summary"]), json.dumps(result["concurrent"]["honest_rewards_as_alone"]))
    print("idle judges:", json.dumps(result["idle_judges"]))


def idle_judge_memory() -> list[dict]:
    """GPU memory each warm judge of this process's pool holds while idle, by NVML (after the runs)."""
    time.sleep(2.0)
    listed = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, timeout=30,
    ).stdout  # fmt: skip
    judges = []
    for line in listed.splitlines():
        pid, _, mib = (part.strip() for part in line.partition(","))
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            command = ""
        judges.append({"pid": int(pid), "used_mib": int(mib), "judge": "cuda_agent_mcp.judge" in command,
                       "command": command[:120]})  # fmt: skip
    return judges


if __name__ == "__main__":
    main()
