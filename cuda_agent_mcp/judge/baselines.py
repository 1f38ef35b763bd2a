"""Eager and torch.compile timings of the reference: measured in clean workers, cached per task, GPU and torch."""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path
from typing import Any

import torch

from cuda_agent_mcp.evaluation.job import baseline_cache_key
from cuda_agent_mcp.judge.judge import Judge
from cuda_agent_mcp.results import TimingStats


def measure_baselines(judge: Judge) -> tuple[TimingStats | None, TimingStats | None, bool]:
    """Eager and torch.compile timings of the reference, from the cache or measured in clean workers."""
    job = judge.job
    if job.baselines == "skip":
        return None, None, False
    cache = Path(job.baseline_cache_path) if job.baseline_cache_path else None
    gpu = torch.cuda.get_device_name(judge.device) if judge.device.type == "cuda" else "cpu"
    key = baseline_cache_key(job.baseline_key, gpu, torch.__version__)
    if job.baselines == "cached" and cache is not None:
        entry = _read_cache(cache).get(key)
        if entry:
            return (
                TimingStats.model_validate(entry["eager"]),
                TimingStats.model_validate(entry["compiled"]),
                True,
            )
    directory = judge.scratch / "baseline"
    directory.mkdir(exist_ok=True)
    shutil.copy(job.reference_path, directory / "model.py")
    results = []
    for compile_model in (False, True):
        worker = judge.start_worker(directory, "model", "Model", compile_model=compile_model)
        try:
            timeout = job.timeouts.compile_load_s if compile_model else job.timeouts.call_s
            results.append(judge.time_worker(worker, timeout, trusted=True)[0])
        finally:
            worker.close()
    eager, compiled = results
    if cache is not None:
        data = _read_cache(cache)
        data[key] = {"eager": eager.model_dump(), "compiled": compiled.model_dump()}
        cache.parent.mkdir(parents=True, exist_ok=True)
        temporary = cache.with_suffix(f".{secrets.token_hex(6)}.tmp")
        temporary.write_text(json.dumps(data, indent=1))
        temporary.replace(cache)
    return eager, compiled, False


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
