"""GRPO with TRL on KernelBench level 1, the tools and reward coming from cuda-agent-mcp.

Needs a GPU machine, `pip install 'cuda-agent-mcp[trl]'`, a KernelBench checkout and a model TRL can
train. Each generation gets its own environment (workspace); the model calls the default preset's tools
(read_file, write_file, edit_file, list_files, compile, verify, profile, evaluate; from the tool
registry, as the agent loop offers them); the reward is the final evaluation under the paper's
milestones, or None (the rollout is left out) when the environment itself failed.
"""

from pathlib import Path

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from cuda_agent_mcp.adapters.trl import trl_environment
from cuda_agent_mcp.tasks import TaskCatalog

KERNELBENCH = Path("KernelBench")  # a checkout of the KernelBench repository
WORKSPACES = Path("/scratch/cuda-agent-grpo")  # one directory per environment; delete after training

catalog = TaskCatalog([KERNELBENCH])
rows = [
    {
        "prompt": [{"role": "user", "content": "Replace this PyTorch module with faster CUDA kernels."}],
        "task_id": task.id,
    }
    for task in catalog.list(level=1)
]
trainer = GRPOTrainer(
    model="Qwen/Qwen3-8B",
    train_dataset=Dataset.from_list(rows),
    environment_factory=trl_environment(catalog=catalog, max_turns=20, root=WORKSPACES),
    args=GRPOConfig(output_dir="grpo-cuda-agent", num_generations=8, max_completion_length=16384),
)
trainer.train()
