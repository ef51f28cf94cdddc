"""The loop: streaming, parallel reads, serial writes, result order, bad input."""

from __future__ import annotations

from collections.abc import Mapping

import anyio
import anyio.lowlevel
import pytest

from mainspring import (
    Agent,
    Approve,
    ErrorEvent,
    Hooks,
    Limits,
    Message,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    TextDelta,
    Tool,
    ToolContext,
    ToolOutput,
    ToolResult,
    ToolStart,
    TurnComplete,
    tool,
)
from mainspring.errors import ModelOutputError
from mainspring.events import Canvas, ToolCallDelta, ToolProgress, UsageEvent
from mainspring.messages import ToolResultPart
from tests.helpers import pending_of, resume, send, types

pytestmark = pytest.mark.anyio


@tool(read_only=True)
async def echo(text: str) -> str:
    """Echo text back."""
    return text


def results_of(session: Session) -> list[ToolResultPart]:
    return [p for m in session.messages for p in m.tool_results_parts]


async def test_text_streams_in_deltas_and_ends_with_turn_complete() -> None:
    model = ScriptedModel(["Hello there, how can I help you today?"], chunk_size=5)
    session = Session(Agent(model=model, instructions="Be brief."))
    events = await send(session, "hi")
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1
    assert "".join(deltas) == "Hello there, how can I help you today?"
    assert types(events)[-2:] == ["usage", "turn_complete"]
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.stop_reason == "end_turn"
    assert done.usage.requests == 1
    assert [m.role for m in session.messages] == ["user", "assistant"]
    assert session.messages[1].text == "Hello there, how can I help you today?"
    request = model.requests[0]
    assert request.system_text == "Be brief."
    assert [m.text for m in request.messages] == ["hi"]


async def test_one_tool_round_feeds_result_back_to_model() -> None:
    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("echo", {"text": "ping"})]), "got it"]
    )
    session = Session(Agent(model=model, tools=[echo]))
    events = await send(session, "go")
    assert types(events).count("tool_call_delta") >= 1
    start = next(e for e in events if isinstance(e, ToolStart))
    assert start.input == {"text": "ping"}
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.content == "ping" and not result.is_error
    second = model.requests[1]
    assert [m.role for m in second.messages] == ["user", "assistant", "tool"]
    assert second.messages[2].tool_results_parts[0].content == "ping"
    assert [spec.name for spec in second.tools] == ["echo"]


async def test_reads_run_in_parallel() -> None:
    started = 0
    both = anyio.Event()

    @tool(read_only=True)
    async def wait_for_peer(n: int) -> int:
        """Wait until the other read has started too."""
        nonlocal started
        started += 1
        if started == 2:
            both.set()
        with anyio.fail_after(60):  # sequential execution would deadlock here
            await both.wait()
        return n

    calls = [ScriptedCall("wait_for_peer", {"n": 1}), ScriptedCall("wait_for_peer", {"n": 2})]
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
    session = Session(Agent(model=model, tools=[wait_for_peer]))
    events = await send(session, "go")
    assert not any(isinstance(e, ToolResult) and e.is_error for e in events)
    assert [p.content for p in results_of(session)] == ["1", "2"]


async def test_reads_start_mid_stream_as_each_call_closes() -> None:
    calls = [ScriptedCall("echo", {"text": "a"}), ScriptedCall("echo", {"text": "b" * 40})]
    # A stream that takes a little while per delta, like a network stream.
    response = ScriptedResponse(tool_calls=calls, delay=0.005)
    model = ScriptedModel([response, "ok"], chunk_size=4)
    session = Session(Agent(model=model, tools=[echo]))
    events = await send(session, "go")
    first_start = next(
        i for i, e in enumerate(events) if isinstance(e, ToolStart) and e.input == {"text": "a"}
    )
    last_delta_of_second = max(
        i for i, e in enumerate(events) if isinstance(e, ToolCallDelta) and e.index == 1
    )
    assert first_start < last_delta_of_second


