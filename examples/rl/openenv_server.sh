#!/usr/bin/env bash
# The cuda-agent OpenEnv environment server (pip install 'cuda-agent-mcp[openenv]').
# Clients: GenericEnvClient(base_url="http://HOST:8000"); reset(task_id="kernelbench/level1/19"),
# then step({"tool": "write_file", "arguments": {...}}) ... step({"tool": "submit"}).
# CUDA_AGENT_TASKS names the task sources (e.g. a KernelBench checkout).
set -euo pipefail
export CUDA_AGENT_TASKS="${CUDA_AGENT_TASKS:-KernelBench}"
exec uvicorn --factory cuda_agent_mcp.adapters.openenv:create_openenv_app --host 0.0.0.0 --port "${PORT:-8000}"
