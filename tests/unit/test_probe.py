"""The task probe runs a reference's entry points on the meta device in a child process."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from cuda_agent_mcp.errors import TaskLoadError
from cuda_agent_mcp.tasks import load_task_file, probe_task, task_from_source
from cuda_agent_mcp.tasks.model import TaskSource
from tests.unit.test_task_loaders import GOOD


def _task(code: str):
    return task_from_source(code, task_id="t/1", name="t", source=TaskSource(kind="inline"), location="t.py")


def test_inputs_of_many_gigabytes_are_described_without_being_made(kernelbench: Path) -> None:
    report = anyio.run(probe_task, load_task_file(kernelbench / "level1" / "19_ReLU.py"))
    (spec,) = report.inputs
    assert spec.kind == "tensor" and spec.dtype == "float32"
    assert spec.shape is not None and spec.shape[0] * spec.shape[1] > 10**9  # 6.4 GB if it were real
    assert report.parameter_count == 0


def test_parameters_and_init_inputs_are_reported(kernelbench: Path) -> None:
    report = anyio.run(
        probe_task, load_task_file(kernelbench / "level1" / "2_Standard_matrix_multiplication_.py")
    )
    assert [s.kind for s in report.inputs] == ["tensor", "tensor"]
    conv = anyio.run(probe_task, load_task_file(kernelbench / "level2" / "1_Conv2D_ReLU_BiasAdd.py"))
    assert conv.parameter_count is not None and conv.parameter_count > 0
    assert conv.init_inputs


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            ("return [torch.randn(4, 4)]", "return [4, 4]"),
            "get_inputs() must return a list of tensors, got [int, int]",
        ),
        (
            ("return [torch.randn(4, 4)]", "return torch.randn(4, 4)"),
            "must return a list of tensors, got Tensor",
        ),
        (
            ("return [torch.randn(4, 4)]", "raise RuntimeError('no inputs today')"),
            "get_inputs() raised RuntimeError: no inputs today",
        ),
        (
            ("super().__init__()", "super().__init__(); raise ValueError('bad init')"),
            "Model(*get_init_inputs()) raised ValueError",
        ),
        (("class Model(nn.Module)", "class Model"), "Model must subclass torch.nn.Module"),
        (
            ("import torch\n", "import torch\nimport not_a_module_anywhere\n"),
            "importing the reference failed",
        ),
    ],
)
def test_entry_points_that_misbehave_are_reported_clearly(change: tuple[str, str], problem: str) -> None:
    code = GOOD.replace(*change)
    assert code != GOOD
    with pytest.raises(TaskLoadError) as caught:
        anyio.run(probe_task, _task(code))
    assert problem in caught.value.problem


def test_a_reference_that_hangs_is_stopped() -> None:
    code = GOOD.replace("return [torch.randn(4, 4)]", "while True: pass")
    with pytest.raises(TaskLoadError, match="longer than"):
        anyio.run(lambda: probe_task(_task(code), timeout_s=8))


def test_a_report_is_kept_so_the_same_code_is_probed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tasks show` then `workspace new` of one task: the second pays no child process (torch, seconds)."""
    from cuda_agent_mcp.tasks import probe as probe_module

    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path / "cache"))
    first = anyio.run(probe_task, _task(GOOD))
    assert len(list((tmp_path / "cache" / "probes").glob("*.json"))) == 1

    async def no_child(task: object, *, timeout_s: float) -> None:
        raise AssertionError("probed again")

    monkeypatch.setattr(probe_module, "_probe", no_child)
    assert anyio.run(probe_task, _task(GOOD)) == first
    with pytest.raises(AssertionError, match="probed again"):  # other code: no kept report
        anyio.run(probe_task, _task(GOOD + "\n# changed\n"))


def test_a_failed_probe_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(TaskLoadError):
        anyio.run(
            probe_task,
            _task(GOOD.replace("def get_inputs():", "def get_inputs():\n    raise ValueError('no')")),
        )
    assert not list((tmp_path / "cache").rglob("*.json"))
