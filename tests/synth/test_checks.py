"""The running filters in the isolating executor: each way a program can be unsound is refused with its
reason, a hang or a memory hog costs only its own candidate, and a sound program passes them all."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.executors import SandboxedExecutor
from cuda_agent_mcp.synth.checks import CheckSettings, ChunkItem, check_chunk, outcomes_of
from cuda_agent_mcp.synth.filters import FilterOutcome
from cuda_agent_mcp.synth.gpu_executor import GpuCheckExecutor
from tests.synth import programs


def _first_refusal(outcomes: list[FilterOutcome]) -> FilterOutcome | None:
    return next((o for o in outcomes if o.passed is False), None)


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[FilterOutcome]]:
    """One chunk holding every program: the hang and the crash must not take the others down."""
    names = [
        "SOUND",
        "SCALAR",
        "DROPOUT",
        "INPUT_BLIND",
        "CONSTANT",
        "NEAR_ZERO",
        "HANGS",
        "HOGS_MEMORY",
        "WRONG_SHAPE",
        "KILLS_ITSELF",
    ]
    items = [ChunkItem(index=i, code=getattr(programs, name)) for i, name in enumerate(names)]
    settings = CheckSettings(
        device="cpu", runtime=True, compile=False, timeout_s=8, host_memory_bytes=2 * 1024**3
    )
    scratch = tmp_path_factory.mktemp("scratch")

    async def run() -> dict[int, list[FilterOutcome]]:
        return await check_chunk(SandboxedExecutor(), items, settings, scratch=scratch, lock_path=None)

    results = anyio.run(run)
    return {name: results[i] for i, name in enumerate(names)}


def test_a_scalar_output_that_follows_its_inputs_is_not_degenerate(
    checked: dict[str, list[FilterOutcome]],
) -> None:
    assert all(o.passed for o in checked["SCALAR"]), checked["SCALAR"]
    assert checked["SCALAR"][-1].measured["null_answers_passing"] == []


def test_a_sound_program_passes_every_running_filter(checked: dict[str, list[FilterOutcome]]) -> None:
    outcomes = checked["SOUND"]
    assert [o.name for o in outcomes] == ["shape_probe", "eager", "deterministic", "non_degenerate"]
    assert all(o.passed for o in outcomes)
    assert outcomes[0].measured["outputs"] == [[64, 32]]
    assert outcomes[3].measured["null_answers_passing"] == []


@pytest.mark.parametrize(
    ("name", "refused_by", "words"),
    [
        ("DROPOUT", "deterministic", "stochastic"),
        ("INPUT_BLIND", "non_degenerate", "does not depend on the inputs"),
        ("CONSTANT", "non_degenerate", "null answer (ones)"),
        ("NEAR_ZERO", "non_degenerate", "null answer (zeros)"),
        ("HANGS", "shape_probe", "ran past the 8 s limit"),
        ("HOGS_MEMORY", "eager", "more host memory than a candidate may use (2 GiB)"),
        ("WRONG_SHAPE", "shape_probe", f"(model.py line {programs.FORWARD_LINE})"),
        ("KILLS_ITSELF", "shape_probe", "killed by SIGSEGV"),
    ],
)
def test_each_unsound_program_is_refused_by_its_filter_with_the_reason(
    checked: dict[str, list[FilterOutcome]], name: str, refused_by: str, words: str
) -> None:
    refusal = _first_refusal(checked[name])
    assert refusal is not None, checked[name]
    assert refusal.name == refused_by
    assert words in refusal.reason
    assert checked[name][-1] is refusal  # nothing runs after a refusal


def test_the_meta_probe_alone_runs_nothing_for_real(tmp_path: Path) -> None:
    settings = CheckSettings(device="cpu", runtime=False, compile=False, timeout_s=30)
    items = [ChunkItem(index=0, code=programs.HOGS_MEMORY), ChunkItem(index=1, code=programs.WRONG_SHAPE)]

    async def run() -> dict[int, list[FilterOutcome]]:
        return await check_chunk(SandboxedExecutor(), items, settings, scratch=tmp_path, lock_path=None)

    results = anyio.run(run)
    assert [(o.name, o.passed) for o in results[0]] == [("shape_probe", True)]  # 64 GiB on meta costs nothing
    assert results[0][0].measured["outputs"] == [[1 << 34]]
    assert results[1][0].passed is False


def test_a_filter_begun_and_never_finished_fails_with_what_ended_it() -> None:
    events = [
        {"begin": "shape_probe"},
        {"outcome": {"name": "shape_probe", "passed": True, "reason": "", "measured": {}}},
        {"begin": "eager"},
        {"died": "it was killed by SIGKILL"},
    ]
    outcomes = outcomes_of(events)
    assert [(o.name, o.passed, o.reason) for o in outcomes] == [
        ("shape_probe", True, ""),
        ("eager", False, "it was killed by SIGKILL"),
    ]


ESCAPES = programs.SOUND.replace(
    "return torch.relu(self.linear(x))",
    "import socket, pathlib\n"
    "        written = []\n"
    "        for target in ('/etc/synth-escape', str(pathlib.Path.home().parent / 'synth-escape')):\n"
    "            try:\n"
    "                open(target, 'w').write('x')\n"
    "                written.append(target)\n"
    "            except OSError:\n"
    "                pass\n"
    "        try:\n"
    "            socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
    "            written.append('network')\n"
    "        except OSError:\n"
    "            pass\n"
    "        assert not written, written\n"
    "        return torch.relu(self.linear(x))",
)


def test_the_gpu_executor_child_confines_each_candidate_itself(tmp_path: Path) -> None:
    """On a GPU the child starts as a judge does, without a view or a Landlock domain (CUDA initialises
    under neither): each candidate process confines itself before the program loads. The same path on
    this CPU: a program that writes outside its directory or opens a connection gets nowhere."""
    settings = CheckSettings(device="cpu", runtime=True, compile=False, timeout_s=30)
    executor = GpuCheckExecutor()
    items = [ChunkItem(index=0, code=ESCAPES), ChunkItem(index=1, code=programs.SOUND)]
    # The candidates' parent folder holds the GPU lock: reachable, and writable for anyone but Landlock.
    tmp_path.chmod(0o777)
    lock = tmp_path / "gpu0.lock"
    lock.touch(mode=0o644)

    async def run() -> dict[int, list[FilterOutcome]]:
        return await check_chunk(executor, items, settings, scratch=tmp_path, lock_path=lock)

    results = anyio.run(run)
    assert all(o.passed for o in results[1]), results[1]
    assert all(o.passed for o in results[0]), results[0]  # its own assertion: nothing escaped
    assert not (tmp_path / "synth-escape").exists()
    assert executor.isolation == (
        "network",
        "mount",
        "user",
        "pids-cgroup",
        "landlock:by-the-command",
        "rlimits",
    )
