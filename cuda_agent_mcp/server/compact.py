"""The tool list as sent: the same schemas, without what only repeats or decorates them.

MCP hosts put every server's tool list into every conversation, so its size is paid in each. Pydantic
gives every property and model a `title` that repeats its name, object-valued defaults that repeat the
nested model, and output schemas carry field descriptions a model reads only after it called the tool.
Removing these changes what validates against a schema in no way: `title`, `description` and `default`
are annotations in JSON Schema. Arguments keep their descriptions (they are how a model learns what to
pass), each said once in the list; results keep their field names and a summary line, which say what
they hold.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.types import Tool as MCPTool

# Keywords whose value is a map from names to schemas: its keys are names, never keywords.
_NAMED_SCHEMAS = ("properties", "$defs", "definitions", "patternProperties")


def compact_schema(schema: Any, *, outputs: bool, said: set[str] | None = None) -> Any:
    """`schema` without titles and object-valued defaults; an output schema also without descriptions,
    defaults (they describe arguments) and closed-object markers; an input schema without the descriptions already in `said`
    (which it adds its own to)."""
    if isinstance(schema, list):
        return [compact_schema(item, outputs=outputs, said=said) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "additionalProperties" and value is False and outputs:
            continue  # the server's own answers: nothing it sends has fields its models lack
        if key == "default" and (outputs or (isinstance(value, dict | list) and value)):
            continue
        if key == "description" and isinstance(value, str):
            if outputs or (said is not None and value in said):
                continue
            if said is not None:
                said.add(value)
        if key in _NAMED_SCHEMAS and isinstance(value, dict):
            kept[key] = {name: compact_schema(sub, outputs=outputs, said=said) for name, sub in value.items()}
        else:
            kept[key] = compact_schema(value, outputs=outputs, said=said)
    return kept


def compact_tools(tools: list[MCPTool]) -> list[MCPTool]:
    """The list with compact schemas: an argument's description is said once, where it first appears
    (`session_id`'s in the first session tool, the verify options' in verify, not again in evaluate)."""
    said: set[str] = set()
    return [
        tool.model_copy(
            update={
                "input_schema": compact_schema(tool.input_schema, outputs=False, said=said),
                "output_schema": None
                if tool.output_schema is None
                else compact_schema(tool.output_schema, outputs=True),
            }
        )
        for tool in tools
    ]


class CompactToolsServer(MCPServer):
    """An MCP server whose tools/list answer carries compact schemas (calls are validated as before,
    against the full models)."""

    async def list_tools(self) -> list[MCPTool]:
        return compact_tools(await super().list_tools())
