"""The answers the tiny policy is warmed up on: the bundled ReLU example's solution and mutants of it.

Each answer is the set of files a policy writes with `write_file`. The right ones are the example
solutions; the wrong ones are the same files with one operator changed (the kind of slip the committed
agent trajectory starts with: a kernel that forgets part of the computation). Warming up on both makes the
sampled answers sometimes right and sometimes wrong, so rewards vary within a GRPO group: with constant
rewards GRPO has no gradient.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from cuda_agent_mcp.training.rules import REPO_EXAMPLES, RuleSetName

RELU = REPO_EXAMPLES / "relu"


class Answer(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    right: bool
    files: dict[str, str]


def _torch_model(expression: str) -> str:
    """A pure-PyTorch ModelNew (only the CPU rule set admits it)."""
    return (
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
        f"        super().__init__()\n\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
        f"        return {expression}\n"
    )


def _cuda_files(kernel: str) -> dict[str, str]:
    return {
        "kernels/relu.cu": kernel,
        "kernels/relu_binding.cpp": (RELU / "kernels" / "relu_binding.cpp").read_text(),
        "model_new.py": (RELU / "model_new.py").read_text(),
    }


def answers(rules: RuleSetName) -> list[Answer]:
    """The warm-up answers of a rule set, right ones first."""
    if rules == "cpu-pure-pytorch":
        return [
            Answer(name="relu", right=True, files={"model_new.py": _torch_model("torch.relu(x)")}),
            Answer(name="clamp", right=True, files={"model_new.py": _torch_model("x.clamp(min=0)")}),
            Answer(name="abs", right=False, files={"model_new.py": _torch_model("x.abs()")}),
            Answer(name="sigmoid", right=False, files={"model_new.py": _torch_model("torch.sigmoid(x)")}),
        ]
    kernel = (RELU / "kernels" / "relu.cu").read_text()
    if kernel.count("fmaxf(") != 5:
        raise RuntimeError("examples/relu/kernels/relu.cu changed: update the warm-up mutants")
    return [
        Answer(name="example", right=True, files=_cuda_files(kernel)),
        # fminf in the vector body: every positive element becomes 0.
        Answer(name="fminf", right=False, files=_cuda_files(kernel.replace("fmaxf(", "fminf(", 4))),
    ]


def classify(files: dict[str, str], rules: RuleSetName) -> str:
    """'right', 'wrong' (a known wrong answer) or 'other' (anything else the policy wrote)."""
    for answer in answers(rules):
        if all(files.get(path) == content for path, content in answer.files.items()):
            return "right" if answer.right else "wrong"
    return "other"
