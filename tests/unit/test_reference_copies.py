"""Copies of the reference among a candidate's files are found by their syntax, whatever their name."""

from __future__ import annotations

from pathlib import Path

from cuda_agent_mcp.evaluation.reference_copies import reference_copies

REFERENCE = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """The reference."""

    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.rand(8)]

def get_init_inputs():
    return []
'''


def test_a_renamed_and_reformatted_copy_of_the_reference_is_found(tmp_path: Path) -> None:
    copy = tmp_path / "ref.py"
    copy.write_text(
        REFERENCE.replace("    ", "  ").replace('"""The reference."""', '"""The reference."""  # mine')
    )
    renamed = tmp_path / "helpers.py"
    renamed.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        + REFERENCE.split("import torch.nn as nn\n", 1)[1]
        .replace("class Model", "class Helper")
        .split("def get_inputs")[0]
    )
    own = tmp_path / "model_new.py"
    own.write_text(
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.clamp_min(0)\n"
    )
    findings = reference_copies([copy, renamed, own], REFERENCE)
    assert [(f.file, f.rule) for f in findings] == [
        ("ref.py", "reference_copy"),
        ("helpers.py", "reference_copy"),
    ]
    assert "class Helper is the reference's Model" in findings[1].message
