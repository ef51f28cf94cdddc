"""The AI SDK UI message stream route: the ``ai`` package's own chat client against it.

The node tests run the SDK's ``AbstractChat`` + ``DefaultChatTransport`` (what
``useChat`` runs) and its ``parseJsonEventStream`` / ``uiMessageChunkSchema`` /
``readUIMessageStream`` against a real server; the ``ai`` package is
installed into a cache directory on first use. The python tests pin the chunk
sequence, the approval round trip and every refusal.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import anyio.to_thread
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import JsonValue

from mainspring import (
    Agent,
    PermissionRules,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    tool,
)
from mainspring.decisions import Approve, Reject
from mainspring.errors import ConfigError
from mainspring.events import (
    Event,
    PendingAction,
    StreamStarted,
    TextDelta,
    ToolCallDelta,
    ToolResult,
    ToolStart,
    TurnComplete,
)
from mainspring.messages import Message, TextPart
from mainspring.models import ToolSpec
from mainspring.server import ServerConfig
from mainspring.server import _aisdk_history as aisdk_history
from mainspring.server._aisdk_stream import UIMessageStream
from mainspring.tools import ToolContext
from tests.npm import npm_install
from tests.server.uiservers import (
    ALICE,
    KEYS,
    Served,
    gated_agent,
    new_id,
    served,
    signing_agent,
    sse_data,
    two_workers,
    writes_of,
)
from tests.strategies import events as any_event

SCRIPT = Path(__file__).with_name("aisdk_chat.mjs")
AI_VERSION = "ai@6"
AI_CACHE = Path(
    os.environ.get("MAINSPRING_NPM_CACHE", Path.home() / ".cache" / "mainspring-tests" / "npm")
)


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    with served() as s:
        yield s


@pytest.fixture(scope="module")
def ai_package() -> Path:
    """The ``ai`` npm package's directory, installed into the cache when missing."""
    package = AI_CACHE / "node_modules" / "ai"
    why_not = npm_install(AI_CACHE, AI_VERSION, package / "dist" / "index.mjs")
    if why_not is not None:
        pytest.skip(f"needs the ai npm package ({why_not})")
    return package


