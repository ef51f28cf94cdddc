"""The client in the 2026-07-28 revision: input_required rounds, answered or paused durably.

Against a FastMCP server of the official SDK whose tools ask through
``Resolve`` markers, over stdio (a child process) and streamable HTTP (in this
process), and against a raw server that answers with hostile rounds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import JsonValue

from mainspring import Agent, Event, Session
from mainspring.cost import ModelPrice
from mainspring.decisions import Approve, Reject
from mainspring.errors import FieldNotModifiable, McpStartupError
from mainspring.events import PendingAction, ToolResult
from mainspring.mcp import (
    ElicitAnswer,
    McpClientManager,
    McpElicitation,
    McpSampling,
    McpServerConfig,
)
from mainspring.mcp._input_rounds import DETAILS_KEY, InputRoundsError, persisted_round
from mainspring.mcp.server import build_mcp_server, serve_http
from mainspring.stores.urls import open_stores
from mainspring.testing import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.tools.context import ToolContext
from tests.helpers import resume, send
from tests.mcp import _asking_server
from tests.mcp.test_client import fake
from tests.mcp.test_elicit_pause import PricedModel, json_values
from tests.mcp.test_server import agent, deleted
from tests.server.servers import serving

pytestmark = pytest.mark.anyio

ASKING = str(Path(__file__).with_name("_asking_server.py"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def in_process_http() -> AsyncIterator[str]:
    """The asking server over streamable HTTP, served by this process on a free port."""
    _asking_server.BOOKED.clear()
    _asking_server.SENT.clear()
    with serving(_asking_server.server.streamable_http_app(host="127.0.0.1")) as base:
        yield f"{base}/mcp"


@asynccontextmanager
async def asking(transport: str, **kw: Any) -> AsyncIterator[McpClientManager]:
    """A manager connected to the asking server over ``transport``."""
    settings: dict[str, Any] = {"tool_permissions": {"book": "auto", "pair": "auto"}}
    manager_kw = {k: kw.pop(k) for k in ("pause_on_elicit", "on_elicit", "sampling") if k in kw}
    settings |= kw
    if transport == "stdio":
        config = McpServerConfig(name="asking", command=sys.executable, args=(ASKING,), **settings)
        async with McpClientManager([config], **manager_kw) as manager:
            yield manager
        return
    async with in_process_http() as url:
        config = McpServerConfig(name="asking", transport="http", url=url, **settings)
        async with McpClientManager([config], **manager_kw) as manager:
            yield manager


def session_calling(manager: McpClientManager, *calls: tuple[str, dict[str, Any]]) -> Session:
    steps: list[ScriptedResponse | str] = [
        ScriptedResponse(tool_calls=[ScriptedCall(name, args)]) for name, args in calls
    ]
    return Session(Agent(model=ScriptedModel([*steps, "done"]), tools=manager.tools()))


def pending(events: Sequence[Event]) -> PendingAction:
    found = [e for e in events if isinstance(e, PendingAction)]
    assert len(found) == 1, events
    return found[0]


def results(events: Sequence[Event]) -> list[str]:
    return [e.content for e in events if isinstance(e, ToolResult)]


async def server_saw(manager: McpClientManager) -> str:
    return (await manager.call_tool("asking", "sent", {})).content


TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])


@TRANSPORTS
async def test_input_required_pauses_the_turn_and_the_retry_is_sent_once(transport: str) -> None:
    with anyio.fail_after(120):  # a hang guard, not a timing assertion
        async with asking(transport, pause_on_elicit=True) as manager:
            assert manager.protocol_version("asking") == "2026-07-28"
            session = session_calling(manager, ("mcp__asking__book", {"room": "r1"}))
            asked = pending(await send(session, "book"))
            assert asked.nested is not None
            assert "Who stays in r1?" in asked.reason
            assert set(asked.modifiable_fields) == {"name", "age"}
            paused = asked.nested.details["mcp_input_required"]
            assert isinstance(paused, dict) and paused["round"] == 1
            assert isinstance(paused["request_state"], str), "the server's state is kept"
            assert asked.nested.details["mcp_elicitation"], "the 2025-era shape, too"
            assert await server_saw(manager) == "sent=['book r1'] booked=[]"
            events = await resume(session, asked.attempt_id, Approve(edits={"name": "Ada"}))
            assert results(events) == ["booked r1 for Ada (0); bookings: ['r1:Ada']"]
            assert session.pending is None and events[-1].type == "turn_complete"
            # The server saw the first call and the one retry that carried the answer.
            assert await server_saw(manager) == "sent=['book r1', 'book r1'] booked=['r1:Ada']"


@TRANSPORTS
async def test_reject_declines_and_a_bad_answer_asks_again(transport: str) -> None:
    with anyio.fail_after(120):  # a hang guard, not a timing assertion
        async with asking(transport, pause_on_elicit=True) as manager:
            session = session_calling(
                manager,
                ("mcp__asking__book", {"room": "r1"}),
                ("mcp__asking__book", {"room": "r2"}),
            )
            asked = pending(await send(session, "book"))
            with pytest.raises(FieldNotModifiable):
                await resume(session, asked.attempt_id, Approve(edits={"room": "r9"}))
            events = await resume(session, asked.attempt_id, Approve(edits={"age": "old"}))
            again = pending(events)
            assert "does not fit the server's form" in again.reason
            assert results(events) == [], "nothing was sent"
            events = await resume(session, again.attempt_id, Reject("no"))
            assert results(events) == ["not booked: decline"]
            second = pending(events)
            assert "Who stays in r2?" in second.reason
            events = await resume(session, second.attempt_id, Approve(edits={"name": "Bo"}))
            assert results(events) == ["booked r2 for Bo (0); bookings: ['r2:Bo']"]


async def test_a_read_that_asks_is_answered_by_the_handler_not_paused() -> None:
    async def on_elicit(request: McpElicitation) -> ElicitAnswer:
        return ElicitAnswer(action="accept", content={"name": "Di"})

    with anyio.fail_after(120):  # a hang guard, not a timing assertion
        async with asking("http", pause_on_elicit=True, on_elicit=on_elicit) as manager:
            session = session_calling(manager, ("mcp__asking__whoami", {}))
            answered = await send(session, "who")
        async with asking("http", pause_on_elicit=True) as manager:
            session = session_calling(manager, ("mcp__asking__whoami", {}))
            declined = await send(session, "who")
    assert results(answered) == ["you are Di"]
    assert results(declined) == ["decline"] and session.pending is None


async def test_two_questions_in_one_round_pause_one_after_the_other() -> None:
    with anyio.fail_after(120):  # a hang guard, not a timing assertion
        async with asking("stdio", pause_on_elicit=True) as manager:
            session = session_calling(manager, ("mcp__asking__pair", {}))
            first = pending(await send(session, "pair"))
            assert "first guest" in first.reason
            events = await resume(session, first.attempt_id, Approve(edits={"name": "Ada"}))
            second = pending(events)
            assert "second guest" in second.reason and results(events) == []
            nested = second.nested
            assert nested is not None
            kept = nested.details["mcp_input_required"]
            assert isinstance(kept, dict) and len(kept["answers"]) == 1  # type: ignore[arg-type]  # the kept answers are a JSON list
            events = await resume(session, second.attempt_id, Approve(edits={"name": "Bo"}))
            assert results(events) == ["paired Ada with Bo"]


@TRANSPORTS
async def test_without_the_pause_the_hosts_handler_answers_or_none_is_offered(
    transport: str,
) -> None:
    asked: list[McpElicitation] = []

    async def on_elicit(request: McpElicitation) -> ElicitAnswer:
        asked.append(request)
        return ElicitAnswer(action="accept", content={"name": "Cy", "age": 7})

    with anyio.fail_after(120):  # a hang guard, not a timing assertion
        async with asking(transport, on_elicit=on_elicit) as manager:
            out = await manager.call_tool("asking", "book", {"room": "r1"})
            session = session_calling(manager, ("mcp__asking__book", {"room": "r2"}))
            events = await send(session, "book")
        assert out.content == "booked r1 for Cy (7); bookings: ['r1:Cy']"
        assert results(events) == ["booked r2 for Cy (7); bookings: ['r1:Cy', 'r2:Cy']"]
        assert [a.message for a in asked] == ["Who stays in r1?", "Who stays in r2?"]
        async with asking(transport) as manager:
            declined = await manager.call_tool("asking", "book", {"room": "r3"})
        # No handler, no pause: the client does not offer elicitation, so the server cannot ask.
        assert declined.is_error and "did not declare the form elicitation" in declined.content


async def test_sampling_in_a_round_goes_to_the_hosts_model_and_is_charged() -> None:
    price = ModelPrice(input=1.0, output=2.0)  # 0.003 USD per request
    sampling = McpSampling(model=PricedModel(), price=price, max_requests=1)
    with anyio.fail_after(120):  # a hang guard, not a timing assertion
        async with asking("stdio", sampling=sampling) as manager:
            session = session_calling(manager, ("mcp__asking__summarize", {"text": "t"}))
            events = await send(session, "go")
            over = await manager.call_tool("asking", "summarize", {"text": "again"})
        async with asking("stdio") as manager:
            refused = await manager.call_tool("asking", "summarize", {"text": "t"})
            roots = await manager.call_tool("asking", "roots", {})
    assert results(events) == ["priced-sampler: short."]
    assert session.cost_usd == pytest.approx(0.003) and sampling.cost_usd == pytest.approx(0.003)
    assert over.is_error and "sampling refused" in over.content and "limit reached" in over.content
    assert refused.is_error and "did not declare the sampling capability" in refused.content
    assert roots.is_error and "roots" in roots.content


@TRANSPORTS
async def test_list_changes_arrive_through_a_listen_stream(transport: str) -> None:
    with anyio.fail_after(120):  # a hang guard, not a timing assertion
        async with asking(transport) as manager:
            assert "mcp__asking__grown" not in {t.name for t in manager.tools()}
            assert (await manager.call_tool("asking", "grow", {})).content == "grown"
            for _ in range(3000):  # (60 s: only a hang) the refresh runs on the event
                if "mcp__asking__grown" in {t.name for t in manager.tools()}:
                    break
                await anyio.sleep(0.02)
            else:
                pytest.fail("tool list not refreshed after the listen event")


async def test_the_protocol_is_negotiated_or_pinned(tmp_path: Path) -> None:
    with anyio.fail_after(120):  # a hang guard, not a timing assertion
        async with asking("stdio", protocol="2025") as manager:
            handshake = manager.protocol_version("asking")
        async with McpClientManager([fake(tmp_path, "old")]) as manager:
            old = manager.protocol_version("old")
        with pytest.raises(McpStartupError, match="does not offer the 2026-07-28 protocol"):
            async with McpClientManager([fake(tmp_path, "pinned", protocol="2026-07-28")]):
                pass
    assert handshake is not None and handshake.startswith("2025-")
    assert old is not None and old.startswith("2025-"), "auto falls back to the handshake"


@pytest.mark.parametrize(
    ("tool", "said"),
    [
        ("hostile_int_state", "requestState"),
        ("hostile_big_state", "over 64,000 characters"),
        ("hostile_endless", "more than 3 times"),
        ("hostile_many", "at most 8"),
        ("hostile_roots", "roots"),
        ("hostile_deep_schema", "form schema"),
        ("hostile_sample", "does not offer"),
    ],
)
async def test_a_hostile_round_ends_the_call_with_a_clear_error(
    tmp_path: Path, tool: str, said: str
) -> None:
    config = fake(tmp_path, "bad", "modern", input_rounds=3)
    with anyio.fail_after(120):  # a hang guard, not a timing assertion
        async with McpClientManager([config], pause_on_elicit=True) as manager:
            assert manager.protocol_version("bad") == "2026-07-28"
            session = session_calling(manager, (f"mcp__bad__{tool}", {}))
            asked = pending(await send(session, "go"))
            events = await resume(session, asked.attempt_id, Approve())
            calls = (await manager.call_tool("bad", "calls", {})).content
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error and said in result.content, result.content
    assert session.pending is None, "nothing is left waiting on a hostile server"
    assert calls == ("4" if tool == "hostile_endless" else "1"), "no answer was sent back"


@asynccontextmanager
async def mainspring_server() -> AsyncIterator[str]:
    """``mainspring mcp serve``'s server for the test agent, over HTTP from this process."""
    deleted.clear()
    server = build_mcp_server(agent(), expose_confirm=True)
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            lambda task_status: serve_http(server, port=0, task_status=task_status)
        )
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            tg.cancel_scope.cancel()


