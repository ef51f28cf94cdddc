"""The agent under test: a shop's support agent that looks orders up and refunds them."""

from __future__ import annotations

from dataclasses import dataclass, field

from mainspring import Agent, tool
from mainspring.models import Model


@dataclass
class Shop:
    """The shop's data; tests make a fresh one so nothing leaks between them."""

    orders: dict[str, float] = field(default_factory=lambda: {"A1": 40.0, "B2": 15.5})
    refunds: list[tuple[str, float]] = field(default_factory=list)


def build_agent(model: Model | str, shop: Shop) -> Agent:
    """The support agent, on any model: a scripted one in tests, a real one in production."""

    @tool(read_only=True)
    def lookup_order(order_id: str) -> str:
        """The order's total in USD."""
        if order_id not in shop.orders:
            raise ValueError(f"no order {order_id}")
        return f"order {order_id}: ${shop.orders[order_id]:.2f}"

    @tool(permission="confirm", modifiable_fields=("amount_usd",))
    def refund(order_id: str, amount_usd: float) -> str:
        """Refund part or all of an order (a person approves, and may lower the amount)."""
        shop.refunds.append((order_id, amount_usd))
        return f"refunded ${amount_usd:.2f} on {order_id}"

    return Agent(
        model=model,
        instructions="You are the shop's support agent. Look an order up before refunding it.",
        tools=[lookup_order, refund],
    )