def run_node(ai_package: Path, scenario: str, base: str, chat_id: str) -> dict[str, Any]:
    done = subprocess.run(
        ["node", str(SCRIPT), str(ai_package), scenario, base, ALICE, chat_id],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def ask(client: httpx.Client, chat_id: str, text: str = "Pay Alice $20") -> httpx.Response:
    body = {
        "id": chat_id,
        "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}],
    }
    return client.post("/v1/aisdk/chat", json=body)


def chunks_of(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    data = sse_data(response)
    assert data[-1] == "[DONE]"
    return [json.loads(d) for d in data[:-1]]


def answer(chat_id: str, tool_call_id: str, approval: dict[str, Any]) -> dict[str, Any]:
    part = {
        "type": "tool-send_payment",
        "toolCallId": tool_call_id,
        "state": "approval-responded",
        "input": {},
        "approval": approval,
    }
    return {
        "id": chat_id,
        "trigger": "submit-message",
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Pay Alice $20"}]},
            {"id": "a1", "role": "assistant", "parts": [part]},
        ],
    }


def approval_request(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    return next(c for c in chunks if c["type"] == "tool-approval-request")


# ------------------------------------------------- the SDK's own client, in node


@pytest.mark.slow
def test_use_chat_asks_approves_and_the_payment_is_sent(server: Served, ai_package: Path) -> None:
    chat_id = new_id()
    result = run_node(ai_package, "approve", server.base, chat_id)
    assert result["status"] == "ready" and result["errors"] == []
    # a reload gets the very ids the SDK holds (its own for the question)
    stored = server.alice.get(f"/v1/aisdk/chat/{chat_id}/messages").json()
    assert [m["id"] for m in stored] == [m["id"] for m in result["messages"]]
    asked = result["asked"][-1]["parts"]
    payment = next(p for p in asked if p["type"] == "tool-send_payment")
    assert payment["state"] == "approval-requested"
    assert payment["input"] == {"to_account": "acct_alice_01", "amount_usd": 20.0, "memo": ""}
    assert payment["approval"]["id"].count(".") == 2  # the server's signed id, not the attempt
    messages = result["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    parts = messages[-1]["parts"]
    sent = next(p for p in parts if p["type"] == "tool-send_payment")
    assert sent["state"] == "output-available"
    assert sent["output"]["status"] == "sent"
    assert parts[-1]["type"] == "text" and "Done: $20.00" in parts[-1]["text"]
    assert writes_of(server.alice, chat_id) == 1


@pytest.mark.slow
def test_use_chat_rejects_and_the_part_is_denied(server: Served, ai_package: Path) -> None:
    chat_id = new_id()
    result = run_node(ai_package, "reject", server.base, chat_id)
    assert result["status"] == "ready" and result["errors"] == []
    parts = result["messages"][-1]["parts"]
    denied = next(p for p in parts if p["type"] == "tool-send_payment")
    assert denied["state"] == "output-denied"
    assert denied["approval"]["approved"] is False
    assert "did not go through" in parts[-1]["text"]
    assert writes_of(server.alice, chat_id) == 0


@pytest.mark.slow
def test_every_chunk_passes_the_sdk_schema_and_folds_into_a_message(
    server: Served, ai_package: Path
) -> None:
    result = run_node(ai_package, "chunks", server.base, new_id())
    assert result["header"] == "v1"
    assert result["invalid"] == []
    kinds = [c["type"] for c in result["chunks"]]
    assert kinds[0] == "start" and kinds[-1] == "finish"
    parts = result["message"]["parts"]
    # one step per model call, with the tools it asked for
    assert [p["type"] for p in parts] == [
        "step-start",
        "reasoning",
        "text",
        "tool-get_balance",
        "tool-lookup_contact",
        "step-start",
        "text",
        "tool-send_payment",
    ]
    assert set(parts[3]["output"]) == {"balance_usd"}
    assert parts[-1]["state"] == "approval-requested"


@pytest.mark.slow
@pytest.mark.parametrize("where", ["same worker", "another worker"])
def test_resume_follows_the_live_run_after_the_tab_went_away(
    ai_package: Path, tmp_path: Path, where: str
) -> None:
    gate = threading.Event()
    with two_workers(gated_agent(gate), tmp_path) as (first, second):
        server = first if where == "same worker" else second
        chat_id = new_id()
        body = {
            "id": chat_id,
            "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
            "cancelOnAbort": False,  # a chat that resumes: its closed tab is a disconnect
        }
        with first.alice.stream("POST", "/v1/aisdk/chat", json=body) as response:
            assert response.status_code == 200
            line = next(response.iter_lines())  # the tab reads a little, then reloads
            assert line.startswith("data: ")
        lines: queue.Queue[str] = queue.Queue()
        command = ["node", str(SCRIPT), str(ai_package), "resume", server.base, ALICE, chat_id]
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        ) as node:

            def read() -> None:
                assert node.stdout is not None
                for line in node.stdout:
                    lines.put(line)

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            try:
                assert lines.get(timeout=60).strip() == "FOLLOWING"
                gate.set()
                node.wait(timeout=60)
                reader.join(timeout=10)
            finally:
                gate.set()
                if node.poll() is None:
                    node.kill()
                    node.wait(timeout=10)
        assert node.returncode == 0
        result = json.loads(lines.get(timeout=5))
        assert result["status"] == "ready" and result["errors"] == []
        parts = result["messages"][-1]["parts"]
        waited = next(p for p in parts if p["type"] == "tool-wait_here")
        assert waited["state"] == "output-available" and waited["output"] == {"opened": True}
        assert parts[-1] == {"type": "text", "text": "released", "state": "done"}
        assert [d["type"] for d in result["data"]] == ["data-tool-progress"]
        # nothing runs any more: a resume now is the SDK's 204
        assert server.alice.get(f"/v1/aisdk/chat/{chat_id}/stream").status_code == 204


# ------------------------------------------------------- the chunk sequence


def test_approval_round_trip_streams_the_output(server: Served) -> None:
    chat_id = new_id()
    chunks = chunks_of(ask(server.alice, chat_id))
    request = approval_request(chunks)
    available = [c for c in chunks if c["type"] == "tool-input-available"]
    assert available[-1]["toolCallId"] == request["toolCallId"]
    assert chunks.index(available[-1]) < chunks.index(request)
    assert chunks[-1]["finishReason"] == "tool-calls"
    approved = {"id": request["approvalId"], "approved": True}
    response = server.alice.post(
        "/v1/aisdk/chat", json=answer(chat_id, request["toolCallId"], approved)
    )
    after = chunks_of(response)
    kinds = [c["type"] for c in after]
    assert kinds[0] == "start"
    # the client shows the call already: no new tool-input chunks for it
    assert "tool-input-start" not in kinds and "tool-input-available" not in kinds
    output = next(c for c in after if c["type"] == "tool-output-available")
    assert output["toolCallId"] == request["toolCallId"]
    assert output["output"]["status"] == "sent"
    assert after[-1]["type"] == "finish" and after[-1]["finishReason"] == "stop"
    # the same approval again: refused, and the payment ran once
    again = server.alice.post(
        "/v1/aisdk/chat", json=answer(chat_id, request["toolCallId"], approved)
    )
    assert again.status_code == 409, again.text
    assert writes_of(server.alice, chat_id) == 1


def test_rejection_streams_tool_output_denied(server: Served) -> None:
    chat_id = new_id()
    request = approval_request(chunks_of(ask(server.alice, chat_id)))
    rejected = {"id": request["approvalId"], "approved": False, "reason": "not today"}
    after = chunks_of(
        server.alice.post("/v1/aisdk/chat", json=answer(chat_id, request["toolCallId"], rejected))
    )
    denied = [c for c in after if c["type"] == "tool-output-denied"]
    assert denied == [{"type": "tool-output-denied", "toolCallId": request["toolCallId"]}]
    assert not any(c["type"] in ("tool-output-available", "tool-output-error") for c in after)
    text = "".join(c["delta"] for c in after if c["type"] == "text-delta")
    assert "not today" in text
    assert writes_of(server.alice, chat_id) == 0


def test_a_second_turn_continues_the_same_session(server: Served) -> None:
    chat_id = new_id()
    request = approval_request(chunks_of(ask(server.alice, chat_id)))
    rejected = {"id": request["approvalId"], "approved": False}
    chunks_of(
        server.alice.post("/v1/aisdk/chat", json=answer(chat_id, request["toolCallId"], rejected))
    )
    chunks_of(ask(server.alice, chat_id, "Pay Alice $5"))
    state = server.alice.get(f"/v1/sessions/{chat_id}/state").json()
    users = [m for m in state["messages"] if m["role"] == "user"]
    assert len(users) == 2
    assert state["turn_index"] == 2


def test_regenerate_asks_the_last_question_again(server: Served) -> None:
    chat_id = new_id()
    gate_chunks = chunks_of(ask(server.alice, chat_id, "What can you do?"))
    assert gate_chunks[-1]["type"] == "finish"
    body = {
        "id": chat_id,
        "trigger": "regenerate-message",
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "What can you do?"}]}
        ],
    }
    again = chunks_of(server.alice.post("/v1/aisdk/chat", json=body))
    assert again[-1]["type"] == "finish"
    assert server.alice.get(f"/v1/sessions/{chat_id}").json()["turn_index"] == 2


