"""Small KernelBench-format programs for the synthesis tests: one sound, and one for each way to fail."""

SOUND = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear -> ReLU."""

    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))


batch_size = 64
features = 32


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
'''

_FORWARD = "return torch.relu(self.linear(x))"
FORWARD_LINE = next(number for number, line in enumerate(SOUND.splitlines(), 1) if _FORWARD in line)

DROPOUT = SOUND.replace(_FORWARD, "return torch.nn.functional.dropout(self.linear(x), 0.5, training=True)")
INPUT_BLIND = SOUND.replace(_FORWARD, "return self.linear.weight.sum(dim=1).expand(x.shape[0], -1) + 0 * x")
CONSTANT = SOUND.replace(_FORWARD, "return torch.softmax(self.linear(x), dim=1).sum(dim=1)")
# One number that follows its inputs: its own mean is itself, so it must not count as a null answer.
SCALAR = SOUND.replace(_FORWARD, "return (self.linear(x) ** 2).sum()")
NEAR_ZERO = SOUND.replace(_FORWARD, "return self.linear(x) * 1e-6")
HANGS = SOUND.replace(_FORWARD, "while True:\n            pass")
HOGS_MEMORY = SOUND.replace(_FORWARD, "return torch.ones(1 << 34)")
WRONG_SHAPE = SOUND.replace("nn.Linear(features, features)", "nn.Linear(features + 1, features)")
KILLS_ITSELF = SOUND.replace(_FORWARD, "import os, signal\n        os.kill(os.getpid(), signal.SIGSEGV)")
NOT_PYTHON = "class Model(nn.Module:\n    pass\n"
