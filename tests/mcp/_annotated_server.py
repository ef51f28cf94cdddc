"""A server built with the official SDK's MCPServer (FastMCP), tools annotated each way.

Run as a script: ``python _annotated_server.py`` serves over stdio.
``peek`` is read-only and waits (bounded) for a second ``peek`` to start:
it answers ``together`` only when two calls overlap.
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("annotated")
_arrived = anyio.Event()
_count = 0


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def peek(tag: str) -> str:
    """Read something (read-only)."""
    global _count
    _count += 1
    if _count >= 2:
        _arrived.set()
    with anyio.move_on_after(10):
        await _arrived.wait()
    return f"{tag}: {'together' if _arrived.is_set() else 'alone'}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def wipe(target: str) -> str:
    """Delete a target for good."""
    return f"wiped {target}"


@server.tool()
def bare(text: str) -> str:
    """No annotations at all."""
    return f"bare {text}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def tidy(text: str) -> str:
    """An additive, harmless write."""
    return f"tidied {text}"


if __name__ == "__main__":
    server.run("stdio")