def test_resume_with_nothing_running_is_204(server: Served) -> None:
    chat_id = new_id()
    chunks_of(ask(server.alice, chat_id))
    assert server.alice.get(f"/v1/aisdk/chat/{chat_id}/stream").status_code == 204


# ------------------------------------------------------------- refusals


def test_no_credential_is_401_on_both_routes(server: Served) -> None:
    assert ask(server.anonymous, new_id()).status_code == 401
    assert server.anonymous.get(f"/v1/aisdk/chat/{new_id()}/stream").status_code == 401


def test_another_principals_chat_is_404(server: Served) -> None:
    chat_id = new_id()
    request = approval_request(chunks_of(ask(server.alice, chat_id)))
    assert ask(server.bob, chat_id).status_code == 404
    assert server.bob.get(f"/v1/aisdk/chat/{chat_id}/stream").status_code == 404
    approved = {"id": request["approvalId"], "approved": True}
    stolen = server.bob.post(
        "/v1/aisdk/chat", json=answer(chat_id, request["toolCallId"], approved)
    )
    assert stolen.status_code == 404
    assert writes_of(server.alice, chat_id) == 0
    assert server.alice.get(f"/v1/sessions/{chat_id}/pending").json()["pending"] is not None


def _user(text: object) -> dict[str, object]:
    return {"id": "u", "role": "user", "parts": [{"type": "text", "text": text}]}


BAD_BODIES: list[tuple[str, object, int]] = [
    ("not an object", [1, 2], 422),
    ("no id", {"messages": [_user("hi")]}, 422),
    ("id with a slash", {"id": "a/b", "messages": [_user("hi")]}, 422),
    ("id too long", {"id": "a" * 129, "messages": [_user("hi")]}, 422),
    ("no messages", {"id": "c", "messages": []}, 422),
    ("messages not a list", {"id": "c", "messages": "hi"}, 422),
    ("unknown role", {"id": "c", "messages": [{"role": "tool", "parts": []}]}, 422),
    ("unknown trigger", {"id": "c", "messages": [_user("hi")], "trigger": "resume"}, 422),
    ("text not a string", {"id": "c", "messages": [_user(5)]}, 422),
    ("no text part", {"id": "c", "messages": [{"role": "user", "parts": []}]}, 400),
    ("blank text", {"id": "c", "messages": [_user("   ")]}, 400),
    ("system last", {"id": "c", "messages": [{"role": "system", "parts": []}]}, 400),
    (
        "assistant last, no answer",
        {"id": "c", "messages": [{"role": "assistant", "parts": []}]},
        400,
    ),
]


@pytest.mark.parametrize(("case", "body", "status"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_bad_bodies_are_clear_4xx(server: Served, case: str, body: object, status: int) -> None:
    if isinstance(body, dict) and body.get("id") == "c":
        body = {**body, "id": new_id()}
    response = server.alice.post("/v1/aisdk/chat", json=body)
    assert response.status_code == status, (case, response.text)
    assert response.json()["error"]["message"]


def test_bad_approval_answers_leave_the_action_pending(server: Served) -> None:
    chat_id = new_id()
    request = approval_request(chunks_of(ask(server.alice, chat_id)))
    call = request["toolCallId"]
    token = request["approvalId"]
    attempt, digest, _mac = token.split(".")
    forged = f"{attempt}.{digest}.{'A' * 43}"
    cases = [
        ({"id": forged, "approved": True}, 403),
        ({"id": "not-a-token", "approved": True}, 403),
        ({"id": f"{forged}~1", "approved": True}, 403),  # a showing's mark adds nothing
        ({"id": token}, 400),  # no answer
        ({"id": token, "approved": "yes please"}, 422),
        ({"id": token, "approved": "true"}, 422),
        ({"id": token, "approved": 1}, 422),
        ({"approved": True}, 422),  # no id
    ]
    for approval, status in cases:
        response = server.alice.post("/v1/aisdk/chat", json=answer(chat_id, call, approval))
        assert response.status_code == status, (approval, response.text)
    two = answer(chat_id, call, {"id": token, "approved": True})
    two["messages"][-1]["parts"] *= 2
    assert server.alice.post("/v1/aisdk/chat", json=two).status_code == 400
    # a new question while the action waits: the same approval, shown again
    again = approval_request(chunks_of(ask(server.alice, chat_id)))
    assert again["toolCallId"] == call
    # nothing was decided or written; the real answer still works
    assert writes_of(server.alice, chat_id) == 0
    ok = server.alice.post(
        "/v1/aisdk/chat", json=answer(chat_id, call, {"id": token, "approved": True})
    )
    assert any(c["type"] == "tool-output-available" for c in chunks_of(ok))


def test_bad_resume_ids_are_4xx(server: Served) -> None:
    assert server.alice.get("/v1/aisdk/chat/a.b/stream").status_code == 422
    assert server.alice.get(f"/v1/aisdk/chat/{'x' * 129}/stream").status_code == 422


def test_resume_of_a_chat_not_used_yet_is_204_and_creates_nothing(server: Served) -> None:
    chat_id = new_id()  # useChat({resume: true}) mounts before the first message
    assert server.alice.get(f"/v1/aisdk/chat/{chat_id}/stream").status_code == 204
    assert server.alice.get(f"/v1/sessions/{chat_id}").status_code == 404


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
                        "id",
                        "messages",
                        "role",
                        "parts",
                        "type",
                        "text",
                        "trigger",
                        "state",
                        "approval",
                        "approved",
                        "toolCallId",
                        "data",
                        "edits",
                        "approvalId",
                        "messageId",
                        "cancelOnAbort",
                    ]
                ),
                children,
                max_size=5,
            )
        ),
        max_leaves=20,
    )
)
def test_no_body_makes_a_500(server: Served, body: object) -> None:
    response = server.alice.post("/v1/aisdk/chat", json=body)
    assert 200 <= response.status_code < 500, response.text
    if response.status_code == 200:
        response.read()


