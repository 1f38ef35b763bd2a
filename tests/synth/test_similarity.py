"""Similarity for decontamination and deduplication: disguised copies are near, a changed op is not."""

from __future__ import annotations

from pathlib import Path

from cuda_agent_mcp.synth.similarity import (
    DEFAULT_NEAR_THRESHOLD,
    ReferenceIndex,
    ast_similarity,
    fingerprint,
    kernelbench_index,
    op_similarity,
    paper_ast_similarity,
)

ORIGINAL = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Conv, ReLU, bias, then a matmul with a weight."""
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape, features):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.act = nn.ReLU()
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.weight = nn.Parameter(torch.randn(features, features))

    def forward(self, x):
        x = self.conv(x)
        x = self.act(x)
        x = x + self.bias
        x = torch.matmul(x, self.weight)
        return torch.sum(x, dim=1)

batch_size = 128
in_channels = 3
out_channels = 16
height = width = 32
kernel_size = 3
bias_shape = (out_channels, 1, 1)
features = 30

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape, features]
'''

RENAMED = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, c_in, c_out, k, b_shape, n):
        super(Model, self).__init__()
        self.layer = nn.Conv2d(c_in, c_out, k)
        self.relu = nn.ReLU()
        self.offset = nn.Parameter(torch.randn(b_shape))
        self.w = nn.Parameter(torch.randn(n, n))

    def forward(self, inp):
        y = self.layer(inp)
        y = self.relu(y)
        y = y + self.offset
        y = torch.matmul(y, self.w)
        return torch.sum(y, dim=1)

B = 128
C_IN = 3
C_OUT = 16
H = W = 32
K = 3
B_SHAPE = (C_OUT, 1, 1)
N = 30

def get_inputs():
    return [torch.rand(B, C_IN, H, W)]

def get_init_inputs():
    return [C_IN, C_OUT, K, B_SHAPE, N]
"""

REORDERED = """
import torch
import torch.nn as nn

features = 30
kernel_size = 3
out_channels = 16
bias_shape = (out_channels, 1, 1)
in_channels = 3
height = width = 32
batch_size = 128

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape, features]

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape, features):
        super(Model, self).__init__()
        self.weight = nn.Parameter(torch.randn(features, features))
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.act = nn.ReLU()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = self.conv(x)
        x = self.act(x)
        x = x + self.bias
        x = torch.matmul(x, self.weight)
        return torch.sum(x, dim=1)
"""

RESTYLED = """
import torch
from torch import nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape, features):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=0)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.5)
        self.weight = nn.Parameter(torch.empty(features, features).normal_())

    def forward(self, x):
        h = F.relu(self.conv(x)) + self.bias
        return (h @ self.weight).sum(dim=1)

batch_size = 64
in_channels = 8
out_channels = 32
height = width = 64
kernel_size = 5
bias_shape = (out_channels, 1, 1)
features = 60

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape, features]
"""


def template(activation: str) -> str:
    return f"""
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = self.conv(x)
        return torch.{activation}(x)

batch_size, in_channels, out_channels, size, kernel_size = 16, 3, 8, 32, 3

def get_inputs():
    return [torch.rand(batch_size, in_channels, size, size)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
"""


ELEMENTWISE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.{op}(x)

def get_inputs():
    return [torch.rand(16, 1024)]

def get_init_inputs():
    return []
