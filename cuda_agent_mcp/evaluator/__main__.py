"""`python -m cuda_agent_mcp.evaluator`: the judge server (see server.py)."""

from cuda_agent_mcp.evaluator.server import main

if __name__ == "__main__":
    main()
