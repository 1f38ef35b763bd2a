"""The rule sets a training run is judged under.

`gpu` is the product's rules: CUDA kernels, the audit on (no PyTorch compute in the candidate), timed
against eager and torch.compile, the paper's milestone reward. `cpu-pure-pytorch` exists only so a trainer
can be exercised where no GPU is: the judge runs the candidate on the CPU, the audit is off (a
pure-PyTorch `ModelNew` is admitted, since no kernel can run there) and nothing can be timed, so a
candidate that verifies earns the milestones' "correct, not faster" 1.0 and anything else -1.0. A policy
trained under it learns nothing about kernels; its name says so wherever it is used.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent_mcp.adapters.trl import TrlKernelEnvironment, trl_environment
from cuda_agent_mcp.agent.actions import EnvironmentSettings
from cuda_agent_mcp.tasks import TaskCatalog

RuleSetName = Literal["cpu-pure-pytorch", "gpu"]

REPO_EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"

# The smoke task under the CPU rules: the bundled ReLU at a size a 2-core machine judges in a second.
SMALL_RELU = ("batch_size = 4096\ndim = 8192", "batch_size = 16\ndim = 1024")


class RuleSet(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: RuleSetName
    summary: str
    settings: EnvironmentSettings
    untimed_reward: float | None = Field(
        default=None,
        description="the reward of a candidate that verified where nothing can be timed (the CPU); "
        "None: such a candidate gets the schedule's FAIL, as under the product's rules",
    )
    task_id: str = Field(description="the task every smoke episode starts from")

    def task_file(self, directory: Path) -> Path:
        """Write the smoke task's reference into `directory`; its stem is the task's name."""
        source = (REPO_EXAMPLES / "relu" / "model.py").read_text()
        if self.name == "cpu-pure-pytorch":
            source = source.replace(*SMALL_RELU)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "relu.py"
        path.write_text(source)
        return path

    def trl_environment(self, tasks: Path, root: Path) -> Callable[[], TrlKernelEnvironment]:
        """The `environment_factory` of a run under these rules: the smoke task (written into `tasks`),
        these judging settings and untimed reward, one workspace directory per environment under `root`."""
        return trl_environment(
            catalog=TaskCatalog([self.task_file(tasks)], include_bundled=False),
            settings=self.settings,
            untimed_reward=self.untimed_reward,
            root=root,
        )


RULE_SETS: dict[RuleSetName, RuleSet] = {
    "cpu-pure-pytorch": RuleSet(
        name="cpu-pure-pytorch",
        summary="CPU judge, audit off (pure-PyTorch candidates admitted), untimed: verified = 1, else -1",
        settings=EnvironmentSettings(device="cpu", audit=False, baselines="skip", seed=0),
        untimed_reward=1.0,
        task_id="file/relu",
    ),
    "gpu": RuleSet(
        name="gpu",
        summary="the product's rules: CUDA kernels, audit on, timed against eager and torch.compile",
        settings=EnvironmentSettings(device="cuda"),
        task_id="file/relu",
    ),
}
