"""The agent the MCP conformance suite's server scenarios run against.

Its tools, resources and prompts are the suite's fixtures (``test_simple_text``,
``test://static-text``, ``test_prompt_with_arguments`` …), written as a user of
mainspring writes them: ``@tool`` functions, :class:`ToolOutput`,
:meth:`ToolContext.log`, and :mod:`mainspring.mcp.offers`, through the public
API only. ``mainspring mcp serve tests.mcp._conformance_agent:serve --http``
serves it.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from mainspring import Agent, ScriptedModel, Tool, ToolContext, ToolOutput, tool
from mainspring.mcp.offers import (
    McpServe,
    PromptArgument,
    PromptPart,
    ServedPrompt,
    ServedResource,
    ServedResourceTemplate,
)
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


@tool(read_only=True)
async def test_tool_with_logging(ctx: ToolContext) -> str:
    """A tool that logs while it runs."""
    ctx.log("Tool execution started")
    ctx.log("Tool processing data")
    ctx.log("Tool execution completed")
    return "Logging test completed"


@tool(read_only=True)
async def test_elicitation(message: str, ctx: ToolContext) -> str:
    """Asks the user for their name and email."""
    answer = await ctx.ask_user(
        message,
        {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        },
    )
    return f"User response: action={answer.action}, content={json.dumps(answer.content)}"


@tool(read_only=True)
async def test_elicitation_sep1034_defaults(ctx: ToolContext) -> str:
    """Asks for a form whose fields all have defaults."""
    answer = await ctx.ask_user(
        "Please review and update the form fields with defaults",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {
                    "type": "string",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "default": True},
            },
        },
    )
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


@tool(read_only=True)
async def test_elicitation_sep1330_enums(ctx: ToolContext) -> str:
    """Asks for a form with every kind of enum."""
    answer = await ctx.ask_user(
        "Please select options from the enum fields",
        {
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {
                    "type": "string",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ],
                },
                "legacyEnum": {
                    "type": "string",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ]
                    },
                },
            },
        },
    )
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


@tool(read_only=True)
async def test_sampling(prompt: str, ctx: ToolContext) -> str:
    """Asks the client's model."""
    return f"LLM response: {await ctx.sample(prompt, max_tokens=100)}"


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
        test_tool_with_logging,
        test_elicitation,
        test_elicitation_sep1034_defaults,
        test_elicitation_sep1330_enums,
        test_sampling,
        json_schema_2020_12_tool,
    ],
)


def _template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


resources = (
    ServedResource(
        uri="test://static-text",
        name="static-text",
        description="A static text resource",
        text="This is the content of the static text resource.",
    ),
    ServedResource(
        uri="test://static-binary",
        name="static-binary",
        description="A static binary resource",
        mime_type="image/png",
        blob=base64.b64decode(PNG),
    ),
    ServedResource(
        uri="test://watched-resource",
        name="watched-resource",
        description="A resource to subscribe to",
        text="Watched resource content.",
    ),
    ServedResourceTemplate(
        uri_template="test://template/{id}/data",
        name="template",
        description="Data by id",
        mime_type="application/json",
        read=_template_data,
        complete={"id": ["123", "124", "200"]},
    ),
)


def _embedded(resourceUri: str) -> list[PromptPart]:
    embedded = ServedResource(
        uri=resourceUri, name="embedded", text="Embedded resource content for testing."
    )
    return [embedded, "Please process the embedded resource above."]


prompts = (
    ServedPrompt(
        name="test_simple_prompt",
        description="A simple prompt",
        render=lambda: "This is a simple prompt for testing.",
    ),
    ServedPrompt(
        name="test_prompt_with_arguments",
        description="A prompt with arguments",
        arguments=(
            PromptArgument(
                name="arg1",
                description="First test argument",
                required=True,
                choices=("test-one", "test-two", "other"),
            ),
            PromptArgument(name="arg2", description="Second test argument", required=True),
        ),
        render=lambda arg1, arg2: f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'",
    ),
    ServedPrompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt that embeds a resource",
        arguments=(PromptArgument(name="resourceUri", required=True),),
        render=_embedded,
    ),
    ServedPrompt(
        name="test_prompt_with_image",
        description="A prompt with an image",
        render=lambda: [
            ImagePart(media_type="image/png", data=PNG),
            "Please analyze the image above.",
        ],
    ),
)

serve = McpServe(agent=agent, resources=resources, prompts=prompts)
