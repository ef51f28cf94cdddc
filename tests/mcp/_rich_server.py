"""A server built with the official SDK's MCPServer (FastMCP) for the client's richer paths.

Run as a script: ``python _rich_server.py`` serves over stdio. ``crunch``
reports progress in three steps (a total of 4, then a message-less step).
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

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


if __name__ == "__main__":
    server.run("stdio")
