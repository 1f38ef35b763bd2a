"""Train for real, at smoke scale: python examples/rl/smoke_train.py [--config YAML] [--out DIR] [--json]

Makes a tiny local policy (a Qwen3-architecture model of under a million parameters and a tokenizer
trained here, in the Hugging Face format), warms it up, then runs the paper's TRL stages on it with
this environment's real builds and evaluations: single-turn GRPO through `KernelEnv` (2 optimizer steps,
then 1 more resumed from the checkpoint) and rejection fine-tuning on the committed agent trajectories.
The default config (examples/rl/recipe/smoke_cpu.yaml) needs no GPU; smoke_gpu.yaml runs the same stages
under the product's rules. Exit status 0 when every step learned (rewards that differ within a group, a
non-zero gradient, weights that moved), 1 when a check failed, 2 when the run could not start.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=HERE / "recipe" / "smoke_cpu.yaml")
    parser.add_argument("--out", type=Path, default=None, help="run directory (default: a new temporary one)")
    parser.add_argument(
        "--trajectories",
        type=Path,
        nargs="+",
        default=None,
        help="agent-loop trajectories for the RFT stage (default: the committed H200 ones)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (the report) and nothing else"
    )
    options = parser.parse_args()
    try:
        from cuda_agent_mcp.training.smoke import SmokeConfig, run_smoke
    except ImportError as exc:
        print(f"error: {exc}; install the training extra: pip install 'cuda-agent-mcp[trl]'", file=sys.stderr)
        return 2
    try:
        config = SmokeConfig.model_validate(yaml.safe_load(options.config.read_text()))
    except (OSError, ValueError) as exc:
        print(f"error: cannot read {options.config}: {exc}", file=sys.stderr)
        return 2
    out = options.out or Path(tempfile.mkdtemp(prefix="cuda-agent-smoke-"))
    log = (
        (lambda line: print(line, file=sys.stderr, flush=True))
        if options.json
        else (lambda line: print(line, flush=True))
    )
    try:
        report = run_smoke(config, out, options.trajectories, log=log)
    except Exception as exc:  # one line, never a traceback: the run directory keeps what was done
        message = f"{type(exc).__name__}: {exc}".splitlines()[0][:400]
        if options.json:
            print(json.dumps({"error": {"message": message, "out": str(out)}}))
        else:
            print(f"error: the smoke run failed: {message} (run directory {out})", file=sys.stderr)
        return 2
    if options.json:
        print(json.dumps({**report.model_dump(mode="json"), "ok": report.ok, "out": str(out)}))
    else:
        print(
            f"{'trained' if report.ok else 'FAILED'}: {out}/smoke.json"
            + "".join(f"\n  problem: {p}" for p in report.problems)
        )
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