async def test_writes_run_serially_in_model_order_after_the_reads() -> None:
    log: list[str] = []

    @tool(read_only=True)
    async def slow_read(name: str) -> str:
        """A read that takes a moment."""
        await anyio.sleep(0.01)
        log.append(f"read:{name}")
        return name

    @tool
    async def write(name: str) -> str:
        """A write."""
        log.append(f"start:{name}")
        await anyio.lowlevel.checkpoint()
        log.append(f"end:{name}")
        return name

    calls = [
        ScriptedCall("write", {"name": "w1"}),
        ScriptedCall("slow_read", {"name": "r1"}),
        ScriptedCall("write", {"name": "w2"}),
        ScriptedCall("slow_read", {"name": "r2"}),
    ]
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
    session = Session(Agent(model=model, tools=[slow_read, write]))
    await send(session, "go")
    assert sorted(log[:2]) == ["read:r1", "read:r2"]
    assert log[2:] == ["start:w1", "end:w1", "start:w2", "end:w2"]
    # Results go back in the model's order, whatever order they finished in.
    assert [p.content for p in results_of(session)] == ["w1", "r1", "w2", "r2"]


async def test_results_keep_model_order_when_reads_finish_in_reverse() -> None:
    # Each read waits for the one after it to finish: they can only all finish
    # if they run at once, and they finish last-to-first whatever the load.
    finished_flags = [anyio.Event() for _ in range(3)]

    @tool(read_only=True)
    async def wait_for_next(rank: int) -> str:
        """Wait until the read ranked one lower finished, then report."""
        if rank > 0:
            await finished_flags[rank - 1].wait()
        finished_flags[rank].set()
        return f"rank {rank}"

    calls = [ScriptedCall("wait_for_next", {"rank": r}) for r in (2, 1, 0)]
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
    session = Session(Agent(model=model, tools=[wait_for_next]))
    with anyio.fail_after(10):  # (reads run one at a time: they would wait forever)
        events = await send(session, "go")
    finished = [e.content for e in events if isinstance(e, ToolResult)]
    assert finished == ["rank 0", "rank 1", "rank 2"]
    assert [p.content for p in results_of(session)] == ["rank 2", "rank 1", "rank 0"]


async def test_sync_tools_run_and_report_progress_and_canvas() -> None:
    @tool(read_only=True)
    def crunch(n: int, ctx: ToolContext) -> int:
        """Add up to n, reporting progress."""
        ctx.progress("halfway", 50)
        ctx.canvas("chart", {"points": [1, 2, 3]}, title="sum")
        ctx.cache["seen"] = n
        return sum(range(n + 1))

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("crunch", {"n": 4})]), "ok"])
    session = Session(Agent(model=model, tools=[crunch]))
    events = await send(session, "go")
    progress = next(e for e in events if isinstance(e, ToolProgress))
    assert (progress.message, progress.pct, progress.name) == ("halfway", 50, "crunch")
    canvas = next(e for e in events if isinstance(e, Canvas))
    assert canvas.data == {"points": [1, 2, 3]} and canvas.tool_use_id == progress.tool_use_id
    assert results_of(session)[0].content == "10"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"text": 5}, "text"),
        ({}, "text"),
        ({"text": "x", "extra": 1}, "extra"),
        ('{"text": ', "not valid JSON"),
        ("[1, 2]", "JSON object"),
    ],
)
async def test_invalid_arguments_become_an_error_result_naming_the_field(
    args: dict[str, object] | str, needle: str
) -> None:
    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("echo", args)]), "sorry"]  # type: ignore[arg-type]  # malformed arguments on purpose
    )
    ran: list[str] = []

    @tool(read_only=True, name="echo")
    async def echo_logged(text: str) -> str:
        """Echo."""
        ran.append(text)
        return text

    session = Session(Agent(model=model, tools=[echo_logged]))
    events = await send(session, "go")
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and needle in result.content
    assert ran == []
    assert isinstance(events[-1], TurnComplete) and events[-1].stop_reason == "end_turn"
    assert len(model.requests) == 2  # the model saw the error and answered


