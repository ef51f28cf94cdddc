"""The AG-UI route: every event validated by the ``ag-ui-protocol`` package's own models."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    Event,
    EventType,
    MessagesSnapshotEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageStartEvent,
    ResumeEntry,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from mainspring.decisions import Approve, Reject
from mainspring.errors import ConfigError
from mainspring.events import Event as MainspringEvent
from mainspring.events import (
    SteeringTaken,
    TextDelta,
    ThinkingDelta,
    ThinkingDone,
    ToolCallDelta,
    ToolResult,
    ToolStart,
    TurnComplete,
    UsageEvent,
)
from mainspring.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from mainspring.server._agui import decision_of
from mainspring.server._agui_events import AguiRun
from mainspring.usage import Usage
from tests.npm import npm_install
from tests.server.uiservers import (
    ALICE,
    Served,
    new_id,
    served,
    signing_agent,
    sse_data,
    two_workers,
    writes_of,
)
from tests.strategies import events as any_event

EVENTS: TypeAdapter[Event] = TypeAdapter(Event)


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    with served() as s:
        yield s


def run_input(thread_id: str, text: str = "Pay Alice $20", **extra: Any) -> dict[str, Any]:
    body = RunAgentInput(
        thread_id=thread_id,
        run_id=new_id(),
        messages=[{"id": new_id(), "role": "user", "content": text}],  # type: ignore[list-item]  # ag-ui's pydantic model validates the plain dict into a message
        **extra,
    )
    dumped: dict[str, Any] = body.model_dump(mode="json", by_alias=True)
    return dumped


def resume_input(thread_id: str, *entries: ResumeEntry) -> dict[str, Any]:
    body = RunAgentInput(thread_id=thread_id, run_id=new_id(), messages=[], resume=list(entries))
    dumped: dict[str, Any] = body.model_dump(mode="json", by_alias=True)
    return dumped


def events_of(response: httpx.Response) -> list[BaseEvent]:
    """The stream, each event parsed (and so validated) by the package's models."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return [EVENTS.validate_json(data) for data in sse_data(response)]


def finished(events: list[BaseEvent]) -> RunFinishedEvent:
    last = events[-1]
    assert isinstance(last, RunFinishedEvent)
    return last


def interrupted(server: Served, thread_id: str) -> tuple[list[BaseEvent], str]:
    events = events_of(server.alice.post("/v1/agui", json=run_input(thread_id)))
    outcome = finished(events).outcome
    assert isinstance(outcome, RunFinishedInterruptOutcome)
    (interrupt,) = outcome.interrupts
    return events, interrupt.id


def approve(interrupt_id: str, **payload: Any) -> ResumeEntry:
    return ResumeEntry(
        interrupt_id=interrupt_id, status="resolved", payload={"approved": True, **payload}
    )


# ---------------------------------------------------------------- the run


def test_a_run_streams_every_kind_and_ends_in_an_interrupt(server: Served) -> None:
    thread_id = new_id()
    events, interrupt_id = interrupted(server, thread_id)
    kinds = [e.type for e in events]
    assert kinds[0] == EventType.RUN_STARTED
    for kind in (
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.REASONING_START,
        EventType.REASONING_MESSAGE_START,
        EventType.REASONING_MESSAGE_CONTENT,
        EventType.REASONING_MESSAGE_END,
        EventType.REASONING_END,
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_ARGS,
        EventType.TOOL_CALL_END,
        EventType.TOOL_CALL_RESULT,
        EventType.STATE_SNAPSHOT,
    ):
        assert kind in kinds, kind
    assert kinds[-3:] == [
        EventType.MESSAGES_SNAPSHOT,
        EventType.STATE_SNAPSHOT,
        EventType.RUN_FINISHED,
    ]
    run = finished(events)
    assert run.thread_id == thread_id
    outcome = run.outcome
    assert isinstance(outcome, RunFinishedInterruptOutcome)
    interrupt = outcome.interrupts[0]
    assert interrupt.id == interrupt_id and interrupt_id.count(".") == 2  # signed
    assert interrupt.reason == "tool_call"
    assert interrupt.metadata is not None and interrupt.metadata["toolName"] == "send_payment"
    assert interrupt.metadata["input"]["amount_usd"] == 20.0
    starts = [e for e in events if isinstance(e, ToolCallStartEvent)]
    assert starts[-1].tool_call_name == "send_payment"
    assert interrupt.tool_call_id == starts[-1].tool_call_id
    args = "".join(
        e.delta
        for e in events
        if isinstance(e, ToolCallArgsEvent) and e.tool_call_id == interrupt.tool_call_id
    )
    assert json.loads(args)["to_account"] == "acct_alice_01"
    # what a resume needs is on the wire before the interrupt: the conversation so far
    snapshot = next(e for e in events if isinstance(e, MessagesSnapshotEvent))
    roles = [m.role for m in snapshot.messages]
    assert roles[0] == "user" and roles[-1] == "assistant"
    asked = snapshot.messages[-1]
    assert isinstance(asked, AssistantMessage) and asked.tool_calls is not None
    assert asked.tool_calls[-1].id == interrupt.tool_call_id
    assert json.loads(asked.tool_calls[-1].function.arguments)["amount_usd"] == 20.0
    # the session's own view agrees: the same signed id is pending
    pending = server.alice.get(f"/v1/sessions/{thread_id}/pending").json()["pending"]
    assert pending["approval_id"] == interrupt_id


