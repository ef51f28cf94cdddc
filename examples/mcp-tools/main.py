"""MCP both ways: a real MCP server's tools as an agent's tools, and an agent served over MCP.

Run it from the repository root (it needs the mcp extra and the reference time server:
pip install "mainspring[mcp]" mcp-server-time):

    python examples/mcp-tools/main.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio

from mainspring import (
    Agent,
    ConfigError,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
)
from mainspring.mcp import McpClientManager, McpServerConfig
from mainspring.models import Model, model_from_string

HERE = Path(__file__).resolve().parent

TIME = McpServerConfig(name="time", command=sys.executable, args=("-m", "mcp_server_time"))
"""The reference MCP time server, started as a child process over stdio."""

SHOP = McpServerConfig(
    name="shop",
    command=sys.executable,
    args=("-m", "mainspring", "mcp", "serve", "shop:agent"),  # shop.py beside this file
    cwd=str(HERE),
)
"""Our own agent's tools, served over MCP by `mainspring mcp serve` (stdio)."""


def scripted_model() -> ScriptedModel:
    """What a model would do here, offline: three tool calls in one step, then an answer."""
    calls = [
        ScriptedCall("mcp__time__get_current_time", {"timezone": "UTC"}),
        ScriptedCall(
            "mcp__time__convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        ),
        ScriptedCall("mcp__shop__stock", {"sku": "A1"}),
    ]
    return ScriptedModel([ScriptedResponse(tool_calls=calls), "Noon UTC is 21:00 in Tokyo."])


async def main(model: Model) -> None:
    """Start both servers, show their tools and policies, and let an agent use them."""
    async with McpClientManager([TIME, SHOP]) as manager:
        tools = manager.tools()
        for t in tools:  # a tool's tier follows its MCP annotations (read-only: no approval)
            if "mcp_tool" in t.meta:  # (the mcpr__* tools read the servers' resources)
                kind = "read" if t.policy.read_only else f"write, {t.policy.permission}"
                print(f"{t.name}: {kind} ({t.meta['permission_source']})")

        session = Session(Agent(model=model, tools=tools))
        async for _ in session.send("What time is it in Tokyo at noon UTC? Any A1 left?"):
            pass  # the three calls run in parallel; their results go back in the model's order
        for message in session.messages:
            for result in message.tool_results_parts:
                print(f"\n{result.name} ->\n{result.content}")
        print(f"\nthe model said: {session.messages[-1].text}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a model string such as openai:gpt-4.1 (default: offline)")
    args = parser.parse_args()
    try:
        model = model_from_string(args.model) if args.model else scripted_model()
    except (ConfigError, ImportError) as exc:  # no key, or the provider's extra is missing
        parser.error(str(exc))
    anyio.run(main, model)
