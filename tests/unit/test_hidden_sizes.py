"""Which of a task's globals the hidden-size trial changes, and to what (judge/sizes.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from cuda_agent_mcp.judge.sizes import resized, size_globals


def _module(tmp_path: Path, source: str) -> ModuleType:
    path = tmp_path / "reference.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("reference_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.w = nn.Parameter(torch.ones(features))

    def forward(self, x):
        return x * self.w + offset

batch_size = 4096
features = 64
offset = 3
shape = (128, 7)
flag = True
scale = 0.5
vocab = 1000

def get_inputs():
    return [
        torch.rand(batch_size, features) * scale,
        torch.rand(*shape) > 0 if flag else None,
        torch.randint(0, vocab, (batch_size,)),
        offset,
    ]

def get_init_inputs():
    return [features]
"""


def test_only_input_dimensions_that_neither_the_weights_nor_the_model_read_grow_to_odd_values(
    tmp_path: Path,
) -> None:
    module = _module(tmp_path, SOURCE)
    # features sizes the weights, offset is read by forward, flag and scale are not integer sizes,
    # vocab only bounds the indices (into a table whose size get_init_inputs fixes).
    assert size_globals(module) == {"batch_size": 4097, "shape": (129, 9)}


def test_the_globals_are_restored_after_the_resized_call(tmp_path: Path) -> None:
    module = _module(tmp_path, SOURCE)
    with resized(module, size_globals(module)):
        inputs = module.get_inputs()
    assert inputs[0].shape == (4097, 64) and inputs[1].shape == (129, 9)
    assert module.batch_size == 4096 and module.shape == (128, 7)
    with pytest.raises(RuntimeError), resized(module, {"batch_size": 3}):
        raise RuntimeError("the reference failed")
    assert module.batch_size == 4096


def test_literal_sizes_give_nothing_to_change(tmp_path: Path) -> None:
    module = _module(tmp_path, "import torch\ndef get_inputs():\n    return [torch.rand(8, 8)]\n")
    assert size_globals(module) == {}


def test_kernelbench_tasks_get_size_globals(tmp_path: Path, kernelbench: Path) -> None:
    hinge = _module(tmp_path, (kernelbench / "level1" / "100_HingeLoss.py").read_text())
    assert size_globals(hinge) == {"batch_size": 32769, "input_shape": (32769,)}
    conv = _module(tmp_path, (kernelbench / "level2" / "100_ConvTranspose3d_Clamp_Min_Divide.py").read_text())
    # in_channels also sizes the convolution's weights, so it stays.
    assert size_globals(conv) == {"batch_size": 17, "depth": 25, "height": 49, "width": 49}