# ------------------------------------------------------ the mapper's grammar


def check_step(kind: str, in_step: bool, part_open: bool) -> bool:
    """Steps do not nest, hold every text/reasoning part and streamed call; the new state."""
    if kind == "start-step":
        assert not in_step and not part_open
        return True
    if kind == "finish-step":
        assert in_step and not part_open
        return False
    if kind.startswith(("text-", "reasoning-")) or kind == "tool-input-delta":
        assert in_step, f"{kind} outside a step"
    return in_step


def check_grammar(chunks: list[dict[str, Any]]) -> None:
    """The chunk grammar the SDK's reader relies on."""
    assert chunks[0]["type"] == "start"
    assert [c["type"] for c in chunks].count("start") == 1
    open_parts: dict[str, str] = {}
    in_step = False
    inputs_started: set[str] = set()
    inputs_done: set[str] = set()
    for chunk in chunks:
        json.dumps(chunk)
        kind = chunk["type"]
        in_step = check_step(kind, in_step, bool(open_parts))
        for family in ("text", "reasoning"):
            if kind == f"{family}-start":
                assert not open_parts, "one text or reasoning part open at a time"
                open_parts[chunk["id"]] = family
            elif kind in (f"{family}-delta", f"{family}-end"):
                assert open_parts.get(chunk["id"]) == family
                if kind.endswith("-end"):
                    del open_parts[chunk["id"]]
        if kind.startswith("tool-"):
            call = chunk["toolCallId"]
            if kind == "tool-input-start":
                inputs_started.add(call)
            elif kind == "tool-input-delta":
                assert call in inputs_started and call not in inputs_done
            elif kind == "tool-input-available":
                assert call in inputs_started
                inputs_done.add(call)
            else:
                assert call in inputs_done, f"{kind} before the call's input"
            assert not open_parts
        if kind in ("finish", "error"):
            assert not open_parts and not in_step
    assert not open_parts and not in_step


@settings(max_examples=150, deadline=None, database=None)
@given(events=st.lists(any_event, max_size=30), replay=st.booleans())
def test_any_event_sequence_maps_to_a_well_formed_chunk_stream(
    events: list[Event], replay: bool
) -> None:
    mapper = UIMessageStream(session_id="s", replay=replay)
    chunks: list[dict[str, Any]] = []
    for event in events:
        chunks += mapper.chunks(event)
    chunks += mapper.end()
    if not chunks:
        chunks = mapper._start()
    check_grammar(chunks)


def _continuation(decision: Approve | Reject) -> list[Event]:
    return [
        StreamStarted(stream_id="st", session_id="s"),
        *(
            [ToolStart(tool_use_id="c1", name="pay", input={"x": 1})]
            if isinstance(decision, Approve)
            else []
        ),
        ToolResult(
            tool_use_id="c1", name="pay", content="ok", is_error=isinstance(decision, Reject)
        ),
        ToolCallDelta(tool_use_id="c2", name="more", index=0, args_delta="{}"),
        PendingAction(
            attempt_id="a2", tool_use_id="c2", turn_index=0, name="more", input={}, description=""
        ),
        TextDelta(text="x"),
        TurnComplete(stop_reason="pending_action"),
    ]


@pytest.mark.parametrize("decision", [Approve(), Reject()], ids=["approve", "reject"])
def test_a_replayed_continuation_announces_the_decided_call_again(
    decision: Approve | Reject,
) -> None:
    calls = {"c1": ("pay", {"x": 1})}
    replay = UIMessageStream(session_id="s", replay=True, calls=calls)
    live = UIMessageStream(session_id="s", decided=("c1", decision))
    replayed = [c for e in _continuation(decision) for c in replay.chunks(e)]
    streamed = [c for e in _continuation(decision) for c in live.chunks(e)]
    check_grammar(replayed)
    announced = [
        c for c in replayed if c["type"] == "tool-input-available" and c["toolCallId"] == "c1"
    ]
    assert announced == [
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "pay", "input": {"x": 1}}
    ]
    assert not any(
        c.get("toolCallId") == "c1" and str(c["type"]).startswith("tool-input") for c in streamed
    )
    final = "tool-output-available" if isinstance(decision, Approve) else "tool-output-denied"
    for chunks in (replayed, streamed):
        assert [c["type"] for c in chunks if c.get("toolCallId") == "c1"][-1] == final


# ------------------------------------------------------ a client-executed tool


