"""A server built with the official SDK's MCPServer (FastMCP) whose tools ask the client.

The asking is declared with the SDK's ``Resolve`` markers, so the SDK speaks
each era its own way: on a 2026-07-28 connection the questions come back as
``input_required`` results (and the answers on the retry), on a 2025-era one
as requests in the middle of the call. Run as a script it serves over stdio,
or ``python _asking_server.py http PORTFILE`` over streamable HTTP on a free
loopback port (written to PORTFILE).
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp_types import (
    CreateMessageResult,
    ListRootsResult,
    SamplingMessage,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel

server = MCPServer("asking")
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False)
BOOKED: list[str] = []
SENT: list[str] = []
"""Every call of a tool that asks, each round: what the server saw."""


class Who(BaseModel):
    name: str
    age: int = 0


def who_stays(room: str) -> Elicit[Who]:
    SENT.append(f"book {room}")
    return Elicit(f"Who stays in {room}?", Who)


@server.tool(annotations=WRITE)
def book(room: str, who: Annotated[ElicitationResult[Who], Resolve(who_stays)]) -> str:
    """Book a room for a guest the user names (a side effect: counted)."""
    if not isinstance(who, AcceptedElicitation):
        return f"not booked: {who.action}"
    BOOKED.append(f"{room}:{who.data.name}")
    return f"booked {room} for {who.data.name} ({who.data.age}); bookings: {BOOKED}"


def ask_who() -> Elicit[Who]:
    return Elicit("Who are you?", Who)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami(who: Annotated[ElicitationResult[Who], Resolve(ask_who)]) -> str:
    """A read that asks (reads run in parallel, so the session cannot pause on it)."""
    return f"you are {who.data.name}" if isinstance(who, AcceptedElicitation) else who.action


def first_guest() -> Elicit[Who]:
    return Elicit("Who is the first guest?", Who)


def second_guest() -> Elicit[Who]:
    return Elicit("Who is the second guest?", Who)


@server.tool(annotations=WRITE)
def pair(
    first: Annotated[Who, Resolve(first_guest)], second: Annotated[Who, Resolve(second_guest)]
) -> str:
    """Two questions in one round."""
    return f"paired {first.name} with {second.name}"


def summary_of(text: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
    return Sample([message], max_tokens=5000, system_prompt="Summarize.")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def summarize(text: str, sampled: Annotated[CreateMessageResult, Resolve(summary_of)]) -> str:
    """Ask the client's model to summarize."""
    content = sampled.content
    return f"{sampled.model}: {content.text if isinstance(content, TextContent) else '?'}"


def the_roots() -> ListRoots:
    return ListRoots()


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def roots(found: Annotated[ListRootsResult, Resolve(the_roots)]) -> str:
    """Ask for the client's roots (which mainspring does not offer)."""
    return f"{len(found.roots)} roots"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def sent() -> str:
    """What the asking tools saw, and the bookings."""
    return f"sent={SENT} booked={BOOKED}"


@server.tool(annotations=WRITE)
async def grow(ctx: Context) -> str:
    """Add a tool, and tell the listeners."""
    server.add_tool(sent, name="grown", description="Added later.")
    await ctx.notify_tools_changed()
    return "grown"


if __name__ == "__main__":
    server.run("stdio")
