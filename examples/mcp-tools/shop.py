"""The agent that main.py serves over MCP: `mainspring mcp serve shop:agent`."""

from __future__ import annotations

from mainspring import Agent, ScriptedModel, tool

STOCK = {"A1": 3, "B2": 0}


@tool(read_only=True)
def stock(sku: str) -> str:
    """How many of an item are in stock."""
    return f"{sku}: {STOCK.get(sku, 0)} in stock"


@tool(permission="confirm")
def order(sku: str, qty: int) -> str:
    """Order more of an item (needs approval, so MCP clients do not see it by default)."""
    return f"ordered {qty} of {sku}"


agent = Agent(
    model=ScriptedModel(["(served over MCP: only its tools are used)"]), tools=[stock, order]
)