@pytest.mark.parametrize("failed", [False, True], ids=["output", "error"])
def test_a_client_tool_runs_in_the_browser_and_its_output_continues_the_turn(
    failed: bool,
) -> None:
    with served(signing_agent()) as server:
        chat_id = new_id()
        chunks = chunks_of(ask(server.alice, chat_id, "sign it"))
        kinds = [c["type"] for c in chunks]
        # the SDK's onToolCall runs it: no approval is asked for
        assert "tool-approval-request" not in kinds
        call = next(c for c in chunks if c["type"] == "tool-input-available")
        assert call["toolName"] == "sign_transaction"
        assert call["input"] == {"to": "0xabc", "amount_usd": 1.0}
        assert chunks[-1]["finishReason"] == "tool-calls"
        part: dict[str, Any] = {
            "type": "tool-sign_transaction",
            "toolCallId": call["toolCallId"],
            "input": call["input"],
        }
        if failed:
            part |= {"state": "output-error", "errorText": "user closed the wallet"}
        else:
            part |= {"state": "output-available", "output": {"tx": "0xdeadbeef"}}
        body = {
            "id": chat_id,
            "messages": [
                {"id": "u", "role": "user", "parts": [{"type": "text", "text": "sign it"}]},
                {"id": "a", "role": "assistant", "parts": [part]},
            ],
        }
        after = chunks_of(server.alice.post("/v1/aisdk/chat", json=body))
        final = "tool-output-error" if failed else "tool-output-available"
        assert [c["type"] for c in after if c.get("toolCallId") == call["toolCallId"]] == [final]
        text = "".join(c["delta"] for c in after if c["type"] == "text-delta")
        expected = "user closed the wallet (error: True)" if failed else "0xdeadbeef"
        assert expected in text
        # the same output again: nothing waits for it any more
        assert server.alice.post("/v1/aisdk/chat", json=body).status_code == 400


@pytest.mark.slow
def test_use_chat_runs_a_client_tool_in_the_browser_and_sends_its_output(
    ai_package: Path,
) -> None:
    with served(signing_agent()) as server:
        chat_id = new_id()
        result = run_node(ai_package, "client-tool", server.base, chat_id)
        assert result["status"] == "ready" and result["errors"] == []
        assert [m["role"] for m in result["messages"]] == ["user", "assistant"]
        parts = result["messages"][-1]["parts"]
        signed = next(p for p in parts if p["type"] == "tool-sign_transaction")
        assert signed["state"] == "output-available"
        assert signed["output"] == {"tx": "0xdeadbeef", "to": "0xabc"}
        assert "0xdeadbeef" in parts[-1]["text"] and "(error: False)" in parts[-1]["text"]
        assert server.alice.get(f"/v1/sessions/{chat_id}/pending").json()["pending"] is None


# ------------------------------------------- a question while an approval waits


def test_a_question_while_an_approval_waits_shows_the_approval_again(server: Served) -> None:
    chat_id = new_id()
    request = approval_request(chunks_of(ask(server.alice, chat_id)))
    turns = server.alice.get(f"/v1/sessions/{chat_id}").json()["turn_index"]
    shown = chunks_of(ask(server.alice, chat_id, "how much was it again?"))
    assert (
        approval_request(chunks_of(ask(server.alice, chat_id, "and?")))["approvalId"]
        != (approval_request(shown)["approvalId"])
    )
    check_grammar(shown)
    assert [c["type"] for c in shown] == [
        "start",
        "start-step",
        "tool-input-start",
        "tool-input-available",
        "tool-approval-request",
        "finish-step",
        "finish",
    ]
    again = approval_request(shown)
    # its own id (so the SDK answers the copy clicked), the same signed id before the mark
    assert again["approvalId"] != request["approvalId"]
    assert again["approvalId"].startswith(request["approvalId"] + "~")
    assert {**again, "approvalId": request["approvalId"]} == request
    available = next(c for c in shown if c["type"] == "tool-input-available")
    assert available["input"]["amount_usd"] == 20.0
    assert shown[-1]["finishReason"] == "tool-calls"
    # nothing ran, nothing was added to the conversation; the approval still works
    assert server.alice.get(f"/v1/sessions/{chat_id}").json()["turn_index"] == turns
    approved = {"id": again["approvalId"], "approved": True}
    after = chunks_of(
        server.alice.post("/v1/aisdk/chat", json=answer(chat_id, request["toolCallId"], approved))
    )
    assert any(c["type"] == "tool-output-available" for c in after)
    assert writes_of(server.alice, chat_id) == 1
    # decided once: the first showing's id is spent as well
    first = {"id": request["approvalId"], "approved": True}
    late = server.alice.post("/v1/aisdk/chat", json=answer(chat_id, request["toolCallId"], first))
    assert late.status_code == 409
    assert writes_of(server.alice, chat_id) == 1


def test_by_option_a_question_rejects_the_waiting_approval_and_goes_on() -> None:
    config = ServerConfig(api_keys=dict(KEYS), aisdk_while_pending="reject")
    with served(config=config) as server:
        chat_id = new_id()
        request = approval_request(chunks_of(ask(server.alice, chat_id)))
        after = chunks_of(ask(server.alice, chat_id, "no, pay Bob instead"))
        check_grammar(after)
        call = request["toolCallId"]
        # a new assistant message in useChat: the call is announced, then denied
        assert [c["type"] for c in after if c.get("toolCallId") == call] == [
            "tool-input-start",
            "tool-input-available",
            "tool-output-denied",
        ]
        text = "".join(c["delta"] for c in after if c["type"] == "text-delta")
        assert "no, pay Bob instead" in text
        assert after[-1]["finishReason"] == "stop"
        assert writes_of(server.alice, chat_id) == 0
        assert server.alice.get(f"/v1/sessions/{chat_id}/pending").json()["pending"] is None
        # the old approval id is spent
        approved = {"id": request["approvalId"], "approved": True}
        late = server.alice.post("/v1/aisdk/chat", json=answer(chat_id, call, approved))
        assert late.status_code == 409, late.text
        assert writes_of(server.alice, chat_id) == 0