async def test_our_own_server_asks_for_approval_and_the_session_pauses_on_it() -> None:
    with anyio.fail_after(120):  # a hang guard, not a timing assertion
        async with mainspring_server() as url:
            config = McpServerConfig(name="ms", transport="http", url=url)
            async with McpClientManager([config], pause_on_elicit=True) as manager:
                assert manager.protocol_version("ms") == "2026-07-28"
                session = session_calling(manager, ("mcp__ms__delete_account", {"account": "acme"}))
                mine = pending(await send(session, "close acme"))
                assert mine.nested is None, "the client asks its user first (destructive)"
                theirs = pending(await resume(session, mine.attempt_id, Approve()))
                assert theirs.nested is not None and "delete_account needs your approval" in (
                    theirs.reason
                )
                assert theirs.modifiable_fields == ("approve",)
                assert deleted == [], "nothing runs before the server's approval"
                events = await resume(session, theirs.attempt_id, Approve(edits={"approve": True}))
    assert results(events) == ["deleted acme"] and deleted == ["acme"]


CHILD = [sys.executable, "-m", "tests.mcp._resume_child"]
ROOT = Path(__file__).parents[2]


async def child(*args: str) -> tuple[list[dict[str, Any]], str]:
    """Run one phase of ``_resume_child`` in a new process: its events (as JSON), its stderr."""
    with anyio.fail_after(120):  # the wait on the child is bounded (it kills itself or exits)
        done = await anyio.run_process(
            [*CHILD, *args], cwd=ROOT, check=False, stderr=subprocess.PIPE
        )
    lines = done.stdout.decode().splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")], done.stderr.decode()


