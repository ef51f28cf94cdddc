"""Input and output guardrails: verdicts, tripwires, a write that never runs, their own models."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import pytest

from mainspring import (
    Agent,
    ErrorEvent,
    GuardrailContext,
    GuardrailResult,
    GuardrailTripwire,
    GuardrailVerdict,
    Hooks,
    ModelPrice,
    RunFailed,
    RunResult,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
    ToolStart,
    TurnComplete,
    Usage,
    UsageEvent,
    tool,
)
from mainspring.errors import ConfigError
from mainspring.guardrails import Guardrail
from mainspring.models import ModelEvent, ModelRequest, ModelStop, ModelUsage, ToolCallEnd
from mainspring.stores import SQLiteSessionStore
from mainspring.tools import Tool
from tests.helpers import send

pytestmark = pytest.mark.anyio


def passing(ctx: GuardrailContext, text: str) -> GuardrailResult:
    return GuardrailResult(reason="fine")


def no_secrets(ctx: GuardrailContext, text: str) -> GuardrailResult:
    return GuardrailResult(tripwire="secret" in text, reason="mentions a secret", info={"n": 1})


def pay_tool(ledger: list[float]) -> Tool:
    @tool
    async def pay(amount: float) -> str:
        """Pay an amount (an auto-tier write)."""
        ledger.append(amount)
        return f"paid {amount}"

    return pay


def paying_model() -> ScriptedModel:
    return ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("pay", {"amount": 5.0})]), "paid it"]
    )


def verdicts(events: Sequence[object]) -> list[GuardrailVerdict]:
    return [e for e in events if isinstance(e, GuardrailVerdict)]


# --- passing ---------------------------------------------------------------------------


async def test_passing_guardrails_let_the_turn_run_and_are_on_record() -> None:
    ledger: list[float] = []
    audited: list[GuardrailVerdict] = []
    agent = Agent(
        model=paying_model(),
        tools=[pay_tool(ledger)],
        input_guardrails=[passing, no_secrets],
        output_guardrails=[no_secrets],
        hooks=Hooks(guardrail_checked=audited.append),
    )
    session = Session(agent)
    events = await send(session, "pay five")
    assert ledger == [5.0]
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"
    seen = [(v.stage, v.name, v.tripwire) for v in verdicts(events)]
    assert sorted(seen) == [
        ("input", "no_secrets", False),
        ("input", "passing", False),
        ("output", "no_secrets", False),
    ]
    assert audited == verdicts(events)  # the audit hook saw each verdict the stream shows
    # The input verdicts come before any tool starts.
    first_start = next(i for i, e in enumerate(events) if isinstance(e, ToolStart))
    assert all(events.index(v) < first_start for v in verdicts(events) if v.stage == "input")


async def test_session_run_returns_the_result_when_every_guardrail_passes() -> None:
    agent = Agent(model=ScriptedModel(["hello"]), input_guardrails=[passing])
    result = await Session(agent).run("hi")
    assert result.text == "hello" and result.stop_reason == "end_turn"


# --- input tripwires -------------------------------------------------------------------


async def test_an_input_trip_ends_the_turn_and_no_tool_runs() -> None:
    ledger: list[float] = []
    agent = Agent(model=paying_model(), tools=[pay_tool(ledger)], input_guardrails=[no_secrets])
    session = Session(agent)
    events = await send(session, "pay the secret")
    assert ledger == []
    assert not any(isinstance(e, ToolStart) for e in events)
    (verdict,) = verdicts(events)
    assert verdict.tripwire and verdict.reason == "mentions a secret" and verdict.info == {"n": 1}
    assert isinstance(events[-1], TurnComplete)
    assert events[-1].stop_reason == "guardrail_tripped"
    assert session.state.writes == {}
    # The transcript is valid: the next turn runs (this one passes). A synchronous
    # guardrail runs as the first model call starts: its trip comes before the call.
    model = ScriptedModel(["ok"])
    session2 = Session(Agent(model=model, input_guardrails=[no_secrets]))
    with pytest.raises(GuardrailTripwire) as caught:
        await session2.run("a secret")
    result = caught.value.result
    assert isinstance(result, RunResult) and caught.value.verdict == verdicts(result.events)[0]
    assert (await session2.run("nothing to hide")).text == "ok"
    assert len(model.requests) == 1


class WriteThenWait:
    """A model whose first step streams one write call, then says it is done streaming."""

    def __init__(self, *, hang: bool = False) -> None:
        self.streamed = anyio.Event()
        self.closed = False
        self.hang = hang

    @property
    def name(self) -> str:
        return "write-then-wait"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        try:
            yield ToolCallEnd(tool_use_id="p1", name="pay", index=0, arguments='{"amount": 9}')
            yield ModelUsage(usage=Usage(input_tokens=3, output_tokens=2, requests=1))
            self.streamed.set()
            if self.hang:
                await anyio.sleep_forever()  # the stream stays open until it is cancelled
            yield ModelStop(stop_reason="tool_use", model=self.name)
        finally:
            self.closed = True


@pytest.mark.parametrize("hang", [False, True], ids=["stream-ended", "stream-open"])
async def test_a_trip_while_a_write_call_streamed_means_the_write_never_runs(
    tmp_path: Path, hang: bool
) -> None:
    ledger: list[float] = []
    model = WriteThenWait(hang=hang)

    async def slow(ctx: GuardrailContext, text: str) -> GuardrailResult:
        await model.streamed.wait()  # the write call has closed in the model's stream
        return GuardrailResult(tripwire=True, reason="not today")

    store = await SQLiteSessionStore.open(tmp_path / "s.db")
    agent = Agent(model=model, tools=[pay_tool(ledger)], input_guardrails=[slow])
    session = Session(agent, session_store=store)
    events = await send(session, "pay nine")
    assert ledger == []
    assert model.closed  # the stream was closed (cancelled, when it was still open)
    assert not any(isinstance(e, ToolStart) for e in events)
    assert isinstance(events[-1], TurnComplete)
    assert events[-1].stop_reason == "guardrail_tripped"
    (verdict,) = verdicts(events)
    assert verdict.tripwire and verdict.stage == "input"
    stored = await store.load(session.session_id)
    assert stored is not None and stored.writes == {}  # the ledger has no write, not even started
    if not hang:  # the answer was committed: its call got a result saying it did not run
        results = [e for e in events if isinstance(e, ToolResult)]
        assert [r.is_error for r in results] == [True]
        assert "did not run" in results[0].content
    await store.aclose()


async def test_a_read_started_mid_stream_waits_for_the_verdict_and_never_runs_on_a_trip() -> None:
    ran: list[str] = []
    release = anyio.Event()

    @tool(read_only=True)
    async def balance() -> str:
        """Read the balance."""
        ran.append("balance")
        return "42"

    async def slow(ctx: GuardrailContext, text: str) -> GuardrailResult:
        await release.wait()
        return GuardrailResult(tripwire=True, reason="stop")

    model = ScriptedModel([ScriptedResponse(text="x" * 64, tool_calls=[ScriptedCall("balance")])])
    session = Session(Agent(model=model, tools=[balance], input_guardrails=[slow]))
    events: list[object] = []
    async with anyio.create_task_group() as tg:

        async def consume() -> None:
            async for event in session.send("balance?"):
                events.append(event)
                if isinstance(event, UsageEvent):  # the model's step is over; the read is held
                    assert ran == []
                    release.set()

        tg.start_soon(consume)
    assert ran == []
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "guardrail_tripped"


async def test_the_first_trip_wins_and_the_other_guardrails_are_cancelled() -> None:
    started: list[str] = []
    cancelled: list[str] = []
    both = anyio.Event()

    async def forever(ctx: GuardrailContext, text: str) -> GuardrailResult:
        started.append(ctx.name)
        if len(started) == 2:
            both.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.append(ctx.name)
        return GuardrailResult()

    async def trips_later(ctx: GuardrailContext, text: str) -> GuardrailResult:
        await both.wait()
        return GuardrailResult(tripwire=True, reason="late")

    agent = Agent(
        model=ScriptedModel(["hello"]),
        input_guardrails=[Guardrail(forever, name="slow_a"), trips_later, Guardrail(forever)],
    )
    events = await send(Session(agent), "hi")
    assert sorted(cancelled) == sorted(started) == ["forever", "slow_a"]
    assert [(v.name, v.tripwire) for v in verdicts(events)] == [("trips_later", True)]
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "guardrail_tripped"


# --- output tripwires -----------------------------------------------------------------


async def test_an_output_trip_ends_the_turn_instead_of_delivering_the_answer() -> None:
    agent = Agent(model=ScriptedModel(["the secret is 42"]), output_guardrails=[no_secrets])
    session = Session(agent)
    with pytest.raises(GuardrailTripwire) as caught:
        await session.run("tell me")
    verdict = caught.value.verdict
    assert isinstance(verdict, GuardrailVerdict)
    assert verdict.stage == "output" and verdict.tripwire
    # The answer stays in the append-only transcript; the turn is over.
    assert session.messages[-1].text == "the secret is 42"
    assert session.state.turn is None


async def test_output_guardrails_read_the_final_answer_only() -> None:
    seen: list[str] = []

    def record(ctx: GuardrailContext, text: str) -> GuardrailResult:
        seen.append(text)
        return GuardrailResult()

    agent = Agent(
        model=paying_model(), tools=[pay_tool([])], output_guardrails=[record, no_secrets]
    )
    await send(Session(agent), "pay")
    assert seen == ["paid it"]


# --- failures: fail closed -------------------------------------------------------------


async def test_a_guardrail_that_raises_fails_closed_with_a_clear_error() -> None:
    ledger: list[float] = []

    async def broken(ctx: GuardrailContext, text: str) -> GuardrailResult:
        raise ValueError("classifier unreachable")

    agent = Agent(model=paying_model(), tools=[pay_tool(ledger)], input_guardrails=[broken])
    session = Session(agent)
    events = await send(session, "pay")
    assert ledger == []
    (verdict,) = verdicts(events)
    assert verdict.tripwire and "classifier unreachable" in verdict.error
    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.code == "guardrail_failed"
    assert "'broken'" in error.message and "ValueError: classifier unreachable" in error.message
    with pytest.raises(RunFailed) as caught:
        await session.run("pay again")
    assert caught.value.code == "guardrail_failed"


async def test_a_guardrail_returning_something_else_fails_closed() -> None:
    def sloppy(ctx: GuardrailContext, text: str) -> GuardrailResult:
        return True  # type: ignore[return-value]  # the mistake under test

    session = Session(Agent(model=ScriptedModel(["x"]), output_guardrails=[sloppy]))
    events = await send(session, "hi")
    assert isinstance(events[-1], ErrorEvent) and events[-1].code == "guardrail_failed"
    assert "returned bool, not a GuardrailResult" in events[-1].message


async def test_a_failing_audit_hook_fails_closed() -> None:
    def audit(verdict: GuardrailVerdict) -> None:
        raise RuntimeError("audit log is down")

    ledger: list[float] = []
    agent = Agent(
        model=paying_model(),
        tools=[pay_tool(ledger)],
        input_guardrails=[passing],
        hooks=Hooks(guardrail_checked=audit),
    )
    events = await send(Session(agent), "pay")
    assert ledger == []
    assert isinstance(events[-1], ErrorEvent) and events[-1].code == "guardrail_failed"
    assert "audit log is down" in events[-1].message


def test_bad_guardrails_are_refused_at_construction() -> None:
    with pytest.raises(ConfigError, match="unique"):
        Agent(model=ScriptedModel([]), input_guardrails=[passing, Guardrail(no_secrets, "passing")])
    with pytest.raises(ConfigError, match="callable"):
        Agent(model=ScriptedModel([]), output_guardrails=["not a function"])  # type: ignore[list-item]  # the bad input under test


# --- a guardrail's own model -----------------------------------------------------------


async def test_a_guardrail_model_spend_counts_into_the_turn() -> None:
    judge = ScriptedModel(
        [
            ScriptedResponse(
                text="SAFE", usage=Usage(input_tokens=1000, output_tokens=10, requests=1)
            )
        ],
        name="judge-mini",
    )

    class Classifier:
        name = "classifier"

        async def __call__(self, ctx: GuardrailContext, text: str) -> GuardrailResult:
            label = await ctx.complete(judge, f"Is this safe? {text}", system="Answer SAFE/UNSAFE")
            return GuardrailResult(tripwire=label != "SAFE", reason=label)

    main = ScriptedModel(
        [ScriptedResponse(text="hi", usage=Usage(input_tokens=10, output_tokens=1, requests=1))],
        name="main",
    )
    prices = {
        "judge-mini": ModelPrice(input=1.0, output=2.0),
        "main": ModelPrice(input=3.0, output=15.0),
    }
    agent = Agent(model=main, input_guardrails=[Classifier()], prices=prices)
    session = Session(agent)
    events = await send(session, "hello")
    (verdict,) = verdicts(events)
    assert verdict.name == "classifier" and verdict.reason == "SAFE" and not verdict.tripwire
    spent = [e for e in events if isinstance(e, UsageEvent) and e.model.startswith("guardrail:")]
    assert [e.model for e in spent] == ["guardrail:classifier/judge-mini"]
    judge_cost = (1000 * 1.0 + 10 * 2.0) / 1e6
    main_cost = (10 * 3.0 + 1 * 15.0) / 1e6
    assert spent[0].cost_usd == pytest.approx(judge_cost)
    done = events[-1]
    assert isinstance(done, TurnComplete)
    assert done.usage.input_tokens == 1010 and done.usage.requests == 2
    assert done.cost_usd == pytest.approx(judge_cost + main_cost)
    assert session.state.cost_usd == pytest.approx(judge_cost + main_cost)
    assert judge.requests[0].system_text == "Answer SAFE/UNSAFE"


async def test_a_guardrail_sees_its_caller_and_session() -> None:
    seen: list[tuple[str, str, str, int]] = []

    def look(ctx: GuardrailContext, text: str) -> GuardrailResult:
        seen.append((ctx.caller.id, ctx.session_id, ctx.stage, ctx.turn_index))
        return GuardrailResult()

    session = Session(Agent(model=ScriptedModel(["a"]), input_guardrails=[look]))
    await send(session, "hi")
    assert seen == [("local", session.session_id, "input", 1)]


async def test_a_synchronous_trip_leaves_later_guardrails_uncalled_and_the_model_unasked() -> None:
    called: list[str] = []

    async def later(ctx: GuardrailContext, text: str) -> GuardrailResult:
        called.append("later")
        return GuardrailResult()

    model = ScriptedModel(["never"])
    agent = Agent(model=model, input_guardrails=[no_secrets, later])
    events = await send(Session(agent), "the secret")
    assert called == [] and model.requests == []
    assert [(v.name, v.tripwire) for v in verdicts(events)] == [("no_secrets", True)]
