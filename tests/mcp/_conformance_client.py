"""The MCP client the conformance suite's client scenarios run: mainspring's own.

The suite starts it as ``python _conformance_client.py URL`` with the scenario's
name in ``$MCP_CONFORMANCE_SCENARIO``; it connects through the public
:class:`McpClientManager` as a host would, does what the scenario asks (list,
call a tool, accept an elicitation with the form's defaults) and exits.
"""

from __future__ import annotations

import os
import sys

import anyio

from mainspring.mcp import ElicitAnswer, McpClientManager, McpElicitation, McpServerConfig

CALLS = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
    "sse-retry": ("test_reconnection", {}),
}
"""The tool each scenario's server offers, with its arguments (none for ``initialize``)."""


async def accept_with_defaults(asked: McpElicitation) -> ElicitAnswer:
    """The user accepts the form as offered: every field keeps its default."""
    return ElicitAnswer(action="accept", content={})


async def main(url: str, scenario: str) -> int:
    config = McpServerConfig(name="suite", transport="http", url=url, protocol="2025")
    async with McpClientManager([config], on_elicit=accept_with_defaults) as manager:
        listed = sorted(t.name for t in manager.tools())
        sys.stdout.write(f"tools: {listed}\n")
        call = CALLS.get(scenario)
        if call is not None:
            out = await manager.call_tool("suite", *call)
            sys.stdout.write(f"{call[0]}: {'error: ' if out.is_error else ''}{out.content}\n")
            return 1 if out.is_error else 0
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "")))
