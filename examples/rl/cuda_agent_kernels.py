"""The kernel taskset under a top-level name, which is how verifiers finds tasksets by id.

    PYTHONPATH=examples/rl vf-eval cuda_agent_kernels --env.taskset.tasks '["path/to/KernelBench"]' ...

(verifiers imports a taskset id as a top-level module and takes the Taskset subclass its `__all__` names.)
"""

from cuda_agent_mcp.adapters.verifiers import KernelTaskset

__all__ = ["KernelTaskset"]