async def test_unknown_tool_is_an_error_result_listing_the_tools() -> None:
    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("nope", {})]), "ok"])
    session = Session(Agent(model=model, tools=[echo]))
    events = await send(session, "go")
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "unknown tool 'nope'" in result.content and "echo" in result.content
    assert events[-1].type == "turn_complete"


async def test_tool_not_in_allowlist_is_unknown_to_the_model() -> None:
    @tool
    async def delete_everything() -> str:
        """Dangerous."""
        raise AssertionError("must not run")

    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("delete_everything", {})]), "ok"]
    )
    agent = Agent(model=model, tools=[echo, delete_everything], allowed_tools=["ech*"])
    session = Session(agent)
    events = await send(session, "go")
    assert [s.name for s in model.requests[0].tools] == ["echo"]
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "unknown tool" in result.content


async def test_tool_exception_becomes_error_result_and_run_goes_on() -> None:
    @tool(read_only=True)
    async def broken() -> str:
        """Always fails."""
        raise ValueError("disk on fire")

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("broken", {})]), "recovered"])
    session = Session(Agent(model=model, tools=[broken]))
    events = await send(session, "go")
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "ValueError: disk on fire" in result.content
    assert session.messages[-1].text == "recovered"


@pytest.mark.parametrize("read_only", [True, False])
async def test_tool_timeout_becomes_error_result(read_only: bool) -> None:
    @tool(read_only=read_only, timeout=0.05)
    async def hang() -> str:
        """Never returns."""
        await anyio.sleep_forever()
        return "unreachable"

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("hang", {})]), "moving on"])
    session = Session(Agent(model=model, tools=[hang]))
    events = await send(session, "go")
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "timed out after 0.05s" in result.content
    assert session.messages[-1].text == "moving on"
    if not read_only:
        (record,) = session.state.writes.values()
        assert record.status == "unknown"


@pytest.mark.parametrize("read_only", [True, False])
async def test_an_after_hook_tells_a_timeout_from_a_failure_and_a_result(read_only: bool) -> None:
    @tool(read_only=read_only, timeout=0.05)
    async def hang() -> str:
        """Never returns."""
        await anyio.sleep_forever()
        return "unreachable"

    @tool(read_only=read_only)
    async def broken() -> str:
        """Always fails."""
        raise ValueError("disk on fire")

    @tool(read_only=read_only)
    async def fine() -> ToolOutput:
        """Returns an error of its own."""
        return ToolOutput(content="no such key", is_error=True)

    seen: dict[str, str | None] = {}

    def after(t: Tool, args: Mapping[str, object], out: ToolOutput) -> None:
        seen[t.name] = out.error_type

    calls = [ScriptedCall("hang", {}), ScriptedCall("broken", {}), ScriptedCall("fine", {})]
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
    hooks = Hooks(after_tool_call=after)
    session = Session(Agent(model=model, tools=[hang, broken, fine], hooks=hooks))
    await send(session, "go")
    assert seen == {"hang": "ToolTimeout", "broken": "ValueError", "fine": None}
    assert [p.is_error for p in results_of(session)] == [True, True, True]


async def test_oversized_result_is_truncated_with_a_hint() -> None:
    @tool(read_only=True, max_result_chars=100)
    async def dump() -> str:
        """Lots of output."""
        return "x" * 1000

    model = ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("dump", {})]), "ok"])
    session = Session(Agent(model=model, tools=[dump]))
    await send(session, "go")
    content = results_of(session)[0].content
    assert content.startswith("x" * 100) and "x" * 101 not in content
    assert "1,000 characters" in content and "Narrow the call" in content


