"""Engine B, served on loopback by its own process for the cross-engine tests.

Usage: python -m tests.engine._engine_server PORT TRUSTED_KEY_ID TRUSTED_PUBLIC_KEY

Mounts a protected engine at ``/b`` (the trusted key may call what it
exports) and a private one at ``/private`` (only its manager, nobody here).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, tool
from mainspring.engine import Caller, Engine, ManagementPolicy
from mainspring.engine.remote import engine_routes
from mainspring.engine.signing import public_key_from_text
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.tools.context import ToolContext

orders: list[str] = []


@tool(read_only=True)
def lookup(sku: str, ctx: ToolContext) -> str:
    """Look a product up."""
    return f"{sku}: 3 in stock (asked by {ctx.caller.key})"


@tool(permission="confirm", modifiable_fields=("qty",))
def order(sku: str, qty: int) -> str:
    """Order stock (needs approval)."""
    orders.append(f"{sku}x{qty}")
    return f"ordered {qty} of {sku}; orders so far: {orders}"


@tool(read_only=True)
def secret() -> str:
    """Not exported."""
    return "the margins"


def clerk_model() -> ScriptedModel:
    def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        last = messages[-1]
        if last.role == "tool":
            return ScriptedResponse(text=f"clerk: {last.tool_results_parts[0].content}")
        return ScriptedResponse(tool_calls=[ScriptedCall("order", {"sku": "A1", "qty": 4})])

    return ScriptedModel(respond, name="clerk")


def main() -> None:
    port, key_id, key_text = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    keys = {key_id: public_key_from_text(key_text)}
    shop = (
        Engine("b", policy=ManagementPolicy(visibility="protected"))
        .add_tool(lookup, export=True)
        .add_tool(order, export=True)
        .add_tool(secret)
        .add_agent(
            Agent(model=clerk_model(), name="clerk", tools=[order]),
            export=True,
            description="Orders stock.",
        )
    )
    vault = Engine("vault", policy=ManagementPolicy(controller=Caller("root"))).add_tool(
        lookup, export=True
    )
    app = Starlette(
        routes=[
            Mount("/b", routes=engine_routes(shop, keys)),
            Mount("/private", routes=engine_routes(vault, keys)),
        ]
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
