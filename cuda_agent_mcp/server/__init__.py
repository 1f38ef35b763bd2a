"""The MCP front-end: the tool layer as MCP tools (`cuda-agent serve`). Needs the `mcp` extra."""
