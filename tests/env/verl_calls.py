"""Calling a verl tool the way verl's agent loop does, for the tests that drive trajectories by hand."""

from __future__ import annotations

from typing import Any


async def call_tool(
    tool: Any, create_kwargs: dict[str, Any], arguments: dict[str, Any], agent_data: Any
) -> tuple[str, float]:
    """verl 0.9.1 `ToolAgentLoop._call_tool` for a `BaseTool`: create, execute, release on every call.
    The response's text and the step's reward."""
    instance, _ = await tool.create(create_kwargs=create_kwargs)
    try:
        response, reward, _ = await tool.execute(instance, arguments, agent_data=agent_data)
    finally:
        await tool.release(instance)
    return response.text or "", reward
