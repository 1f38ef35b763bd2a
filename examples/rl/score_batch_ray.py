"""Single-turn scoring of many solutions on every GPU of a Ray cluster (or one machine).

`pip install 'cuda-agent-mcp[ray]'`; run on the head node (`ray start --head` first for a cluster).
Rewards come back in order; `masked` ones are infrastructure failures to leave out of the update.
"""

import json
import sys
from pathlib import Path

from cuda_agent_mcp.env import Solution
from cuda_agent_mcp.env.ray_pool import score_batch_ray

# solutions.jsonl: one {"task": "<task id or .py path>", "files": {"model_new.py": ..., "kernels/x.cu": ...}} per line
solutions = [
    Solution.model_validate_json(line) for line in Path(sys.argv[1]).read_text().splitlines() if line
]
scores = score_batch_ray(solutions, address="auto")
for score in scores:
    print(json.dumps(score.model_dump()))
