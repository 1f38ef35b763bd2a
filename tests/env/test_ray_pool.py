"""score_batch over a real local Ray cluster (CPU): same verdicts as the local path, in order; an actor
killed mid-batch turns its solutions into masked infrastructure failures."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from cuda_agent_mcp.env import Solution  # noqa: E402
from cuda_agent_mcp.env.ray_pool import ACTOR_PREFIX, score_batch_ray  # noqa: E402
from tests.agent.conftest import CORRECT, CPU, KERNELS, SMALL_INPUTS, WRONG  # noqa: E402
from tests.conftest import EXAMPLES  # noqa: E402

pytestmark = pytest.mark.nvcc


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def solutions(tmp_path: Path) -> list[Solution]:
    task = tmp_path / "bias_add_relu.py"
    task.write_text((EXAMPLES / "bias_add_relu" / "model.py").read_text().replace(*SMALL_INPUTS))
    kernels = {f"kernels/{p.name}": p.read_text() for p in KERNELS.iterdir()}
    return [
        Solution(task=str(task), files={"model_new.py": code, **kernels})
        for code in (CORRECT, WRONG, CORRECT)
    ]


def test_two_actors_score_in_order_with_the_local_verdicts(cluster, solutions) -> None:
    scores = score_batch_ray(solutions, settings=CPU, actors=2, trials=2)
    assert [s.index for s in scores] == [0, 1, 2]
    assert [s.status for s in scores] == ["passed", "wrong_output", "passed"]
    assert [s.failure for s in scores] == [None, "model", None] and not any(s.masked for s in scores)


def test_an_actor_killed_mid_batch_gives_masked_infrastructure_failures(cluster, solutions) -> None:
    result: dict[str, list] = {}
    worker = threading.Thread(
        target=lambda: result.update(scores=score_batch_ray(solutions, settings=CPU, actors=1))
    )
    worker.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            ray.kill(ray.get_actor(f"{ACTOR_PREFIX}0"))
            break
        except ValueError:  # not started yet
            time.sleep(0.05)
    worker.join(timeout=300)
    scores = result["scores"]
    assert [s.status for s in scores] == ["infrastructure_error"] * 3
    assert all(s.masked and s.failure == "infrastructure" for s in scores)
