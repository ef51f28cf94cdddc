"""What ``build_mcp_server`` offers beside tools: resources, prompts, completion, logs.

Driven by the official SDK's ``Client`` over streamable HTTP against a real
server on loopback, as declared through :mod:`mainspring.mcp.offers` and
:meth:`ToolContext.log`.
"""

from __future__ import annotations

import base64
import warnings
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from mainspring import Agent, ScriptedModel, ToolContext, tool
from mainspring.errors import ConfigError
from mainspring.mcp.offers import (
    McpServe,
    PromptArgument,
    ServedPrompt,
    ServedResource,
    ServedResourceTemplate,
)
from mainspring.mcp.server import build_mcp_server, serve_http
from mainspring.messages import ImagePart
from mcp import Client

pytestmark = pytest.mark.anyio

rendered: list[dict[str, str]] = []


@tool(read_only=True)
async def chatty(ctx: ToolContext) -> str:
    """Logs at every level it can."""
    ctx.log("a detail", level="debug")
    ctx.log("started")
    ctx.log("low on quota", level="warning", data={"left": 3})
    return "done"


@tool(read_only=True)
def chatty_sync(ctx: ToolContext) -> str:
    """Logs from a worker thread."""
    ctx.log("from a thread", level="error")
    return "done"


@tool(read_only=True)
async def bad_level(ctx: ToolContext) -> str:
    """Logs at a level that does not exist."""
    ctx.log("?", level="loud")  # type: ignore[arg-type]  # the mistake under test
    return "unreachable"


@tool(read_only=True)
async def who(ctx: ToolContext) -> str:
    """Asks the user who they are."""
    schema: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}}}
    answer = await ctx.ask_user("Who are you?", schema)
    return f"{answer.action}: {answer.content}"


@tool(read_only=True)
async def summarize(text: str, ctx: ToolContext) -> str:
    """Asks the client's model."""
    return await ctx.sample(f"Summarize: {text}", system="Be brief.", max_tokens=50)


async def fetch_note(number: str) -> str:
    return f"note {number}"


def review(to: str, memo: str = "none") -> str:
    rendered.append({"to": to, "memo": memo})
    return f"Review the transfer to {to} ({memo})."


def complete_to(prefix: str) -> Sequence[str]:
    return [n for n in ("alice", "albert", "bob") if n.startswith(prefix)]


RESOURCES = (
    ServedResource(uri="docs://readme", name="readme", description="Read me", text="# Hi"),
    ServedResource(uri="docs://logo", name="logo", mime_type="image/png", blob=b"\x89PNG"),
    ServedResource(uri="docs://live", name="live", read=lambda: "fresh"),
    ServedResourceTemplate(
        uri_template="notes://{number}",
        name="note",
        read=fetch_note,
        complete={"number": ["100", "101", "200"]},
    ),
)
PROMPTS = (
    ServedPrompt(
        name="review",
        description="Review a transfer.",
        arguments=(
            PromptArgument(name="to", required=True, complete=complete_to),
            PromptArgument(name="memo", choices=("rent", "Refund", "gift")),
        ),
        render=review,
    ),
    ServedPrompt(
        name="look",
        render=lambda: [
            ImagePart(media_type="image/png", data="aGk="),
            ServedResource(uri="docs://inline", name="inline", text="embedded"),
            "What is this?",
        ],
    ),
    ServedPrompt(name="broken", render=lambda: [42]),  # type: ignore[list-item]  # the mistake under test
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def served(**kwargs: Any) -> AsyncIterator[Client]:
    rendered.clear()
    agent = Agent(
        model=ScriptedModel([]), name="t", tools=[chatty, chatty_sync, bad_level, who, summarize]
    )
    server = build_mcp_server(agent, resources=RESOURCES, prompts=PROMPTS)
    kwargs.setdefault("mode", "legacy")
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            lambda task_status: serve_http(server, port=0, task_status=task_status)
        )
        try:
            async with Client(f"http://127.0.0.1:{port}/mcp", **kwargs) as client:
                yield client
        finally:
            tg.cancel_scope.cancel()


