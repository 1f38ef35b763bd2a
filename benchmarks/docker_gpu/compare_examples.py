"""The bundled examples' results on the two executors, side by side (h200_docker.sh's output folder).

    python benchmarks/docker_gpu/compare_examples.py OUT_DIR

Reads `{sandbox,docker}_{cold,warm}_{example}.json` (the CLI's `eval --json`) and the wall times in
`examples.txt`; prints one line per example and round and writes `examples_compare.json`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def summary(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return {"error": f"no JSON ({exc.__class__.__name__})"}
    if "error" in data:
        return {"error": str(data["error"].get("message", ""))[:300]}
    profile = data.get("profile") or {}
    verdict = profile.get("verdict") or (data.get("verify") or {}).get("verdict") or {}
    return {
        "reward": data.get("reward"),
        "verdict": verdict.get("status"),
        "speedup_vs_eager": profile.get("speedup_vs_eager"),
        "speedup_vs_compile": profile.get("speedup_vs_compile"),
        "worker_isolation": (profile.get("environment") or {}).get("worker_isolation"),
    }


def main() -> None:
    out = Path(sys.argv[1])
    walls: dict[tuple[str, str, str], int] = {}
    for line in (out / "examples.txt").read_text().splitlines():
        match = re.match(r"(\w+) (\w+) (\w+) rc=(\d+) (\d+)s", line)
        if match:
            walls[(match[1], match[2], match[3])] = int(match[5])
    rows = []
    for round_ in ("cold", "warm"):
        for name in ("relu", "bias_add_relu", "row_sum"):
            row: dict[str, object] = {"example": name, "round": round_}
            for backend in ("sandbox", "docker"):
                row[backend] = {
                    **summary(out / f"{backend}_{round_}_{name}.json"),
                    "wall_s": walls.get((backend, round_, name)),
                }
            rows.append(row)
            s, d = row["sandbox"], row["docker"]
            print(
                f"{round_:4} {name:14} sandbox reward {s.get('reward')} {s.get('wall_s')}s | "
                f"docker reward {d.get('reward')} {d.get('wall_s')}s {d.get('error', '')}"
            )
    (out / "examples_compare.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
