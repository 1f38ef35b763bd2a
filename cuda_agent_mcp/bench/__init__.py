"""Suites, scores and reports: run a task set's solutions through the evaluator, get the table the field
publishes (pass rate, fast_p, geomean speedups, SOL), a self-contained HTML report, JSON and CSV.

`run_suite` is the runner (the CLI's `cuda-agent bench run` and the MCP server's summary tool use it);
`summary_of` reads a report directory back. Torch is never imported here: the judge does the measuring.
"""

from cuda_agent_mcp.bench.baselines import BaselineTable, task_baselines
from cuda_agent_mcp.bench.kernelbench_import import KernelBenchImport, import_kernelbench_solution
from cuda_agent_mcp.bench.metrics import group_metrics, suite_groups
from cuda_agent_mcp.bench.models import (
    GroupMetrics,
    SolutionSpec,
    SuiteProgress,
    SuiteRequest,
    SuiteResult,
    SuiteSummary,
    TaskRow,
)
from cuda_agent_mcp.bench.runner import Steps, run_suite
from cuda_agent_mcp.bench.summary import run_directory, runs_index, summary_of

__all__ = [
    "BaselineTable",
    "GroupMetrics",
    "KernelBenchImport",
    "SolutionSpec",
    "Steps",
    "SuiteProgress",
    "SuiteRequest",
    "SuiteResult",
    "SuiteSummary",
    "TaskRow",
    "group_metrics",
    "import_kernelbench_solution",
    "run_directory",
    "run_suite",
    "runs_index",
    "suite_groups",
    "summary_of",
    "task_baselines",
]