"""


def near(a_code: str, b_code: str) -> bool:
    a, b = fingerprint(a_code), fingerprint(b_code)
    assert a is not None and b is not None
    return max(ast_similarity(a, b), op_similarity(a, b)) >= DEFAULT_NEAR_THRESHOLD


def test_ops_follow_modules_built_in_init_and_spell_each_operation_one_way():
    original, restyled = fingerprint(ORIGINAL), fingerprint(RESTYLED)
    assert original is not None and restyled is not None
    assert original.ops == ("conv2d", "relu", "add", "matmul", "sum")
    assert restyled.ops == original.ops


def test_renamed_reordered_resized_and_restyled_copies_are_near_their_original():
    for copy in (RENAMED, REORDERED, RESTYLED):
        assert near(ORIGINAL, copy)
    original, renamed, reordered = fingerprint(ORIGINAL), fingerprint(RENAMED), fingerprint(REORDERED)
    assert original is not None and renamed is not None and reordered is not None
    # names and order are not what the statement measure sees
    assert ast_similarity(original, renamed) == 1.0
    assert ast_similarity(original, reordered) == 1.0


def test_one_template_with_another_activation_is_not_near():
    relu, gelu = fingerprint(template("relu")), fingerprint(template("sigmoid"))
    assert relu is not None and gelu is not None
    assert relu.ops == ("conv2d", "relu") and gelu.ops == ("conv2d", "sigmoid")
    assert not near(template("relu"), template("sigmoid"))
    # ... while the raw-token stand-in for the paper's rule calls them near: why statements, not tokens
    assert paper_ast_similarity(template("relu"), template("sigmoid")) > 0.9


def test_normalized_hash_ignores_comments_and_formatting_but_not_an_op():
    reformatted = ORIGINAL.replace("x = self.conv(x)", "x = self.conv( x )  # the convolution").replace(
        '"""Conv, ReLU, bias, then a matmul with a weight."""', '"""Another docstring."""'
    )
    a, b = fingerprint(ORIGINAL), fingerprint(reformatted)
    changed = fingerprint(ORIGINAL.replace("torch.sum(x, dim=1)", "torch.mean(x, dim=1)"))
    assert a is not None and b is not None and changed is not None
    assert a.normalized_hash == b.normalized_hash
    assert changed.normalized_hash != a.normalized_hash


def test_unparsable_code_has_no_fingerprint():
    assert fingerprint("class Model(nn.Module):\n    def forward(self, x)\n") is None


def test_op_similarity_of_two_programs_without_ops_is_zero():
    a, b = fingerprint("x = 1\n"), fingerprint("y = 2\n")
    assert a is not None and b is not None
    assert a.ops == () and op_similarity(a, b) == 0.0


def write_kernelbench(root: Path) -> None:
    tasks = {
        "level1/19_ReLU": ELEMENTWISE.format(op="relu"),
        "level1/21_Sigmoid": ELEMENTWISE.format(op="sigmoid"),
        "level2/1_Conv_ReLU": template("relu"),
        "level2/9_Conv_Bias_Matmul": ORIGINAL,
    }
    for name, code in tasks.items():
        path = root / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
    (root / "level3").mkdir()
    (root / "level3" / "1_Broken.py").write_text("def (:\n")


def test_the_index_finds_each_copys_original_among_kernelbench_tasks(tmp_path: Path):
    write_kernelbench(tmp_path)
    index = kernelbench_index(tmp_path)
    assert len(index) == 4  # the unparsable task is skipped
    for copy in (RENAMED, REORDERED, RESTYLED):
        fp = fingerprint(copy)
        assert fp is not None
        found = index.near(fp)
        assert found is not None and found.ref_id == "kernelbench/level2/9_Conv_Bias_Matmul"
    conv_gelu = fingerprint(template("gelu"))
    assert conv_gelu is not None
    nearest = index.nearest(conv_gelu)
    assert nearest is not None and nearest.ref_id == "kernelbench/level2/1_Conv_ReLU"
    assert nearest.similarity < DEFAULT_NEAR_THRESHOLD and index.near(conv_gelu) is None


def test_nearest_matches_a_brute_force_search_and_honours_exclude(tmp_path: Path):
    write_kernelbench(tmp_path)
    index = kernelbench_index(tmp_path)
    programs = {
        "renamed": RENAMED,
        "restyled": RESTYLED,
        "relu_only": template("relu"),
        "tanh": template("tanh"),
    }
    references = {
        f"kernelbench/{p.parent.name}/{p.stem}": fingerprint(p.read_text())
        for p in sorted(tmp_path.glob("*/*.py"))
    }
    for code in programs.values():
        fp = fingerprint(code)
        assert fp is not None
        for exclude in (frozenset(), frozenset({"kernelbench/level2/9_Conv_Bias_Matmul"})):
            scores = {
                ref_id: max(ast_similarity(fp, ref), op_similarity(fp, ref))
                for ref_id, ref in references.items()
                if ref is not None and ref_id not in exclude
            }
            found = index.nearest(fp, exclude=exclude)
            assert found is not None
            assert found.ref_id not in exclude
            assert found.similarity == max(scores.values())


def test_an_empty_index_has_no_nearest():
    fp = fingerprint(ORIGINAL)
    assert fp is not None
    assert ReferenceIndex().nearest(fp) is None
