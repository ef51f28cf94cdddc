"""Several agents in one Engine: callers, exported and private members, identity in every tool.

Run it from the repository root:

    python examples/engine-multi-agent/main.py
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from mainspring import (
    Agent,
    Approve,
    Message,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    ToolContext,
    ToolResult,
    UnknownAttempt,
    tool,
)
from mainspring.engine import AccessDenied, AgentRun, Caller, Engine, ManagementPolicy
from mainspring.models import ToolSpec

ORDERS = {"user:alice": ["A1 (a lamp)"], "user:bob": ["B7 (a chair)"]}
REFUNDS: list[str] = []


@tool(read_only=True)
def my_orders(ctx: ToolContext) -> str:
    """The calling customer's orders (the caller comes from the engine, not from the model)."""
    return f"{ctx.caller.key}: {', '.join(ORDERS.get(ctx.caller.key, [])) or 'no orders'}"


@tool(permission="confirm")
def refund(order: str, ctx: ToolContext) -> str:
    """Refund one of the caller's orders (needs approval)."""
    REFUNDS.append(f"{order} for {ctx.caller.key}")
    return f"refunded {order}"


def researcher() -> Agent:
    """A private agent: it looks orders up; only other agents of the engine call it."""

    def step(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse | str:
        if messages[-1].role == "tool":
            return messages[-1].tool_results_parts[0].content
        return ScriptedResponse(tool_calls=[ScriptedCall("my_orders", {})])

    return Agent(name="researcher", model=ScriptedModel(step), tools=[my_orders])


def front_desk() -> Agent:
    """The exported agent customers talk to: it asks the researcher, then may refund."""

    def step(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse | str:
        last = messages[-1]
        if last.role == "user":
            ask = ScriptedCall("researcher", {"task": "Which orders does this customer have?"})
            return ScriptedResponse(tool_calls=[ask])
        result = last.tool_results_parts[0].content
        if result.startswith("refunded"):
            return "Your refund is on its way."
        asked = next(m.text for m in reversed(messages) if m.role == "user")
        if "refund" in asked.lower():
            order = result.split(": ")[1].split()[0]  # the first order the researcher found
            return ScriptedResponse(tool_calls=[ScriptedCall("refund", {"order": order})])
        return f"You ordered: {result.split(': ')[1]}."

    return Agent(name="front_desk", model=ScriptedModel(step))


def build_engine() -> Engine:
    """One engine: two agents and a tool; only the front desk is exported."""
    policy = ManagementPolicy(controller=Caller("ops"), visibility="protected")
    engine = Engine("shop", policy=policy)
    engine.add_tool(refund)  # private: agents of the engine may use it
    engine.add_agent(researcher())  # private
    engine.add_agent(front_desk(), export=True, default=True, uses=["researcher", "refund"])
    return engine


async def main() -> None:
    """Alice gets a refund after approval; Bob sees only his orders and not Alice's decision."""
    engine = build_engine()
    alice, bob = Caller("alice"), Caller("bob")
    info = engine.information(bob)
    print(f"bob may see: {[a['name'] for a in info.agents]} {[t['name'] for t in info.tools]}")
    try:
        await engine.agent_run(bob, "hello", agent="researcher")
    except AccessDenied as exc:
        print(f"bob runs the private researcher: refused ({exc})")

    run = await engine.agent_run(alice, "Refund my lamp, please")
    assert run.pending is not None
    print(f"alice's run waits: {run.pending.name} {run.pending.input}")
    try:
        await engine.decide(bob, run.pending.attempt_id, Approve())
    except UnknownAttempt:
        print("bob cannot decide alice's refund (UnknownAttempt)")
    done = await engine.decide(alice, run.pending.attempt_id, Approve())
    assert isinstance(done, AgentRun)  # a decided agent run (a direct tool call gives a result)
    print(f"alice approves: {done.text}")

    bobs = await engine.agent_run(bob, "What did I order?")
    seen = [e.content for e in bobs.events if isinstance(e, ToolResult)]
    print(f"bob's run: the researcher saw {seen}; answer: {bobs.text}")
    print(f"refunds: {REFUNDS}")


if __name__ == "__main__":
    anyio.run(main)
