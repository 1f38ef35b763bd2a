"""`python -m cuda_agent_mcp.judge`: the judge server (see server.py)."""

from cuda_agent_mcp.judge.server import main

if __name__ == "__main__":
    main()