def test_resume_approves_and_the_payment_runs_once(server: Served) -> None:
    thread_id = new_id()
    events, interrupt_id = interrupted(server, thread_id)
    call = next(
        e
        for e in events
        if isinstance(e, ToolCallStartEvent) and e.tool_call_name == "send_payment"
    )
    after = events_of(
        server.alice.post("/v1/agui", json=resume_input(thread_id, approve(interrupt_id)))
    )
    assert after[0].type == EventType.RUN_STARTED
    results = [e for e in after if isinstance(e, ToolCallResultEvent)]
    assert [r.tool_call_id for r in results] == [call.tool_call_id]
    assert json.loads(str(results[0].content))["status"] == "sent"
    # the call was announced by the interrupted run: no second TOOL_CALL_START
    assert not any(isinstance(e, ToolCallStartEvent) for e in after)
    assert isinstance(finished(after).outcome, RunFinishedSuccessOutcome)
    again = server.alice.post("/v1/agui", json=resume_input(thread_id, approve(interrupt_id)))
    assert again.status_code == 409, again.text
    assert writes_of(server.alice, thread_id) == 1


def test_resume_with_an_edit_of_a_modifiable_field(server: Served) -> None:
    thread_id = new_id()
    _events, interrupt_id = interrupted(server, thread_id)
    entry = approve(interrupt_id, edits={"amount_usd": 7.0})
    after = events_of(server.alice.post("/v1/agui", json=resume_input(thread_id, entry)))
    result = next(e for e in after if isinstance(e, ToolCallResultEvent))
    note, _, output = str(result.content).partition("]\n\n")  # what ran, then the output
    assert note.startswith("[the approver edited the arguments") and '"amount_usd": 7.0' in note
    assert json.loads(output)["amount_usd"] == 7.0


@pytest.mark.parametrize(
    "entry",
    [
        {"status": "resolved", "payload": {"approved": False, "reason": "not today"}},
        {"status": "resolved", "payload": False},
        {"status": "cancelled"},
    ],
    ids=["rejected", "bare-false", "cancelled"],
)
def test_resume_that_declines_runs_nothing(server: Served, entry: dict[str, Any]) -> None:
    thread_id = new_id()
    _events, interrupt_id = interrupted(server, thread_id)
    body = resume_input(thread_id)
    body["resume"] = [{"interruptId": interrupt_id, **entry}]
    after = events_of(server.alice.post("/v1/agui", json=body))
    result = next(e for e in after if isinstance(e, ToolCallResultEvent))
    assert result.metadata == {"isError": True}
    assert isinstance(finished(after).outcome, RunFinishedSuccessOutcome)
    assert writes_of(server.alice, thread_id) == 0


def test_a_second_run_on_the_thread_continues_the_session(server: Served) -> None:
    thread_id = new_id()
    events_of(server.alice.post("/v1/agui", json=run_input(thread_id, "What can you do?")))
    events_of(server.alice.post("/v1/agui", json=run_input(thread_id, "And then?")))
    assert server.alice.get(f"/v1/sessions/{thread_id}").json()["turn_index"] == 2