async def test_resources_are_listed_and_read_as_text_or_blob() -> None:
    with anyio.fail_after(20):
        async with served() as client:
            listed = await client.list_resources()
            templates = await client.list_resource_templates()
            readme = (await client.read_resource("docs://readme")).contents[0]
            logo = (await client.read_resource("docs://logo")).contents[0]
            live = (await client.read_resource("docs://live")).contents[0]
            note = (await client.read_resource("notes://101")).contents[0]
            with pytest.raises(MCPError, match="no resource 'docs://nowhere'"):
                await client.read_resource("docs://nowhere")
            with pytest.raises(MCPError, match="no resource"):
                await client.read_resource("notes://1/2")  # a variable is one segment
    assert [r.uri for r in listed.resources] == ["docs://readme", "docs://logo", "docs://live"]
    assert listed.resources[0].description == "Read me"
    assert [t.uri_template for t in templates.resource_templates] == ["notes://{number}"]
    assert isinstance(readme, mt.TextResourceContents) and readme.text == "# Hi"
    assert isinstance(logo, mt.BlobResourceContents) and logo.mime_type == "image/png"
    assert base64.b64decode(logo.blob) == b"\x89PNG"
    assert isinstance(live, mt.TextResourceContents) and live.text == "fresh"
    assert isinstance(note, mt.TextResourceContents) and note.text == "note 101"


async def test_subscriptions_are_accepted_only_for_served_resources() -> None:
    with anyio.fail_after(20), warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)  # gone at 2026-07-28
        async with served() as client:
            await client.subscribe_resource("docs://readme")
            await client.subscribe_resource("notes://7")
            with pytest.raises(MCPError, match="no resource"):
                await client.subscribe_resource("docs://nowhere")
            await client.unsubscribe_resource("docs://readme")


async def test_prompts_take_arguments_and_refuse_wrong_ones_unrendered() -> None:
    with anyio.fail_after(20):
        async with served() as client:
            listed = {p.name: p for p in (await client.list_prompts()).prompts}
            got = await client.get_prompt("review", {"to": "alice", "memo": "rent"})
            with pytest.raises(MCPError, match=r"missing arguments \['to'\]"):
                await client.get_prompt("review", {"memo": "rent"})
            with pytest.raises(MCPError, match=r"unknown arguments \['amount'\]"):
                await client.get_prompt("review", {"to": "bob", "amount": "5"})
            with pytest.raises(MCPError, match="no prompt named 'nope'"):
                await client.get_prompt("nope")
    arguments = listed["review"].arguments or []
    assert [(a.name, a.required) for a in arguments] == [("to", True), ("memo", False)]
    text = got.messages[0].content
    assert isinstance(text, mt.TextContent) and text.text == "Review the transfer to alice (rent)."
    assert rendered == [{"to": "alice", "memo": "rent"}], "the refused ones never rendered"


async def test_a_prompt_may_carry_an_image_and_an_embedded_resource() -> None:
    with anyio.fail_after(20):
        async with served() as client:
            got = await client.get_prompt("look")
            with pytest.raises(MCPError, match="rendered a int"):
                await client.get_prompt("broken")
    image, embedded, question = (m.content for m in got.messages)
    assert isinstance(image, mt.ImageContent) and image.data == "aGk="
    assert isinstance(embedded, mt.EmbeddedResource)
    assert isinstance(embedded.resource, mt.TextResourceContents)
    assert embedded.resource.text == "embedded"
    assert isinstance(question, mt.TextContent) and question.text == "What is this?"


async def test_completion_offers_choices_completers_and_template_values() -> None:
    prompt = mt.PromptReference(name="review")
    with anyio.fail_after(20):
        async with served() as client:
            to = await client.complete(prompt, {"name": "to", "value": "al"})
            memo = await client.complete(prompt, {"name": "memo", "value": "re"})
            number = await client.complete(
                mt.ResourceTemplateReference(uri="notes://{number}"),
                {"name": "number", "value": "10"},
            )
            unknown = await client.complete(
                mt.PromptReference(name="nope"), {"name": "x", "value": ""}
            )
    assert to.completion.values == ["alice", "albert"]
    assert memo.completion.values == ["rent", "Refund"], "case-insensitive prefix"
    assert number.completion.values == ["100", "101"] and number.completion.total == 2
    assert unknown.completion.values == []


