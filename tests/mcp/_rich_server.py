"""A server built with the official SDK's MCPServer (FastMCP) for the client's richer paths.

Run as a script: ``python _rich_server.py`` serves over stdio. ``crunch``
reports progress in three steps (a total of 4, then a message-less step).
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ResourceLink, SamplingMessage, TextContent, ToolAnnotations
from pydantic import BaseModel

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452")

server = MCPServer("rich")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def crunch(steps: int, ctx: Context) -> str:
    """Work in steps, reporting progress."""
    for done in range(1, steps + 1):
        await ctx.report_progress(done, steps, f"step {done}")
    await ctx.report_progress(steps + 1)  # no total, no message
    return f"crunched {steps}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def wild(ctx: Context) -> str:
    """Report progress numbers a client must not trust."""
    await ctx.report_progress(9, 3, "x" * 2000)
    await ctx.report_progress(-1, 2)
    await ctx.report_progress(1, 0)
    return "wild"


@server.resource("notes://readme", name="readme", description="The notes' readme.")
def readme() -> str:
    """The readme."""
    return "Read me first."


@server.resource("notes://big", name="big", mime_type="text/plain")
def big() -> str:
    """A big text."""
    return "b" * 200_000


@server.resource("notes://logo", name="logo", mime_type="image/png")
def logo() -> bytes:
    """A picture."""
    return PNG


@server.resource("notes://blob", name="blob", mime_type="application/zip")
def blob() -> bytes:
    """A binary file."""
    return b"PK\x03\x04" + b"\x00" * 60


@server.resource("notes://day/{day}", name="day", description="The note of one day.")
def day(day: str) -> str:
    """One day's note."""
    return f"note of {day}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def find_note() -> list[ResourceLink]:
    """Point at a note."""
    return [ResourceLink(uri="notes://readme", name="readme")]


class Who(BaseModel):
    name: str
    age: int = 0


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def greet(ctx: Context) -> str:
    """Ask the user who they are, then greet them."""
    try:
        answer = await ctx.elicit("Who are you?", Who)
    except Exception as exc:
        return f"could not ask: {exc}"
    if answer.action == "accept":
        return f"hello {answer.data.name} ({answer.data.age})"
    return answer.action


BOOKED: list[str] = []


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
async def book(room: str, ctx: Context) -> str:
    """Book a room for a guest the user names (a side effect: counted)."""
    answer = await ctx.elicit(f"Who stays in {room}?", Who)
    if answer.action != "accept":
        return f"not booked: {answer.action}"
    BOOKED.append(f"{room}:{answer.data.name}")
    return f"booked {room} for {answer.data.name} ({answer.data.age}); bookings: {BOOKED}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def summarize(text: str, ctx: Context) -> str:
    """Ask the client's model to summarize."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
    try:
        result = await ctx.session.create_message(
            [message], max_tokens=5000, system_prompt="Summarize."
        )
    except Exception as exc:
        return f"sampling refused: {exc}"
    content = result.content
    return f"{result.model}: {content.text if isinstance(content, TextContent) else '?'}"


if __name__ == "__main__":
    server.run("stdio")