# ------------------------------------------------------------- refusals


def test_no_credential_is_401(server: Served) -> None:
    assert server.anonymous.post("/v1/agui", json=run_input(new_id())).status_code == 401


def test_another_principals_thread_is_404(server: Served) -> None:
    thread_id = new_id()
    _events, interrupt_id = interrupted(server, thread_id)
    assert server.bob.post("/v1/agui", json=run_input(thread_id)).status_code == 404
    stolen = server.bob.post("/v1/agui", json=resume_input(thread_id, approve(interrupt_id)))
    assert stolen.status_code == 404
    assert writes_of(server.alice, thread_id) == 0


def test_bad_resumes_are_refused_and_the_interrupt_stays_open(server: Served) -> None:
    thread_id = new_id()
    _events, interrupt_id = interrupted(server, thread_id)
    attempt, digest, _mac = interrupt_id.split(".")
    forged = f"{attempt}.{digest}.{'A' * 43}"
    cases: list[tuple[list[dict[str, Any]] | None, int]] = [
        (None, 409),  # a new message while the interrupt is open
        ([], 409),
        ([{"interruptId": forged, "status": "resolved", "payload": True}], 403),
        ([{"interruptId": "nope", "status": "resolved", "payload": True}], 403),
        (
            [
                {"interruptId": interrupt_id, "status": "resolved", "payload": True},
                {"interruptId": interrupt_id, "status": "resolved", "payload": True},
            ],
            400,
        ),
        (
            [
                {"interruptId": interrupt_id, "status": "resolved", "payload": True},
                {"interruptId": forged, "status": "resolved", "payload": True},
            ],
            403,
        ),
        ([{"interruptId": interrupt_id, "status": "resolved"}], 400),  # no payload
        ([{"interruptId": interrupt_id, "status": "resolved", "payload": {"ok": 1}}], 400),
        ([{"interruptId": interrupt_id, "status": "resolved", "payload": "yes"}], 400),
        ([{"interruptId": interrupt_id, "status": "maybe"}], 422),
        ([{"status": "resolved"}], 422),
    ]
    for resume, status in cases:
        body = run_input(thread_id)
        if resume is not None:
            body["resume"] = resume
        response = server.alice.post("/v1/agui", json=body)
        assert response.status_code == status, (resume, response.text)
        assert response.json()["error"]["message"]
    non_modifiable = approve(interrupt_id, edits={"to_account": "acct_mallory"})
    response = server.alice.post("/v1/agui", json=resume_input(thread_id, non_modifiable))
    assert response.status_code == 422, response.text
    assert writes_of(server.alice, thread_id) == 0
    pending = server.alice.get(f"/v1/sessions/{thread_id}/pending").json()["pending"]
    assert pending["approval_id"] == interrupt_id
    ok = server.alice.post("/v1/agui", json=resume_input(thread_id, approve(interrupt_id)))
    assert isinstance(finished(events_of(ok)).outcome, RunFinishedSuccessOutcome)


def test_a_resume_with_nothing_open_is_refused(server: Served) -> None:
    thread_id = new_id()
    events_of(server.alice.post("/v1/agui", json=run_input(thread_id, "What can you do?")))
    entry = {"interruptId": "x" * 30, "status": "resolved", "payload": True}
    body = resume_input(thread_id)
    body["resume"] = [entry]
    assert server.alice.post("/v1/agui", json=body).status_code == 403


