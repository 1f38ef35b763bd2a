"""On a GPU with a Docker engine: evaluation workers in containers that reach exactly one GPU.

The container gets its GPU by NVIDIA's toolkit where the engine has it, else by the toolkit-free path
(`isolation/gpu_access.py`: device nodes and the driver's libraries); `CUDA_AGENT_DOCKER_GPU` forces one.
A candidate in such a container sees its one GPU's node and none of the others, none of the host's
processes, no network and no other container's files; a worker killed in the middle of an evaluation
leaves no container, no mount and no GPU memory behind. Skipped where there is no engine or image
(sandbox/README.md says how to make both; benchmarks/docker_gpu/ starts an engine on a machine without
one).
"""

from __future__ import annotations

import ast
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_agent_mcp.errors import ExecutorUnavailable
from cuda_agent_mcp.evaluation.job import JudgeReport, Timeouts
from cuda_agent_mcp.judge.container_worker import ContainerWorkerPool
from cuda_agent_mcp.results import Crashed, Passed, TimedOut
from tests.evaluator.conftest import HONEST, honest_running, judge
from tests.sandbox.conftest import unavailable, worker_containers

pytestmark = [pytest.mark.gpu]


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContainerWorkerPool]:
    if os.getuid() == 0:
        pytest.skip(
            "GPU worker containers run as the judge's user, never root: run as a user of the docker group"
        )
    scratch = tmp_path_factory.mktemp("gpu-container-workers")
    try:
        workers = ContainerWorkerPool(scratch, {"PATH": os.environ["PATH"], "CUDA_VISIBLE_DEVICES": "0"})
    except ExecutorUnavailable as exc:
        unavailable(str(exc))
    yield workers
    workers.close()


@pytest.fixture
def run_judge(tmp_path: Path, pool: ContainerWorkerPool):
    def run(candidate: str, **job: object) -> JudgeReport:
        return judge(tmp_path, candidate, workers=pool, device="cuda", **job)

    return run


def _gpu_memory_used_mib() -> int:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.split()[0])


def test_an_honest_candidate_passes_on_the_gpu_in_a_container_and_the_record_names_the_gpu_path(
    run_judge, pool
) -> None:
    report = run_judge(HONEST)
    assert isinstance(report.verdict, Passed), report.verdict
    isolation = report.environment["worker_isolation"]
    assert isolation.startswith("container (docker): GPU 0 only (gpu path: ")
    assert pool.settings.gpu_path in ("toolkit", "devices")
    assert f"gpu path: {pool.settings.gpu_path}" in isolation
    forced = os.environ.get("CUDA_AGENT_DOCKER_GPU", "auto")
    if forced != "auto":
        assert pool.settings.gpu_path == forced


def test_a_candidate_sees_one_gpu_no_host_process_no_network_and_no_other_containers_files(
    run_judge, pool
) -> None:
    probe = honest_running(
        "import os, socket, torch\n"
        "seen = {}\n"
        "seen['gpu_nodes'] = sorted(n for n in os.listdir('/dev') if n.startswith('nvidia') and n[6:].isdigit())\n"
        "seen['cuda_devices'] = torch.cuda.device_count()\n"
        "try:\n"
        "    seen['pids'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
        "except OSError as exc:\n"
        "    seen['pids'] = 'unreadable'\n"
        f"seen['judge_visible'] = os.path.exists('/proc/{os.getpid()}/status')\n"
        "try:\n"
        "    seen['interfaces'] = sorted(os.listdir('/sys/class/net'))\n"
        "except OSError:\n"
        "    seen['interfaces'] = 'unreadable'\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 53), timeout=2).close()\n"
        "    seen['network'] = True\n"
        "except OSError:\n"
        "    seen['network'] = False\n"
        "here = os.path.dirname(os.getcwd())\n"
        "try:\n"
        "    seen['scratch'] = sorted(os.listdir(here))\n"
        "except OSError:\n"
        "    seen['scratch'] = []\n"
        "seen['cwd'] = os.path.basename(os.getcwd())\n"
        "raise RuntimeError('SEEN ' + repr(seen))"
    )
    host_gpus = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit())
    report = run_judge(probe)
    assert isinstance(report.verdict, Crashed), report.verdict
    message = report.verdict.message
    seen = ast.literal_eval(message[message.index("SEEN ") + 5 :].splitlines()[0])
    assert seen["gpu_nodes"] == [f"nvidia{_minor_of_gpu0()}"], (seen, host_gpus)
    assert seen["cuda_devices"] == 1
    assert seen["judge_visible"] is False
    assert seen["pids"] == "unreadable" or (max(seen["pids"]) < 1000 and len(seen["pids"]) < 50), seen["pids"]
    assert seen["interfaces"] in ("unreadable", ["lo"]), seen["interfaces"]
    assert seen["network"] is False
    tag = seen["cwd"].removeprefix("worker-")
    assert all(tag in entry for entry in seen["scratch"]), seen["scratch"]  # its own directories alone
    assert isinstance(run_judge(HONEST).verdict, Passed)


def test_a_worker_killed_mid_evaluation_leaves_no_container_no_mount_and_no_gpu_memory(
    run_judge, pool
) -> None:
    assert isinstance(run_judge(HONEST).verdict, Passed)
    time.sleep(2)
    before_mib = _gpu_memory_used_mib()
    hog = honest_running(
        "import time, torch\n"
        "self._hoard = torch.empty(8 * 1024**3, dtype=torch.uint8, device='cuda').fill_(1)\n"
        "torch.cuda.synchronize()\n"
        "time.sleep(3600)"
    )
    report = run_judge(hog, timeouts=Timeouts(load_s=60, call_s=8))
    assert isinstance(report.verdict, TimedOut), report.verdict
    deadline = time.monotonic() + 20
    while len(worker_containers(pool)) > 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(worker_containers(pool)) <= 1  # only the one started ahead
    # Each running container has one root filesystem mounted on the host; a removed one's is unmounted.
    roots = [
        line for line in Path("/proc/self/mounts").read_text().splitlines() if line.startswith("overlay ")
    ]
    assert len(roots) <= len(pool.client.containers.list()), roots
    while _gpu_memory_used_mib() > before_mib + 1024 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _gpu_memory_used_mib() <= before_mib + 1024  # the 8 GiB hoard went with its container
    assert isinstance(run_judge(HONEST).verdict, Passed)


def _minor_of_gpu0() -> int:
    from cuda_agent_mcp.isolation.gpu_access import gpu_minor

    return gpu_minor("0")
