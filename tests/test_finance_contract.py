"""The finance engine's action contract: details, input hashes, regenerate, refresh, truncation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import JsonValue

from mainspring import (
    Agent,
    ApprovalError,
    Approve,
    ClientResult,
    ConfigError,
    DecisionConflict,
    ErrorEvent,
    Guard,
    InputChanged,
    PendingAction,
    Reject,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
    ToolStart,
    TurnComplete,
    UnknownAttempt,
    client_tool,
    tool,
    usd,
)
from mainspring.decisions import canonical_input_hash
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.stores import InMemorySessionStore
from mainspring.tools import Tool, ToolOutput
from mainspring.tools.policy import Details
from tests.helpers import collect, pending_of, resume, send

pytestmark = pytest.mark.anyio


class Market:
    """A price that moves each time a quote is asked for."""

    def __init__(self) -> None:
        self.price = 2.0
        self.quotes = 0
        self.swapped: list[dict[str, object]] = []
        self.balance = 100.0

    def quote(self, args: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        self.quotes += 1
        self.price += 0.5
        amount = float(str(args["amount"]))
        return {**args, "quote_id": f"q{self.quotes}", "min_out": amount / self.price}


def swap_tools(market: Market) -> list[Tool]:
    @tool(read_only=True)
    def balance() -> str:
        """The balance."""
        return f"balance {market.balance:g}"

    @tool(
        permission="confirm",
        details=lambda args: {
            "quote": {"id": args.get("quote_id"), "min_out": args.get("min_out")},
            "route": ["USD", "ETH"],
            "projected": {"balance": market.balance - float(str(args["amount"]))},
            "quote_age_s": 0,
        },
        regenerate=market.quote,
        post_write_refresh=("balance",),
    )
    def swap(amount: float, quote_id: str = "", min_out: float = 0.0) -> str:
        """Swap USD for ETH at a quote.

        Args:
            amount: USD to swap.
            quote_id: The quote.
            min_out: Least ETH accepted.
        """
        market.swapped.append({"amount": amount, "quote_id": quote_id, "min_out": min_out})
        market.balance -= amount
        return f"swapped {amount:g} at {quote_id}"

    return [balance, swap]


def swap_model(amount: float = 10.0) -> ScriptedModel:
    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse | str:
        if messages[-1].role == "user":
            call = ScriptedCall("swap", {"amount": amount, "quote_id": "q0", "min_out": 4.0})
            return ScriptedResponse(tool_calls=[call])
        return "done: " + messages[-1].tool_results_parts[0].content

    return ScriptedModel(script)


async def paused_swap(**kw: object) -> tuple[Session, PendingAction, Market]:
    market = Market()
    session = Session(Agent(model=swap_model(), tools=swap_tools(market)), **kw)  # type: ignore[arg-type]  # keywords passed through from the caller
    return session, pending_of(await send(session, "swap 10")), market


async def test_pending_action_carries_details_hash_and_regenerate_fields() -> None:
    _, pending, _ = await paused_swap()
    assert pending.input_hash == canonical_input_hash(pending.input)
    assert pending.details == {
        "quote": {"id": "q0", "min_out": 4.0},
        "route": ["USD", "ETH"],
        "projected": {"balance": 90.0},
        "quote_age_s": 0,
    }
    assert pending.can_regenerate
    assert pending.regenerate_input == pending.input


async def test_regenerate_emits_a_fresh_pending_action_and_the_approval_binds_to_it() -> None:
    session, first, market = await paused_swap()
    events = await collect(session.regenerate(first.attempt_id))
    fresh = pending_of(events)
    assert [e.type for e in events][-2:] == ["pending_action", "turn_complete"]
    assert fresh.attempt_id == first.attempt_id
    assert fresh.input["quote_id"] == "q1" and fresh.input_hash != first.input_hash
    assert fresh.details["quote"] == {"id": "q1", "min_out": fresh.input["min_out"]}
    assert fresh.regenerate_input == first.input  # regenerations start from the model's input
    assert session.pending == fresh

    with pytest.raises(InputChanged) as stale:
        session.resume(first.attempt_id, Approve(input_hash=first.input_hash))
    assert stale.value.expected == fresh.input_hash and stale.value.given == first.input_hash
    assert market.swapped == [] and session.pending == fresh  # nothing ran, nothing changed

    await resume(session, fresh.attempt_id, Approve(input_hash=fresh.input_hash))
    assert market.swapped == [{"amount": 10.0, "quote_id": "q1", "min_out": fresh.input["min_out"]}]


async def test_regenerating_twice_starts_from_the_models_input_each_time() -> None:
    session, first, market = await paused_swap()
    await collect(session.regenerate(first.attempt_id))
    third = pending_of(await collect(session.regenerate(first.attempt_id)))
    assert third.input["quote_id"] == "q2" and market.quotes == 2
    assert third.regenerate_input == first.input


async def test_an_approval_without_a_hash_still_works_and_a_wrong_one_is_refused() -> None:
    session, pending, market = await paused_swap()
    with pytest.raises(InputChanged, match="changed"):
        session.resume(pending.attempt_id, Approve(input_hash="0" * 64))
    await resume(session, pending.attempt_id, Approve())
    assert len(market.swapped) == 1


async def test_a_hash_binds_the_input_before_edits() -> None:
    log: list[float] = []

    @tool(permission=usd(lambda a: float(str(a["amount_usd"]))), modifiable_fields=("amount_usd",))
    def pay(amount_usd: float) -> str:
        """Pay.

        Args:
            amount_usd: USD.
        """
        log.append(amount_usd)
        return "paid"

    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("pay", {"amount_usd": 500})]), "ok"]
    )
    session = Session(Agent(model=model, tools=[pay]))
    pending = pending_of(await send(session, "pay"))
    edit = Approve(edits={"amount_usd": 400}, input_hash=pending.input_hash)
    await resume(session, pending.attempt_id, edit)
    assert log == [400]


async def test_regenerate_refuses_misuse_clearly() -> None:
    session, pending, _ = await paused_swap()
    with pytest.raises(UnknownAttempt):
        session.regenerate("nope")
    await resume(session, pending.attempt_id, Reject())
    with pytest.raises(DecisionConflict):
        session.regenerate(pending.attempt_id)

    @tool(permission="confirm")
    def plain() -> str:
        """No regenerate."""
        return "ok"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("plain", {})]), "ok"])
    other = Session(Agent(model=model, tools=[plain]))
    fixed = pending_of(await send(other, "go"))
    assert not fixed.can_regenerate and fixed.regenerate_input is None
    with pytest.raises(ApprovalError, match="cannot regenerate"):
        other.regenerate(fixed.attempt_id)


async def test_a_failing_regenerate_hook_is_an_error_and_the_pending_action_stays() -> None:
    market = Market()
    tools = swap_tools(market)

    def broken(args: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        raise RuntimeError("quote service down")

    swap = tools[1]
    from dataclasses import replace

    tools[1] = replace(swap, policy=replace(swap.policy, regenerate=broken))
    session = Session(Agent(model=swap_model(), tools=tools))
    pending = pending_of(await send(session, "swap"))
    events = await collect(session.regenerate(pending.attempt_id))
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.code == "regenerate_failed"
    assert "quote service down" in last.message and last.attempt_id == pending.attempt_id
    assert session.pending == pending
    await resume(session, pending.attempt_id, Approve(input_hash=pending.input_hash))
    assert len(market.swapped) == 1


async def test_a_regenerated_input_a_guard_blocks_goes_back_to_the_model() -> None:
    market = Market()
    guard = Guard(
        name="no_q1",
        before=lambda t, a: ("block", "quote q1 is stale") if a.get("quote_id") == "q1" else None,
    )
    session = Session(Agent(model=swap_model(), tools=swap_tools(market), guards=[guard]))
    pending = pending_of(await send(session, "swap"))
    events = await collect(session.regenerate(pending.attempt_id))
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"
    assert session.pending is None and market.swapped == []
    assert "quote q1 is stale" in session.messages[-1].text


async def test_regenerate_is_durable() -> None:
    store = InMemorySessionStore()
    session, pending, market = await paused_swap(session_store=store)
    fresh = pending_of(await collect(session.regenerate(pending.attempt_id)))
    agent = Agent(model=swap_model(), tools=swap_tools(market))
    loaded = await Session.load(agent, store, session.session_id)
    assert loaded.pending == fresh
    with pytest.raises(InputChanged):
        loaded.resume(pending.attempt_id, Approve(input_hash=pending.input_hash))


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4))
def test_the_hash_is_order_independent_and_tracks_every_change(data: dict[str, int | str]) -> None:
    reordered: dict[str, JsonValue] = dict(reversed(list(data.items())))
    assert canonical_input_hash(dict(data)) == canonical_input_hash(reordered)
    changed: dict[str, JsonValue] = {**data, "extra": 1} if "extra" not in data else {}
    if changed != data:
        assert canonical_input_hash(changed) != canonical_input_hash(dict(data))


async def test_client_result_can_bind_to_the_hash_too() -> None:
    transfer = client_tool(
        "transfer",
        description="Sign a transfer in the browser.",
        input_schema={"type": "object", "properties": {"to": {"type": "string"}}},
    )
    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("transfer", {"to": "bob"})]), "ok"]
    )
    session = Session(Agent(model=model, tools=[transfer]))
    pending = pending_of(await send(session, "go"))
    with pytest.raises(InputChanged):
        session.resume(pending.attempt_id, ClientResult("sent", input_hash="f" * 64))
    await resume(session, pending.attempt_id, ClientResult("sent", input_hash=pending.input_hash))


# ------------------------------------------------------------- post-write refresh


async def test_post_write_refresh_reruns_reads_and_the_model_sees_them() -> None:
    session, pending, _ = await paused_swap()
    events = await resume(session, pending.attempt_id, Approve())
    starts = [e.name for e in events if isinstance(e, ToolStart)]
    assert starts == ["swap", "balance"]
    swap_result = next(e for e in events if isinstance(e, ToolResult) and e.name == "swap")
    assert "swapped 10" in swap_result.content
    assert "[refreshed balance]\nbalance 90" in swap_result.content
    assert "balance 90" in session.messages[-1].text  # the model answered from it


async def test_no_refresh_after_a_failed_write() -> None:
    @tool(read_only=True)
    def balance() -> str:
        """The balance."""
        raise AssertionError("not refreshed after a failure")

    @tool(post_write_refresh=["balance"])
    def withdraw() -> str:
        """Fails."""
        raise RuntimeError("insufficient funds")

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("withdraw", {})]), "ok"])
    session = Session(Agent(model=model, tools=[balance, withdraw]))
    events = await send(session, "go")
    assert [e.name for e in events if isinstance(e, ToolStart)] == ["withdraw"]


async def test_refresh_of_a_client_executed_write() -> None:
    @tool(read_only=True)
    def balance() -> str:
        """The balance."""
        return "balance 5"

    transfer = client_tool(
        "transfer",
        description="Signed by the client.",
        input_schema={"type": "object", "properties": {}},
        post_write_refresh=("balance",),
    )
    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("transfer", {})]), "ok"])
    session = Session(Agent(model=model, tools=[balance, transfer]))
    pending = pending_of(await send(session, "go"))
    await resume(session, pending.attempt_id, ClientResult("signed tx 0xabc"))
    content = session.messages[-2].tool_results_parts[0].content
    assert content == "signed tx 0xabc\n\n[refreshed balance]\nbalance 5"


def test_refresh_must_name_a_read_of_the_agent() -> None:
    @tool
    def write() -> str:
        """A write."""
        return ""

    @tool(post_write_refresh=("write",))
    def other() -> str:
        """Another write."""
        return ""

    model = ScriptedModel(["ok"])
    with pytest.raises(ConfigError, match="not a read-only tool"):
        Agent(model=model, tools=[write, other])
    with pytest.raises(ConfigError, match="not a read-only tool"):
        Agent(model=model, tools=[other], allowed_tools=["other"])
    with pytest.raises(ConfigError, match="for writes"):
        tool(read_only=True, post_write_refresh=("x",))


async def test_a_refresh_read_that_needs_arguments_says_so() -> None:
    @tool(read_only=True)
    def price(symbol: str) -> str:
        """A price.

        Args:
            symbol: Ticker.
        """
        return "1"

    @tool(post_write_refresh=("price",))
    def buy() -> str:
        """Buy."""
        return "bought"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("buy", {})]), "ok"])
    session = Session(Agent(model=model, tools=[price, buy]))
    await send(session, "go")
    content = session.messages[-2].tool_results_parts[0].content
    assert content.startswith("bought\n\n[refreshed price] cannot run without arguments")


# -------------------------------------------------------------- truncation


async def test_summarize_on_truncate_replaces_the_cut() -> None:
    seen: list[tuple[int, int]] = []

    async def summarize(content: str, limit: int) -> str:
        seen.append((len(content), limit))
        return f"summary of {len(content)} chars"

    @tool(read_only=True, max_result_chars=50, summarize_on_truncate=summarize)
    def dump() -> str:
        """Big."""
        return "x" * 500

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("dump", {})]), "ok"])
    session = Session(Agent(model=model, tools=[dump]))
    events = await send(session, "go")
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.content == "summary of 500 chars" and seen == [(500, 50)]


async def test_a_summary_too_long_is_cut_and_a_failing_one_falls_back() -> None:
    def long(content: str, limit: int) -> str:
        return "y" * 1000

    def failing(content: str, limit: int) -> str:
        raise RuntimeError("summarizer down")

    outs = []
    for summarize in (long, failing):

        @tool(read_only=True, max_result_chars=50, summarize_on_truncate=summarize)
        def dump() -> str:
            """Big."""
            return "x" * 500

        model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("dump", {})]), "ok"])
        session = Session(Agent(model=model, tools=[dump]))
        events = await send(session, "go")
        outs.append(next(e for e in events if isinstance(e, ToolResult)).content)
    assert outs[0].startswith("y" * 50) and "y" * 51 not in outs[0] and "[truncated" in outs[0]
    assert outs[1].startswith("x" * 50) and "500 characters" in outs[1]


async def test_a_short_result_is_not_summarized() -> None:
    @tool(read_only=True, summarize_on_truncate=lambda c, n: "never")
    def small() -> str:
        """Small."""
        return "tiny"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("small", {})]), "ok"])
    session = Session(Agent(model=model, tools=[small]))
    events = await send(session, "go")
    assert next(e for e in events if isinstance(e, ToolResult)).content == "tiny"


# ---------------------------------------------------------- on_auto_executed


async def test_on_auto_executed_receives_the_usd_value() -> None:
    seen: list[tuple[str, float | None]] = []
    old_style: list[str] = []

    @tool(permission=usd(lambda a: float(str(a["amount_usd"]))))
    def pay(amount_usd: float) -> str:
        """Pay.

        Args:
            amount_usd: USD.
        """
        return "paid"

    async def audit(
        t: Tool, args: Mapping[str, JsonValue], out: ToolOutput, usd: float | None
    ) -> None:
        seen.append((t.name, usd))

    def audit3(t: Tool, args: Mapping[str, JsonValue], out: ToolOutput) -> None:
        old_style.append(t.name)

    for hook in (audit, audit3):
        model = ScriptedModel(
            [ScriptedResponse(tool_calls=[ScriptedCall("pay", {"amount_usd": 7.5})]), "ok"]
        )
        session = Session(Agent(model=model, tools=[pay], on_auto_executed=hook))
        await send(session, "pay")
    assert seen == [("pay", 7.5)] and old_style == ["pay"]


async def test_a_regenerated_input_that_is_invalid_is_refused_and_nothing_changes() -> None:
    market = Market()
    tools = swap_tools(market)
    from dataclasses import replace

    def bad(args: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        return {**args, "amount": "lots"}

    tools[1] = replace(tools[1], policy=replace(tools[1].policy, regenerate=bad))
    session = Session(Agent(model=swap_model(), tools=tools))
    pending = pending_of(await send(session, "swap"))
    events = await collect(session.regenerate(pending.attempt_id))
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.code == "regenerate_failed"
    assert "amount" in last.message
    assert session.pending == pending and market.swapped == []


async def test_a_details_hook_that_fails_says_why_and_the_call_still_pauses() -> None:
    broken = cast("Details", lambda args: 1 / 0)  # hooks that break their contract
    not_a_mapping = cast("Details", lambda args: ["not", "a", "mapping"])

    @tool(permission="confirm", details=broken)
    def act() -> str:
        """Act."""
        return "acted"

    @tool(permission="confirm", details=not_a_mapping)
    def other() -> str:
        """Other."""
        return "done"

    for name, needle in (("act", "ZeroDivisionError"), ("other", "must return a mapping")):
        model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall(name, {})]), "ok"])
        session = Session(Agent(model=model, tools=[act, other]))
        pending = pending_of(await send(session, "go"))
        assert needle in str(pending.details["details_error"])


async def test_async_details_hooks_are_awaited() -> None:
    async def quote(args: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        return {"quote": {"price": 7}}

    @tool(permission="confirm", details=quote)
    def act() -> str:
        """Act."""
        return "acted"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("act", {})]), "ok"])
    session = Session(Agent(model=model, tools=[act]))
    assert pending_of(await send(session, "go")).details == {"quote": {"price": 7}}


def test_regenerate_is_for_writes() -> None:
    with pytest.raises(ConfigError, match="for writes"):
        tool(read_only=True, regenerate=lambda args: args)