def test_an_unknown_while_pending_option_is_refused() -> None:
    with pytest.raises(ConfigError, match="aisdk_while_pending"):
        ServerConfig(api_keys=dict(KEYS), aisdk_while_pending="queue")  # type: ignore[arg-type]  # the bad value under test


# ------------------------------------------------------ approving with edits


def edited(chat_id: str, request: dict[str, Any], data: object, approved: bool = True) -> Any:
    body = answer(
        chat_id, request["toolCallId"], {"id": request["approvalId"], "approved": approved}
    )
    body["messages"][-1]["parts"].append({"type": "data-approval-edits", "data": data})
    return body


def test_an_approval_carries_edits_of_the_modifiable_fields(server: Served) -> None:
    chat_id = new_id()
    request = approval_request(chunks_of(ask(server.alice, chat_id)))
    assert request["approvalDescriptor"] == {"modifiableFields": ["amount_usd", "memo"]}
    data = {"approvalId": request["approvalId"], "edits": {"amount_usd": 15.0, "memo": "lunch"}}
    after = chunks_of(server.alice.post("/v1/aisdk/chat", json=edited(chat_id, request, data)))
    output = next(c for c in after if c["type"] == "tool-output-available")
    assert output["output"]["amount_usd"] == 15.0
    text = "".join(c["delta"] for c in after if c["type"] == "text-delta")
    assert "Done: $15.00" in text
    assert writes_of(server.alice, chat_id) == 1


def test_bad_edits_are_refused_and_the_action_still_waits(server: Served) -> None:
    chat_id = new_id()
    request = approval_request(chunks_of(ask(server.alice, chat_id)))
    token = request["approvalId"]
    cases: list[tuple[object, bool, int]] = [
        ({"approvalId": token, "edits": {"to_account": "acct_mallory"}}, True, 422),
        ({"approvalId": token, "edits": {"amount_usd": 15.0}}, False, 400),  # with a rejection
        ({"approvalId": "another", "edits": {"amount_usd": 15.0}}, True, 400),
        ({"approvalId": token, "edits": [15.0]}, True, 400),
        ({"approvalId": token}, True, 400),
        ("amount_usd=15", True, 400),
    ]
    for data, approved, status in cases:
        body = edited(chat_id, request, data, approved)
        response = server.alice.post("/v1/aisdk/chat", json=body)
        assert response.status_code == status, (data, response.text)
        assert response.json()["error"]["message"]
    two = edited(chat_id, request, {"approvalId": token, "edits": {"amount_usd": 15.0}})
    two["messages"][-1]["parts"].append(two["messages"][-1]["parts"][-1])
    assert server.alice.post("/v1/aisdk/chat", json=two).status_code == 400
    assert writes_of(server.alice, chat_id) == 0
    pending = server.alice.get(f"/v1/sessions/{chat_id}/pending").json()["pending"]
    assert (
        pending["input"]["amount_usd"] == 20.0 and pending["input"]["to_account"] == "acct_alice_01"
    )


# ------------------------------------------------ the conversation as UIMessage[]


def test_the_conversation_comes_back_as_ui_messages() -> None:
    with served() as server:
        conversation_comes_back(server)


def conversation_comes_back(server: Served) -> None:
    chat_id = new_id()
    assert server.alice.get(f"/v1/aisdk/chat/{chat_id}/messages").json() == []
    streamed = chunks_of(ask(server.alice, chat_id))
    request = approval_request(streamed)
    messages = server.alice.get(f"/v1/aisdk/chat/{chat_id}/messages").json()
    assert [m["role"] for m in messages] == ["user", "assistant"]
    # the ids the chat holds: its own for the question, the stream's for the reply
    assert messages[0]["id"] == "u1"
    assert streamed[0]["type"] == "start" and streamed[0]["messageId"] == messages[1]["id"]
    assert messages[0]["parts"] == [{"type": "text", "text": "Pay Alice $20", "state": "done"}]
    parts = messages[1]["parts"]
    assert [p["type"] for p in parts] == [
        "step-start",
        "reasoning",
        "text",
        "tool-get_balance",
        "tool-lookup_contact",
        "step-start",
        "text",
        "tool-send_payment",
    ]
    assert parts[3]["state"] == "output-available" and set(parts[3]["output"]) == {"balance_usd"}
    waiting = parts[-1]
    assert waiting["state"] == "approval-requested"
    assert waiting["approval"] == {"id": request["approvalId"]}
    assert waiting["toolCallId"] == request["toolCallId"]
    # answered: it ran; a second question is a message of its own; ids stay put
    approved = {"id": request["approvalId"], "approved": True}
    chunks_of(
        server.alice.post("/v1/aisdk/chat", json=answer(chat_id, request["toolCallId"], approved))
    )
    second = approval_request(chunks_of(ask(server.alice, chat_id, "Pay Alice $25")))
    rejected = {"id": second["approvalId"], "approved": False, "reason": "enough for today"}
    chunks_of(
        server.alice.post("/v1/aisdk/chat", json=answer(chat_id, second["toolCallId"], rejected))
    )
    later = server.alice.get(f"/v1/aisdk/chat/{chat_id}/messages").json()
    assert [m["role"] for m in later] == ["user", "assistant", "user", "assistant"]
    assert later[0]["id"] == messages[0]["id"] and later[1]["id"] == messages[1]["id"]
    # the second question reused the client id "u1": it gets one of its own, never a twin
    assert len({m["id"] for m in later}) == 4 and later[2]["id"] != "u1"
    first_parts = later[1]["parts"]
    sent = next(p for p in first_parts if p["type"] == "tool-send_payment")
    assert sent["state"] == "output-available" and sent["output"]["status"] == "sent"
    assert "Done: $20.00" in first_parts[-1]["text"]
    denied = next(p for p in later[3]["parts"] if p["type"] == "tool-send_payment")
    assert denied["state"] == "output-denied"
    assert denied["approval"]["approved"] is False
    assert denied["approval"]["reason"] == "enough for today"


