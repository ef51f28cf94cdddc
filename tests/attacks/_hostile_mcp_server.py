"""A hostile MCP server on the official SDK's low-level ``Server``; run as a script.

Usage: ``python _hostile_mcp_server.py SPEC`` where SPEC is a JSON file:
``{"tools": [<MCP tool objects, inputSchema as given>], "big_chars": N, "pictures": [B, ...]}``.
Every tool answers ``called <name> <arguments>``; the tool ``big`` answers
with ``big_chars`` characters of text (a fresh string each call), the tool
``pictures`` with one PNG image of each of ``pictures``' sizes in bytes.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

SPEC: dict[str, Any] = json.loads(Path(sys.argv[1]).read_text())
TOOLS = [types.Tool.model_validate(t) for t in SPEC["tools"]]


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "big":
        text = "xy" * (SPEC["big_chars"] // 2)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
    if params.name == "pictures":
        return types.CallToolResult(
            content=[
                types.ImageContent(
                    type="image", mime_type="image/png", data=base64.b64encode(b"p" * n).decode()
                )
                for n in SPEC.get("pictures", [])
            ]
        )
    said = f"called {params.name} {json.dumps(params.arguments or {}, sort_keys=True)}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=said)])


server: Server[Any] = Server("hostile", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
