"""Judge process entry: `python -m cuda_agent_mcp.evaluator JOB.json REPORT.json`.

Writes a JudgeReport. A failure of the judge itself (not the candidate) is reported in `infra_error`
and exits 2, so the tool layer never scores it.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from cuda_agent_mcp.evaluator.job import EvalJob, JudgeReport
from cuda_agent_mcp.evaluator.refs import SHM_TAG_ENV, shm_tag
from cuda_agent_mcp.evaluator.worker_client import WorkerProcess
from cuda_agent_mcp.results import Crashed


def main() -> None:
    started = time.perf_counter()
    job_path, report_path = Path(sys.argv[1]), Path(sys.argv[2])
    job = EvalJob.model_validate_json(job_path.read_text())
    job_path.unlink()  # the verify seeds are in it; a worker that found the path must find nothing
    # Workers get only what they need: tools, locale, GPU selection and where our dependencies are.
    kept = ("PATH", "HOME", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "TMPDIR", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if k in kept}
    env[SHM_TAG_ENV] = shm_tag()
    with tempfile.TemporaryDirectory(prefix="cuda-agent-judge-") as scratch:
        # Start the candidate's worker before this process imports torch: the two imports overlap.
        spawned = WorkerProcess(Path(scratch), env)
        try:
            from cuda_agent_mcp.evaluator.run import run_job

            ready_s = time.perf_counter() - started  # interpreter, torch and our imports
            report = run_job(job, Path(scratch), env, spawned)
            report = report.model_copy(
                update={"phases_s": {"judge_imports": round(ready_s, 4), **report.phases_s}}
            )
            code = 0
        except Exception as exc:  # the judge's own failure: reported, never scored
            detail = "".join(traceback.format_exception(exc))[-4000:]
            report = JudgeReport(
                verdict=Crashed(phase="load", kind="exception", message="judge failure"), infra_error=detail
            )
            code = 2
    report_path.write_text(report.model_dump_json())
    sys.exit(code)


if __name__ == "__main__":
    main()
