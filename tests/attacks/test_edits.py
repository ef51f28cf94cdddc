"""Hostile approval edits: NaN, Infinity, booleans and strings for numbers, raising amounts.

A person's edit is typed strictly (the model's arguments are coerced
leniently; an approver's are not): each bad edit is refused with
``InvalidEdits`` (422 on the server), nothing runs, and the attempt stays
open for a valid decision. An edit that runs is what the transcript says ran.
A USD amount function that raises on the model's input gives that call an
error result; the turn goes on.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from mainspring import (
    Agent,
    Approve,
    ErrorEvent,
    InvalidEdits,
    Message,
    PermissionRules,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolInputError,
    ToolResult,
    TurnComplete,
    tool,
    usd,
)
from mainspring.server import create_app
from mainspring.tools import Tool
from tests.helpers import pending_of, resume, send
from tests.server.conftest import client_for, config, read_sse
from tests.server.servers import serving

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the server runs on asyncio (uvicorn); the clients too


def payment(log: list[tuple[str, float]]) -> Tool:
    @tool(
        permission=usd(lambda args: float(str(args["amount_usd"]))),
        modifiable_fields=("amount_usd", "memo", "count", "tags"),
    )
    async def pay(
        to: str, amount_usd: float, memo: str = "", count: int = 1, tags: list[str] | None = None
    ) -> str:
        """Send money.

        Args:
            to: Recipient.
            amount_usd: Amount in USD.
            memo: A note.
            count: How many payments.
            tags: Labels.
        """
        log.append((to, amount_usd))
        return f"paid {to} ${amount_usd:g}"

    return pay


class Model:
    """Asks to pay ``amount`` once, then answers; keeps every request's messages."""

    def __init__(self, amount: float) -> None:
        self.amount = amount
        self.seen: list[Sequence[Message]] = []

    def __call__(self, messages: Sequence[Message], tools: object) -> ScriptedResponse | str:
        self.seen.append(list(messages))
        if messages[-1].role == "tool":
            return "done"
        call = ScriptedCall("pay", {"to": "alice", "amount_usd": self.amount})
        return ScriptedResponse(tool_calls=[call])


async def paused(amount: float = 500.0) -> tuple[Session, Any, list[tuple[str, float]], Model]:
    log: list[tuple[str, float]] = []
    model = Model(amount)
    session = Session(Agent(model=ScriptedModel(model), tools=[payment(log)]))
    pending = pending_of(await send(session, "pay alice"))
    return session, pending, log, model


BAD_EDITS = [
    pytest.param({"amount_usd": math.nan}, "amount_usd", id="nan"),
    pytest.param({"amount_usd": math.inf}, "amount_usd", id="infinity"),
    pytest.param({"amount_usd": -math.inf}, "amount_usd", id="minus-infinity"),
    pytest.param({"amount_usd": True}, "amount_usd", id="bool-for-number"),
    pytest.param({"amount_usd": "35"}, "amount_usd", id="string-for-number"),
    pytest.param({"count": False}, "count", id="bool-for-integer"),
    pytest.param({"count": "2"}, "count", id="string-for-integer"),
    pytest.param({"memo": 5}, "memo", id="number-for-string"),
    pytest.param({"tags": ["ok", math.nan]}, "tags", id="nested-nan"),
    pytest.param({"memo": "fine", "amount_usd": math.nan}, "amount_usd", id="one-bad-of-two"),
]


@pytest.mark.parametrize(("edits", "field"), BAD_EDITS)
async def test_a_badly_typed_edit_is_refused_and_the_attempt_stays_open(
    edits: dict[str, Any], field: str
) -> None:
    session, pending, log, _model = await paused()
    with pytest.raises(InvalidEdits) as info:
        session.resume(pending.attempt_id, Approve(edits=edits))
    assert info.value.fields == (field,)
    assert info.value.attempt_id == pending.attempt_id
    assert field in str(info.value)
    assert isinstance(info.value, ToolInputError)  # what callers caught before
    assert log == [] and session.pending == pending
    # Nothing was claimed: a valid decision still applies, once.
    events = await resume(session, pending.attempt_id, Approve(edits={"amount_usd": 35}))
    assert log == [("alice", 35.0)]
    assert isinstance(events[-1], TurnComplete)