BAD_INPUTS: list[tuple[str, object, int]] = [
    ("not an object", [1], 422),
    ("no threadId", {"runId": "r", "messages": []}, 422),
    ("no runId", {"threadId": "t", "messages": []}, 422),
    ("no messages", {"threadId": "t", "runId": "r"}, 422),
    ("bad threadId", {"threadId": "../x", "runId": "r", "messages": []}, 400),
    ("empty runId", {"threadId": "t", "runId": "", "messages": []}, 400),
    ("empty messages", {"threadId": "t", "runId": "r", "messages": []}, 400),
    (
        "assistant last",
        {
            "threadId": "t",
            "runId": "r",
            "messages": [{"id": "a", "role": "assistant", "content": "hi"}],
        },
        400,
    ),
    (
        "blank user text",
        {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": " "}]},
        400,
    ),
    (
        "empty user message id",
        {"threadId": "t", "runId": "r", "messages": [{"id": "", "role": "user", "content": "x"}]},
        400,
    ),
    (
        "long user message id",
        {
            "threadId": "t",
            "runId": "r",
            "messages": [{"id": "u" * 201, "role": "user", "content": "x"}],
        },
        400,
    ),
    (
        "unknown role",
        {
            "threadId": "t",
            "runId": "r",
            "messages": [{"id": "u", "role": "wizard", "content": "x"}],
        },
        422,
    ),
]


@pytest.mark.parametrize(("case", "body", "status"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_inputs_are_clear_4xx(server: Served, case: str, body: object, status: int) -> None:
    if isinstance(body, dict) and body.get("threadId") == "t":
        body = {**body, "threadId": new_id()}
    response = server.alice.post("/v1/agui", json=body)
    assert response.status_code == status, (case, response.text)
    assert response.json()["error"]["message"]


@pytest.mark.slow
@settings(max_examples=60)
@given(
    body=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "threadId",
                        "runId",
                        "messages",
                        "id",
                        "role",
                        "content",
                        "resume",
                        "interruptId",
                        "status",
                        "payload",
                        "approved",
                        "tools",
                        "state",
                    ]
                ),
                children,
                max_size=6,
            )
        ),
        max_leaves=20,
    )
)
def test_no_input_makes_a_500(server: Served, body: object) -> None:
    response = server.alice.post("/v1/agui", json=body)
    assert 200 <= response.status_code < 500, response.text


# ---------------------------------------------------------- the mapper


def test_resume_payloads_decide() -> None:
    def entry(payload: object, status: str = "resolved") -> ResumeEntry:
        return ResumeEntry.model_validate(
            {"interruptId": "i", "status": status, "payload": payload}
        )

    assert decision_of(entry({"approved": True, "edits": {"memo": "x"}})) == Approve(
        edits={"memo": "x"}
    )
    assert decision_of(entry(True)) == Approve()
    assert decision_of(entry({"approved": False, "reason": "no"})) == Reject(reason="no")
    assert isinstance(decision_of(entry(None, "cancelled")), Reject)
    for bad in (None, "yes", {"approved": "yes"}, {"approved": True, "extra": 1}, [True]):
        with pytest.raises(ConfigError, match="payload"):
            decision_of(entry(bad))


@settings(max_examples=150, deadline=None, database=None)
@given(events=st.lists(any_event, max_size=30))
def test_any_event_sequence_maps_to_valid_balanced_agui_events(
    events: list[MainspringEvent],
) -> None:
    mapper = AguiRun(thread_id="t", run_id="r")
    out = list(mapper.started())
    for event in events:
        out += mapper.events(event, {"k": 1})
        if mapper.finished:
            break
    out += mapper.end()
    open_text: set[str] = set()
    open_reasoning: set[str] = set()
    ended_calls: set[str] = set()
    terminals = 0
    for produced in out:
        again = EVENTS.validate_json(produced.model_dump_json(by_alias=True))
        assert again.type == produced.type
        data = produced.model_dump(mode="json", by_alias=True)
        kind = produced.type
        if kind == EventType.TEXT_MESSAGE_START:
            assert not open_text and not open_reasoning
            open_text.add(data["messageId"])
        elif kind in (EventType.TEXT_MESSAGE_CONTENT, EventType.TEXT_MESSAGE_END):
            assert data["messageId"] in open_text
            if kind == EventType.TEXT_MESSAGE_END:
                open_text.clear()
        elif kind == EventType.REASONING_START:
            assert not open_text and not open_reasoning
            open_reasoning.add(data["messageId"])
        elif kind == EventType.REASONING_END:
            assert data["messageId"] in open_reasoning
            open_reasoning.clear()
        elif kind == EventType.TOOL_CALL_END:
            ended_calls.add(data["toolCallId"])
        elif kind == EventType.TOOL_CALL_ARGS:
            assert data["toolCallId"] not in ended_calls
        elif kind in (EventType.RUN_FINISHED, EventType.RUN_ERROR):
            terminals += 1
            assert not open_text and not open_reasoning
    assert out[0].type == EventType.RUN_STARTED
    assert terminals == 1 and out[-1].type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)


