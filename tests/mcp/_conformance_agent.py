"""The agent the MCP conformance suite's server scenarios run against.

Its tools are the suite's fixtures (``test_simple_text``, ``test_image_content``
…), written as a user of mainspring writes tools: ``@tool`` functions and
:class:`ToolOutput`, through the public API only. ``mainspring mcp serve
tests.mcp._conformance_agent:agent --http`` serves it.
"""

from __future__ import annotations

from typing import Any

from mainspring import Agent, ScriptedModel, Tool, ToolContext, ToolOutput, tool
from mainspring.messages import ImagePart

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"
    "z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
"""A 1x1 red pixel."""


@tool(read_only=True)
def test_simple_text() -> str:
    """A tool that returns simple text."""
    return "This is a simple text response for testing."


@tool(read_only=True)
def test_image_content() -> ToolOutput:
    """A tool that returns an image."""
    return ToolOutput(content="", images=(ImagePart(media_type="image/png", data=PNG),))


@tool(read_only=True)
def test_error_handling() -> str:
    """A tool that always fails."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@tool(read_only=True)
async def test_tool_with_progress(ctx: ToolContext) -> str:
    """A tool that reports its progress."""
    for pct in (0.0, 50.0, 100.0):
        ctx.progress(f"{pct:.0f}% done", pct)
    return "Progress test completed"


def _echo_2020_12(**arguments: Any) -> str:
    return f"received {sorted(arguments)}"


json_schema_2020_12_tool = Tool(
    name="json_schema_2020_12_tool",
    description="Tool with JSON Schema 2020-12 features",
    input_schema={
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": False,
    },
    fn=_echo_2020_12,
)

agent = Agent(
    model=ScriptedModel([]),
    name="conformance",
    tools=[
        test_simple_text,
        test_image_content,
        test_error_handling,
        test_tool_with_progress,
        json_schema_2020_12_tool,
    ],
)