async def test_the_transcript_records_the_arguments_that_ran() -> None:
    session, pending, log, model = await paused(amount=50.0 * 10)
    await resume(session, pending.attempt_id, Approve(edits={"amount_usd": 35}))
    assert log == [("alice", 35.0)]
    result = session.messages[-2].tool_results_parts[0]
    assert result.content.startswith("[the approver edited the arguments")
    assert '"amount_usd": 35' in result.content and '"amount_usd": 500' in result.content
    # The model's next request carries what ran, not only what it asked for.
    last = model.seen[-1][-1]
    assert last.role == "tool" and '"amount_usd": 35' in last.tool_results_parts[0].content


async def test_an_approval_without_edits_adds_no_note() -> None:
    session, pending, log, _model = await paused()
    await resume(session, pending.attempt_id, Approve(edits={"amount_usd": 500}))
    assert log == [("alice", 500.0)]
    assert session.messages[-2].tool_results_parts[0].content == "paid alice $500"


@pytest.mark.parametrize(
    "amount",
    [
        pytest.param(lambda args: 1 / 0, id="raises"),
        pytest.param(lambda args: float(str(args["to"])), id="raises-on-the-input"),
        pytest.param(lambda args: "lots", id="not-a-number"),
    ],
)
async def test_a_usd_amount_that_fails_is_an_error_result_not_an_internal_error(
    amount: Any,
) -> None:
    ran: list[str] = []

    @tool(permission=usd(amount))
    def pay(to: str) -> str:
        """Pay someone."""
        ran.append(to)
        return "paid"

    def script(messages: Sequence[Message], tools: object) -> ScriptedResponse | str:
        if messages[-1].role == "tool":
            return "it failed"
        return ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "bob"})])

    session = Session(Agent(model=ScriptedModel(script), tools=[pay]))
    events = await send(session, "pay bob")
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error and "pay" in result.content
    assert isinstance(events[-1], TurnComplete) and ran == []
    assert session.messages[-1].text == "it failed"


# ----------------------------------------------------------------- the server


def server_agent(ledger: list[float]) -> Agent:
    @tool(permission="confirm", modifiable_fields=("amount",))
    def pay(to: str, amount: float) -> str:
        """Pay someone."""
        ledger.append(amount)
        return f"paid {to} {amount}"

    def script(messages: Sequence[Message], tools: object) -> ScriptedResponse:
        if messages[-1].role == "user":
            return ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "bo", "amount": 50})])
        return ScriptedResponse(text="done")

    return Agent(model=ScriptedModel(script), tools=[pay], permissions=PermissionRules())


@pytest.fixture
def served() -> Iterator[tuple[str, list[float]]]:
    ledger: list[float] = []
    with serving(create_app(server_agent(ledger), config())) as base:
        yield base, ledger


RAW_BAD_BODIES = [
    pytest.param(b'{"decision":"approve","edits":{"amount":NaN}}', id="nan"),
    pytest.param(b'{"decision":"approve","edits":{"amount":Infinity}}', id="infinity"),
    pytest.param(b'{"decision":"approve","edits":{"amount":-Infinity}}', id="minus-infinity"),
    pytest.param(b'{"decision":"approve","edits":{"amount":true}}', id="bool"),
    pytest.param(b'{"decision":"approve","edits":{"amount":"35"}}', id="string"),
]


@pytest.mark.parametrize("body", RAW_BAD_BODIES)
async def test_the_server_refuses_a_badly_typed_edit_with_422(
    served: tuple[str, list[float]], body: bytes
) -> None:
    base, ledger = served
    async with client_for(base) as client:
        sid = (await client.post("/v1/sessions")).json()["session_id"]
        frames = await read_sse(
            client, "POST", f"/v1/sessions/{sid}/messages", json_body={"message": "pay"}
        )
        pending = next(f.data for f in frames if f.event == "pending_action")
        url = f"/v1/sessions/{sid}/decisions/{pending['approval_id']}"
        refused = await client.post(url, content=body, headers={"content-type": "application/json"})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["type"] == "InvalidEdits"
        assert ledger == []
        state = (await client.get(f"/v1/sessions/{sid}/state")).json()
        assert state["pending"]["approval_id"] == pending["approval_id"]
        frames = await read_sse(
            client, "POST", url, json_body={"decision": "approve", "edits": {"amount": 35}}
        )
    assert ledger == [35.0]
    results = [f.data for f in frames if f.event == "tool_result"]
    assert results and "35" in results[0]["content"]