async def test_a_tools_log_reaches_the_client_at_or_above_its_level() -> None:
    seen: list[tuple[str, Any]] = []

    async def on_log(params: mt.LoggingMessageNotificationParams) -> None:
        seen.append((params.level, params.data))

    with anyio.fail_after(20), warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)  # setLevel: gone at 2026-07-28
        async with served(logging_callback=on_log) as client:
            await client.call_tool("chatty", {})  # default level: info
            before = list(seen)
            seen.clear()
            await client.set_logging_level("warning")
            await client.call_tool("chatty", {})
            await client.call_tool("chatty_sync", {})
            warned = list(seen)
            wrong = await client.call_tool("bad_level", {})
    assert before == [
        ("info", {"message": "started"}),
        ("warning", {"message": "low on quota", "data": {"left": 3}}),
    ]
    assert warned == [
        ("warning", {"message": "low on quota", "data": {"left": 3}}),
        ("error", {"message": "from a thread"}),
    ]
    assert wrong.is_error and "level must be one of debug" in str(wrong.content)


def test_declarations_that_cannot_be_served_are_refused() -> None:
    with pytest.raises(ConfigError, match="exactly one of text, blob or read"):
        ServedResource(uri="a://b", name="x", text="t", blob=b"b")
    with pytest.raises(ConfigError, match="exactly one of text, blob or read"):
        ServedResource(uri="a://b", name="x")
    with pytest.raises(ConfigError, match="has a scheme"):
        ServedResource(uri="readme", name="x", text="t")
    with pytest.raises(ConfigError, match="variables"):
        ServedResourceTemplate(uri_template="a://fixed", name="x", read=str)
    with pytest.raises(ConfigError, match="argument names must be unique"):
        ServedPrompt(name="p", render=str, arguments=(PromptArgument(name="a"),) * 2)
    agent = Agent(model=ScriptedModel([]), name="t")
    with pytest.raises(ConfigError, match="prompt names must be unique"):
        McpServe(agent=agent, prompts=(ServedPrompt(name="p", render=str),) * 2)
    with pytest.raises(ConfigError, match="resource URIs must be unique"):
        McpServe(agent=agent, resources=(RESOURCES[0], RESOURCES[0]))


async def test_a_tool_asks_the_clients_user_only_when_the_client_can_be_asked() -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.append(params.message)
        return mt.ElicitResult(action="accept", content={"name": "Ada"})

    with anyio.fail_after(30):
        async with served(elicitation_callback=elicit) as client:
            answered = await client.call_tool("who", {})
        async with served() as client:
            unasked = await client.call_tool("who", {})
        async with served(mode="2026-07-28", elicitation_callback=elicit) as client:
            modern = await client.call_tool("who", {})
    assert answered.content == [mt.TextContent(text="accept: {'name': 'Ada'}")]
    assert asked == ["Who are you?"], "asked once, and only the client that declared it"
    assert unasked.is_error and "did not declare elicitation support" in str(unasked.content)
    assert modern.is_error and "2026-07-28" in str(modern.content)


async def test_a_tool_samples_the_clients_model_only_when_offered() -> None:
    seen: list[mt.CreateMessageRequestParams] = []

    async def sample(context: Any, params: mt.CreateMessageRequestParams) -> mt.CreateMessageResult:
        seen.append(params)
        return mt.CreateMessageResult(
            role="assistant", content=mt.TextContent(text="short"), model="m"
        )

    with anyio.fail_after(30):
        async with served(sampling_callback=sample) as client:
            sampled = await client.call_tool("summarize", {"text": "long"})
        async with served() as client:
            refused = await client.call_tool("summarize", {"text": "long"})
    assert sampled.content == [mt.TextContent(text="short")]
    assert seen[0].system_prompt == "Be brief." and seen[0].max_tokens == 50
    assert refused.is_error and "did not declare sampling support" in str(refused.content)


async def test_outside_an_mcp_call_a_tool_cannot_ask_and_says_why() -> None:
    from mainspring import ScriptedCall, ScriptedResponse, Session

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("who", {})]), "ok"])
    session = Session(Agent(model=model, name="t", tools=[who]))
    with anyio.fail_after(30):
        async for _ in session.send("hi"):
            pass
    results = session.messages[-2].tool_results_parts
    assert results[0].is_error and "no client to ask" in results[0].content