def test_history_ids_keep_the_clients_own_and_never_repeat() -> None:
    from mainspring.server._aisdk_history import last_reply_id, reply_to, ui_messages

    def user(text: str, client_id: str | None = None) -> Message:
        meta: dict[str, JsonValue] = {"client_id": client_id} if client_id else {}
        return Message(role="user", parts=(TextPart(text=text),), meta=meta)

    history = [user("a", "x"), Message.assistant("A"), user("b", "m0"), Message.assistant("B")]
    history += [user("c", "x"), Message.assistant("C"), user("d")]
    ids = [cast(dict[str, Any], m)["id"] for m in ui_messages(history)]
    # the second "x" and a client id shaped like a position yield to what came first
    assert ids == ["x", "x.r", "m0", "m0.r", "m4", "m4.r", "m6"]
    assert last_reply_id(history) == "m6.r"
    assert last_reply_id([]) is None
    assert reply_to(history, "x") == "m7.r" and reply_to(history, "y") == "y.r"
    # a client naming its message as a later position still never makes a twin
    tricky = [user("a", "m2"), Message.assistant("A"), user("b"), Message.assistant("B")]
    tricky += [user("c", "m2.r"), Message.assistant("C"), user("d", "m6.r"), user("e")]
    tricky_ids = [cast(dict[str, Any], m)["id"] for m in ui_messages(tricky)]
    assert len(set(tricky_ids)) == len(tricky_ids) == 8


def test_conversation_route_refusals(server: Served) -> None:
    chat_id = new_id()
    chunks_of(ask(server.alice, chat_id))
    assert server.bob.get(f"/v1/aisdk/chat/{chat_id}/messages").status_code == 404
    assert server.anonymous.get(f"/v1/aisdk/chat/{chat_id}/messages").status_code == 401
    assert server.alice.get("/v1/aisdk/chat/a.b/messages").status_code == 422
    assert server.alice.get(f"/v1/aisdk/chat/{'x' * 129}/messages").status_code == 422


def test_the_engine_words_rejections_and_edit_notes_as_the_history_reads_them() -> None:
    from mainspring._run.results import EDITED_NOTE_START

    assert aisdk_history.EDITED_NOTE_START == EDITED_NOTE_START
    content = '[the approver edited the arguments: the call ran with {"a": 1}]\n\n{"ok": true}'
    assert aisdk_history.tool_output(content) == {"ok": True}
    assert aisdk_history.tool_output("plain words") == "plain words"


# ------------------------------------------------ a client abort cancels the run


def stuck_agent(gate: threading.Event) -> Agent:
    """Like ``gated_agent``, but its wait ends at once when the run is cancelled."""

    @tool(read_only=True)
    async def wait_here(ctx: ToolContext) -> str:
        """Wait until the test opens the gate (or the run is cancelled)."""
        ctx.progress("waiting for the gate")
        opened = await anyio.to_thread.run_sync(gate.wait, 30.0, abandon_on_cancel=True)
        return json.dumps({"opened": opened})

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse | str:
        if messages[-1].role == "tool":
            return "released"
        return ScriptedResponse(text="Waiting.", tool_calls=[ScriptedCall("wait_here", {})])

    return Agent(
        name="stuck",
        model=ScriptedModel(script),
        tools=[wait_here],
        permissions=PermissionRules(allow=("*",)),
    )


