"""Tasks: KernelBench-format reference programs and the loaders that find them."""

from cuda_agent_mcp.tasks.catalog import TaskCatalog, bundled_examples_dir, load_source
from cuda_agent_mcp.tasks.dataset import DatasetColumns, load_dataset
from cuda_agent_mcp.tasks.kernelbench import load_kernelbench
from cuda_agent_mcp.tasks.model import Task, TaskPolicy, TaskSource, TaskSummary, TolerancePolicy
from cuda_agent_mcp.tasks.probe import HiddenSize, InputSpec, ProbeReport, probe_task
from cuda_agent_mcp.tasks.single_file import load_task_file, task_from_source

__all__ = [
    "DatasetColumns",
    "HiddenSize",
    "InputSpec",
    "ProbeReport",
    "Task",
    "TaskCatalog",
    "TaskPolicy",
    "TaskSource",
    "TaskSummary",
    "TolerancePolicy",
    "bundled_examples_dir",
    "load_dataset",
    "load_kernelbench",
    "load_source",
    "load_task_file",
    "probe_task",
    "task_from_source",
]