@pytest.mark.parametrize("failed", [False, True], ids=["result", "error"])
def test_a_frontend_tool_finishes_as_success_and_its_result_rides_the_next_input(
    failed: bool,
) -> None:
    with served(signing_agent()) as server:
        thread_id = new_id()
        events = events_of(server.alice.post("/v1/agui", json=run_input(thread_id, "sign it")))
        outcome = finished(events).outcome
        start = next(e for e in events if isinstance(e, ToolCallStartEvent))
        assert start.tool_call_name == "sign_transaction"
        assert isinstance(outcome, RunFinishedSuccessOutcome)
        assert outcome.pending_tool_call_ids == [start.tool_call_id]
        # a new message without the result: refused, the call still waits
        assert server.alice.post("/v1/agui", json=run_input(thread_id, "hm?")).status_code == 409
        resume = resume_input(thread_id, approve("x" * 20))
        assert server.alice.post("/v1/agui", json=resume).status_code == 400
        body = run_input(thread_id)
        tool_message: dict[str, Any] = {
            "id": new_id(),
            "role": "tool",
            "toolCallId": start.tool_call_id,
            "content": "tx 0xdeadbeef",
        }
        if failed:
            tool_message["error"] = "user closed the wallet"
        body["messages"] = [*body["messages"], tool_message]
        after = events_of(server.alice.post("/v1/agui", json=body))
        assert not any(isinstance(e, ToolCallStartEvent) for e in after)
        result = next(e for e in after if isinstance(e, ToolCallResultEvent))
        assert result.tool_call_id == start.tool_call_id
        if failed:
            assert result.content == "user closed the wallet" and result.metadata == {
                "isError": True
            }
        else:
            assert result.content == "tx 0xdeadbeef" and result.metadata is None
        assert isinstance(finished(after).outcome, RunFinishedSuccessOutcome)