async def test_max_turns_stops_the_loop() -> None:
    looping = ScriptedModel(
        lambda messages, tools: ScriptedResponse(
            tool_calls=[ScriptedCall("echo", {"text": "again"})]
        )
    )
    session = Session(Agent(model=looping, tools=[echo], limits=Limits(max_steps=3)))
    events = await send(session, "loop forever")
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.stop_reason == "max_turns"
    assert len(looping.requests) == 3
    # The transcript is valid: every call has its result.
    assert len(results_of(session)) == 3
    # The session stays usable.
    session.agent.model  # noqa: B018
    assert not session.running


async def test_model_error_mid_stream_is_a_terminal_error_and_session_stays_usable() -> None:
    model = ScriptedModel(
        [
            ScriptedResponse(
                text="partial answer that breaks",
                error=ModelOutputError("connection reset", provider="scripted", retryable=True),
                error_after=2,
            ),
            "second try works",
        ]
    )
    session = Session(Agent(model=model))
    events = await send(session, "hi")
    error = events[-1]
    assert isinstance(error, ErrorEvent)
    assert (
        error.code == "model_output_error"
        and error.retryable
        and "connection reset" in error.message
    )
    assert [m.role for m in session.messages] == ["user"]
    events = await send(session, "again")
    assert isinstance(events[-1], TurnComplete)
    assert session.messages[-1].text == "second try works"


async def test_script_exhausted_is_a_clear_error() -> None:
    session = Session(Agent(model=ScriptedModel([])))
    events = await send(session, "hi")
    error = events[-1]
    assert isinstance(error, ErrorEvent) and "no response left for request #1" in error.message


async def test_usage_event_reports_cost_from_configured_prices() -> None:
    from mainspring import ModelPrice, Usage

    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, requests=1)
    model = ScriptedModel([ScriptedResponse(text="hi", usage=usage)], name="m")
    agent = Agent(model=model, prices={"m": ModelPrice(input=3.0, output=15.0)})
    session = Session(agent)
    events = await send(session, "hi")
    usage_event = next(e for e in events if isinstance(e, UsageEvent))
    assert usage_event.cost_usd == pytest.approx(4.5)
    assert session.cost_usd == pytest.approx(4.5)
    done = events[-1]
    assert isinstance(done, TurnComplete) and done.cost_usd == pytest.approx(4.5)


async def test_history_can_be_preloaded_and_is_sent_to_the_model() -> None:
    model = ScriptedModel(["fine"])
    history = [Message.user("earlier"), Message.assistant("reply")]
    session = Session(Agent(model=model), messages=history)
    await send(session, "now")
    assert [m.text for m in model.requests[0].messages] == ["earlier", "reply", "now"]


async def test_a_turn_s_tool_cache_lasts_through_a_pause_and_a_new_turn_starts_empty() -> None:
    seen: list[dict[str, object]] = []

    @tool(read_only=True)
    def look(key: str, ctx: ToolContext) -> str:
        """Note what the turn's cache holds, then add ``key``."""
        seen.append(dict(ctx.cache))
        ctx.cache[key] = True
        return "looked"

    @tool(permission="confirm")
    def pay(to: str) -> str:
        """Pay someone."""
        return "paid " + to

    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=[ScriptedCall("look", {"key": "a"})]),
            ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "bo"})]),
            ScriptedResponse(tool_calls=[ScriptedCall("look", {"key": "b"})]),
            "paid",
            ScriptedResponse(tool_calls=[ScriptedCall("look", {"key": "c"})]),
            "done",
        ]
    )
    session = Session(Agent(model=model, tools=[look, pay]))
    pending = pending_of(await send(session, "pay bo"))
    await resume(session, pending.attempt_id, Approve())
    await send(session, "look again")
    assert seen == [{}, {"a": True}, {}]  # kept through the pause; a new turn's is empty
