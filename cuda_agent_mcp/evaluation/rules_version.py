"""The version of the rule set verdicts, timings and rewards are given under (docs/DECISIONS.md, "Verdicts
are versioned (issue 23)"). Torch-free and dependency-free: the tool layer stamps it on every result and
journal record, the judge on its report (through `job.py`), and baseline caches and tables key on it.
"""

from __future__ import annotations

# Bump it (to the date of the change; add ".2" for a second change that day) whenever a change can alter a
# verdict, a timing or a reward: how outputs are compared, how the timing cross-check decides, what is
# charged to a candidate, how rewards are computed. Results, journal rows and baselines of another version
# are never mixed with this one's: baselines are measured again, resumed runs refuse them.
# "2026-12-02": the first versioned rule set (before it, results carried no version: read as None).
# "2026-12-02.2": a candidate that leaves a process running after its call returns is rejected
# (`process_left_running`); a timing taken while foreign work ran on the GPU is discarded, never charged.
# "2026-12-03": a candidate whose processes hold more GPU memory than its task's budget is rejected
# (`gpu_memory_exceeded`, evaluation/job.py's GpuMemoryPolicy).
VERDICT_RULES_VERSION = "2026-12-03"