def test_the_openapi_document_describes_both_ui_routes(server: Served) -> None:
    document = server.anonymous.get("/openapi.json").json()
    paths = document["paths"]
    body = paths["/v1/agui"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/RunAgentInput"}
    chat = paths["/v1/aisdk/chat"]["post"]["requestBody"]["content"]["application/json"]
    assert chat["schema"] == {"$ref": "#/components/schemas/ChatRequest"}
    assert "get" in paths["/v1/aisdk/chat/{chat_id}/stream"]
    assert "threadId" in document["components"]["schemas"]["RunAgentInput"]["properties"]


def test_an_interrupt_is_answered_on_another_worker(tmp_path: Path) -> None:
    from mainspring.demo import demo_agent

    with two_workers(demo_agent(), tmp_path) as (first, second):
        thread_id = new_id()
        _events, interrupt_id = interrupted(first, thread_id)
        after = events_of(
            second.alice.post("/v1/agui", json=resume_input(thread_id, approve(interrupt_id)))
        )
        result = next(e for e in after if isinstance(e, ToolCallResultEvent))
        assert json.loads(str(result.content))["status"] == "sent"
        again = first.alice.post("/v1/agui", json=resume_input(thread_id, approve(interrupt_id)))
        assert again.status_code == 409
        assert writes_of(first.alice, thread_id) == 1


# ------------------------------------------------------ message ids


def streamed_ids(events: list[BaseEvent]) -> list[str]:
    """The messages a run streamed, by id, as a client makes them (first appearance)."""
    ids: list[str] = []
    for event in events:
        if isinstance(event, TextMessageStartEvent | ReasoningMessageStartEvent):
            found = event.message_id
        elif isinstance(event, ToolCallStartEvent):
            assert event.parent_message_id is not None  # a call rides a message of the run
            found = event.parent_message_id
        elif isinstance(event, ToolCallResultEvent):
            found = event.message_id
        else:
            continue
        if found not in ids:
            ids.append(found)
    return ids


def snapshot_of(events: list[BaseEvent]) -> MessagesSnapshotEvent:
    return next(e for e in events if isinstance(e, MessagesSnapshotEvent))


def asked(server: Served, thread_id: str, text: str, message_id: str) -> list[BaseEvent]:
    body = run_input(thread_id, text)
    body["messages"][0]["id"] = message_id
    return events_of(server.alice.post("/v1/agui", json=body))


def test_the_snapshot_names_every_message_as_the_client_and_the_stream_did(
    tmp_path: Path,
) -> None:
    from mainspring.demo import demo_agent

    with two_workers(demo_agent(), tmp_path) as (first, second):
        thread_id = new_id()
        events = asked(first, thread_id, "Pay Alice $20", "client-question-1")
        streamed = streamed_ids(events)
        snapshot = snapshot_of(events).messages
        # the user's own id, then what streamed, in order; the reasoning included
        assert [m.id for m in snapshot] == ["client-question-1", *streamed]
        assert "reasoning" in [m.role for m in snapshot]
        texts = {m.id: m.content for m in snapshot if m.role in ("assistant", "reasoning")}
        for event in events:
            if isinstance(event, TextMessageContentEvent | ReasoningMessageContentEvent):
                assert event.delta in str(texts[event.message_id])
        calls = {
            c.id: m.id
            for m in snapshot
            if isinstance(m, AssistantMessage)
            for c in m.tool_calls or ()
        }
        for event in events:
            if isinstance(event, ToolCallStartEvent):
                assert calls[event.tool_call_id] == event.parent_message_id
        outcome = finished(events).outcome
        assert isinstance(outcome, RunFinishedInterruptOutcome)
        interrupt_id = outcome.interrupts[0].id
        # the resume runs on the other worker: what it streams extends the snapshot
        after = events_of(
            second.alice.post("/v1/agui", json=resume_input(thread_id, approve(interrupt_id)))
        )
        resumed = snapshot_of(after).messages
        assert [m.id for m in resumed] == [m.id for m in snapshot] + streamed_ids(after)
        assert resumed[: len(snapshot)] == snapshot
        # a new question later, back on the first worker: nothing earlier is renamed
        later = asked(first, thread_id, "What can you do?", "client-question-2")
        whole = snapshot_of(later).messages
        assert [m.id for m in whole] == [
            *(m.id for m in resumed),
            "client-question-2",
            *streamed_ids(later),
        ]
        assert len({m.id for m in whole}) == len(whole)


CLIENT_SCRIPT = Path(__file__).with_name("agui_client.mjs")
AGUI_CLIENT_VERSION = "@ag-ui/client@1"
NPM_CACHE = Path(
    os.environ.get("MAINSPRING_NPM_CACHE", Path.home() / ".cache" / "mainspring-tests" / "npm")
)


@pytest.fixture(scope="module")
def agui_client() -> Path:
    """The ``@ag-ui/client`` npm package's directory, installed into the cache when missing."""
    package = NPM_CACHE / "node_modules" / "@ag-ui" / "client"
    why_not = npm_install(NPM_CACHE, AGUI_CLIENT_VERSION, package / "dist" / "index.mjs")
    if why_not is not None:
        pytest.skip(f"needs the @ag-ui/client npm package ({why_not})")
    return package


def as_compared(message: dict[str, Any]) -> dict[str, Any]:
    """What a user sees of a client message: its id, role, text, calls and result."""
    calls = [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
        for c in message.get("toolCalls") or ()
    ]
    return {
        "id": message["id"],
        "role": message["role"],
        "content": message.get("content") or "",
        "toolCalls": calls,
        "toolCallId": message.get("toolCallId"),
    }


def test_the_ag_ui_client_keeps_what_it_streamed_when_the_snapshot_lands(
    agui_client: Path, tmp_path: Path
) -> None:
    from mainspring.demo import demo_agent

    with two_workers(demo_agent(), tmp_path) as (first, second):
        done = subprocess.run(
            [
                "node",
                str(CLIENT_SCRIPT),
                str(agui_client),
                str(first.alice.base_url).rstrip("/"),
                str(second.alice.base_url).rstrip("/"),
                ALICE,
                new_id(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == []
    runs = result["runs"]
    assert len(runs) == 4  # ask (interrupted), resume, ask again, ask from a reloaded page
    before: list[dict[str, Any]] = []
    for run in runs:
        streamed = [as_compared(m) for m in run["streamed"]]
        final = [as_compared(m) for m in run["final"]]
        # the snapshot renames, moves, drops and adds nothing the run streamed
        assert final == streamed
        # and the run only added to what the client held before it
        assert final[: len(before)] == before
        before = final
    roles = [m["role"] for m in before]
    assert roles.count("reasoning") == 1 and roles[:2] == ["user", "reasoning"]
    asked = [m["id"] for m in before if m["role"] == "user"]
    assert asked == ["client-question-1", "client-question-2", "client-question-3"]
    assert len({m["id"] for m in before}) == len(before)


def test_the_mapper_counts_the_transcript_as_the_run_appends_to_it() -> None:
    """Steps without text, calls announced after the step, steering, unstreamed thinking."""

    def result(call: str) -> ToolResult:
        return ToolResult(tool_use_id=call, name="t", content=f"{call} done")

    def stored(call: str) -> ToolResultPart:
        return ToolResultPart(tool_use_id=call, name="t", content=f"{call} done")

    def called(call: str) -> ToolCallPart:
        return ToolCallPart(id=call, name="t", arguments={})

    step = UsageEvent(model="m", usage=Usage())
    transcript = [
        Message(role="user", parts=(TextPart(text="before"),), meta={"client_id": "q0"}),
        Message.assistant("Earlier."),
        Message(role="user", parts=(TextPart(text="go"),), meta={"client_id": "q1"}),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="plan"),
                TextPart(text="Checking."),
                called("c1"),
                called("c2"),
            ),
        ),
        Message.tool_results([stored("c1"), stored("c2")]),
        Message(role="assistant", parts=(ThinkingPart(text="", redacted=True), called("c3"))),
        Message.tool_results([stored("c3")]),
        Message(role="user", parts=(TextPart(text="also this"),), meta={"steering": "s1"}),
        Message(role="assistant", parts=(ThinkingPart(text="again"), TextPart(text="Done."))),
    ]
    events: list[MainspringEvent] = [
        ThinkingDelta(text="pl"),
        ThinkingDelta(text="an"),
        ThinkingDone(text="plan"),
        TextDelta(text="Checking."),
        ToolCallDelta(tool_use_id="c1", name="t", index=0, args_delta="{}"),
        ToolStart(tool_use_id="c1", name="t", input={}),  # a parallel call, mid-stream
        result("c1"),
        ToolCallDelta(tool_use_id="c2", name="t", index=1, args_delta="{}"),
        step,
        ToolStart(tool_use_id="c2", name="t", input={}),
        UsageEvent(model="tool:t", usage=Usage()),  # a tool's spend ends no step
        result("c2"),
        ThinkingDone(text="", redacted=True),
        step,
        ToolStart(tool_use_id="c3", name="t", input={}),  # a call the model streamed no delta of
        result("c3"),
        SteeringTaken(steering_id="s1", mode="next_step", text="also this", turn_index=0),
        ThinkingDone(text="again"),  # a block without deltas streams whole
        TextDelta(text="Done."),
        step,
    ]
    mapper = AguiRun(thread_id="t", run_id="r", base=2)
    out: list[BaseEvent] = []
    for event in events:
        out += mapper.events(event)
    out += mapper.events(TurnComplete(stop_reason="end_turn"), {}, transcript)
    snapshot = snapshot_of(out).messages
    ids = [m.id for m in snapshot]
    assert ids[:3] == ["q0", "m1.0", "q1"]
    assert ids[3:] == [
        "m3.0",
        "m3.1",
        "c1.result",
        "c2.result",
        "m5.0",
        "c3.result",
        "m7",
        "m8.0",
        "m8.1",
    ]
    assert [i for i in ids[3:] if i != "m7"] == streamed_ids(out)
    by_id = {m.id: m for m in snapshot}
    assert [m.role for m in snapshot if m.id in ("m3.0", "m8.0")] == ["reasoning", "reasoning"]
    for start in (e for e in out if isinstance(e, ToolCallStartEvent)):
        parent = by_id[str(start.parent_message_id)]
        assert isinstance(parent, AssistantMessage) and parent.tool_calls is not None
        assert start.tool_call_id in [c.id for c in parent.tool_calls]
    again = "".join(
        e.delta
        for e in out
        if isinstance(e, ReasoningMessageContentEvent) and e.message_id == "m8.0"
    )
    assert again == "again"