@pytest.mark.slow
async def test_a_new_process_resumes_a_pending_input_required_and_the_retry_is_sent_once(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    with anyio.fail_after(120):  # a hang guard, not a timing assertion
        async with mainspring_server() as url:
            sent, _ = await child("send", url, store, "s1")
            [asked] = [e for e in sent if e["type"] == "pending_action"]
            assert asked["nested"]["details"]["mcp_input_required"]["request_state"]
            assert deleted == []
            resumed, _ = await child("resume", url, store, "s1", asked["attempt_id"])
            assert [e["content"] for e in resumed if e["type"] == "tool_result"] == ["deleted acme"]
            assert deleted == ["acme"]
            again, said = await child("resume", url, store, "s1", asked["attempt_id"])
            assert not any(e["type"] == "tool_result" for e in again)
            assert "already decided" in said, said
            assert deleted == ["acme"], "a second decision is refused, never sent"


@pytest.mark.slow
async def test_a_crash_between_the_decision_and_the_retry_never_sends_it_twice(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    with anyio.fail_after(120):  # a hang guard, not a timing assertion
        async with mainspring_server() as url:
            sent, _ = await child("send", url, store, "s1")
            [asked] = [e for e in sent if e["type"] == "pending_action"]
            await child("crash", url, store, "s1", asked["attempt_id"])
            assert deleted == [], "it died before sending"
            after, refused = await child("resume", url, store, "s1", asked["attempt_id"])
            assert deleted == [], "the consumed decision is not applied again"
            assert not any(e["type"] == "tool_result" for e in after)
            assert "already decided" in refused, refused
            await child("next", url, store, "s1")  # the dead run is repaired on record
            assert deleted == []
            stores = await open_stores(store)
            assert stores.sessions is not None
            state = await stores.sessions.load("s1")
            await stores.aclose()
    assert state is not None and state.pending is None
    said = [p.content for m in state.messages for p in m.tool_results_parts]
    assert any("interrupted" in s or "did not run" in s for s in said), said


FORM = {
    "method": "elicitation/create",
    "params": {"message": "m", "requestedSchema": {"type": "object", "properties": {}}},
}


def kept(raw: JsonValue) -> ToolContext:
    nested = PendingAction(
        attempt_id="a",
        tool_use_id="t",
        turn_index=0,
        name="n",
        input={},
        description="",
        details={DETAILS_KEY: raw},
    )
    return ToolContext(
        session_id="s",
        agent_name="a",
        tool_use_id="t",
        tool_name="n",
        turn_index=0,
        cache={},
        emit=lambda event: None,
        suspended_on=nested,
    )


@given(
    raw=json_values
    | st.fixed_dictionaries(
        {
            "round": st.integers() | json_values,
            "asking": st.sampled_from(["q", "x"]) | json_values,
            "request_state": st.text(max_size=10) | json_values,
            "requests": st.dictionaries(st.sampled_from(["q", "x"]), st.just(FORM) | json_values),
            "answers": st.dictionaries(
                st.sampled_from(["q", "x"]),
                st.just({"action": "accept", "content": {}}) | json_values,
            ),
        }
    )
)
def test_a_kept_round_reads_back_or_is_a_clear_error(raw: JsonValue) -> None:
    try:
        found = persisted_round(kept(raw))
    except InputRoundsError as exc:
        assert "unreadable" in str(exc) or "server" in str(exc)
        return
    assert found is not None
    round_, asking = found
    assert asking in round_.requests
    assert persisted_round(kept(round_.to_json("s", "t", asking))) is not None, "round-trips"