def go(chat_id: str, **extra: object) -> dict[str, object]:
    user = {"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]}
    return {"id": chat_id, "messages": [user], **extra}


def read_one_chunk_and_leave(client: httpx.Client, method: str, url: str, **kw: Any) -> None:
    with client.stream(method, url, **kw) as response:
        assert response.status_code == 200
        assert next(response.iter_lines()).startswith("data: ")


def ended_cancelled(server: Served, chat_id: str) -> None:
    """Follow the run to its end (without cancelling it): it was cancelled, never released."""
    end = server.alice.get(f"/v1/aisdk/chat/{chat_id}/stream", params={"cancelOnAbort": "false"})
    if end.status_code == 200:
        assert chunks_of(end)[-1]["messageMetadata"]["stopReason"] == "cancelled"
    else:
        assert end.status_code == 204
    state = server.alice.get(f"/v1/sessions/{chat_id}/state").json()
    texts = json.dumps([m for m in state["messages"] if m["role"] == "assistant"])
    assert "released" not in texts


@pytest.mark.slow
@pytest.mark.parametrize("where", ["the chat request", "a resume on another worker"])
def test_a_client_abort_cancels_the_server_run(tmp_path: Path, where: str) -> None:
    gate = threading.Event()
    try:
        with two_workers(stuck_agent(gate), tmp_path) as (first, second):
            chat_id = new_id()
            if where == "the chat request":
                read_one_chunk_and_leave(first.alice, "POST", "/v1/aisdk/chat", json=go(chat_id))
            else:  # the tab reloaded (a disconnect), resumed elsewhere, then stopped
                body = go(chat_id, cancelOnAbort=False)
                read_one_chunk_and_leave(first.alice, "POST", "/v1/aisdk/chat", json=body)
                read_one_chunk_and_leave(second.alice, "GET", f"/v1/aisdk/chat/{chat_id}/stream")
            ended_cancelled(first, chat_id)
    finally:
        gate.set()


def test_with_the_option_off_an_abort_leaves_the_run_going(tmp_path: Path) -> None:
    gate = threading.Event()
    config = ServerConfig(api_keys=dict(KEYS), aisdk_abort_cancels=False)
    try:
        with served(stuck_agent(gate), config) as server:
            chat_id = new_id()
            read_one_chunk_and_leave(server.alice, "POST", "/v1/aisdk/chat", json=go(chat_id))
            with server.alice.stream("GET", f"/v1/aisdk/chat/{chat_id}/stream") as following:
                assert following.status_code == 200
                lines = following.iter_lines()
                assert next(lines).startswith("data: ")
                gate.set()
                rest = [line for line in lines if line.startswith("data: ")]
            assert rest[-1] == "data: [DONE]"
            finish = json.loads(rest[-2][len("data: ") :])
            assert finish["messageMetadata"]["stopReason"] == "end_turn"
    finally:
        gate.set()


# ------------------------------------------- the same, through the SDK's own client


@pytest.mark.slow
def test_use_chat_is_not_stuck_when_it_asks_while_an_approval_waits(
    server: Served, ai_package: Path
) -> None:
    chat_id = new_id()
    result = run_node(ai_package, "while-pending", server.base, chat_id)
    assert result["status"] == "ready" and result["errors"] == []
    asked = result["asked"]
    assert [m["role"] for m in asked] == ["user", "assistant", "user", "assistant"]
    shown = [p for p in asked[-1]["parts"] if p["type"] == "tool-send_payment"]
    assert [p["state"] for p in shown] == ["approval-requested"]
    # the copy shown again has an id of its own: the SDK answers it, sends on its
    # own (sendAutomaticallyWhen), and the turn goes on in that message
    messages = result["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    parts = messages[-1]["parts"]
    sent = next(p for p in parts if p["type"] == "tool-send_payment")
    assert sent["state"] == "output-available" and sent["output"]["status"] == "sent"
    assert "Done: $20.00" in parts[-1]["text"]
    assert writes_of(server.alice, chat_id) == 1


@pytest.mark.slow
def test_use_chat_restores_a_chat_from_its_ui_messages_and_answers_the_approval(
    server: Served, ai_package: Path
) -> None:
    chat_id = new_id()
    request = approval_request(chunks_of(ask(server.alice, chat_id)))
    result = run_node(ai_package, "restore", server.base, chat_id)
    assert result["errors"] == [] and result["status"] == "ready"
    waiting = result["restored"][-1]["parts"][-1]
    assert waiting["state"] == "approval-requested"
    assert waiting["approval"]["id"] == request["approvalId"]
    parts = result["messages"][-1]["parts"]
    sent = next(p for p in parts if p["type"] == "tool-send_payment")
    assert sent["state"] == "output-available" and sent["output"]["status"] == "sent"
    assert writes_of(server.alice, chat_id) == 1


@pytest.mark.slow
def test_use_chat_approves_with_an_edit(server: Served, ai_package: Path) -> None:
    chat_id = new_id()
    result = run_node(ai_package, "edit", server.base, chat_id)
    assert result["status"] == "ready" and result["errors"] == []
    asked = result["asked"][-1]["parts"][-1]
    assert asked["approval"]["descriptor"] == {"modifiableFields": ["amount_usd", "memo"]}
    parts = result["messages"][-1]["parts"]
    sent = next(p for p in parts if p["type"] == "tool-send_payment")
    assert sent["output"]["amount_usd"] == 15.0
    assert "Done: $15.00" in parts[-1]["text"]
    assert writes_of(server.alice, chat_id) == 1


@pytest.mark.slow
def test_use_chat_stop_cancels_the_server_run(ai_package: Path) -> None:
    gate = threading.Event()
    try:
        with served(stuck_agent(gate)) as server:
            chat_id = new_id()
            result = run_node(ai_package, "stop", server.base, chat_id)
            assert result["status"] == "ready" and result["errors"] == []
            ended_cancelled(server, chat_id)
    finally:
        gate.set()


def test_by_option_a_question_rejects_a_waiting_client_tool_too() -> None:
    config = ServerConfig(api_keys=dict(KEYS), aisdk_while_pending="reject")
    with served(signing_agent(), config) as server:
        chat_id = new_id()
        call = next(
            c
            for c in chunks_of(ask(server.alice, chat_id, "sign it"))
            if c["type"] == "tool-input-available"
        )
        after = chunks_of(ask(server.alice, chat_id, "never mind"))
        check_grammar(after)
        kinds = [c["type"] for c in after if c.get("toolCallId") == call["toolCallId"]]
        assert kinds[-1] == "tool-output-denied"
        text = "".join(c["delta"] for c in after if c["type"] == "text-delta")
        assert "never mind" in text
        assert server.alice.get(f"/v1/sessions/{chat_id}/pending").json()["pending"] is None
