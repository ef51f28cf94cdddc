"""What a torus SDK user looks for, through the public API: a ``permission_denied``
event, the scriptless mock model (``MockProvider``), and the low-level loop
(``runLoop``) without a Session."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import pytest
from typer.testing import CliRunner

from mainspring import (
    Agent,
    Approve,
    Message,
    MockModel,
    PendingAction,
    PermissionDenied,
    PermissionRules,
    Reject,
    ScriptedModel,
    Session,
    TextDelta,
    ToolResult,
    ToolStart,
    TurnComplete,
    run_loop,
    tool,
)
from mainspring.errors import ConfigError
from mainspring.events import Event
from mainspring.guards import Guard
from mainspring.messages import ToolResultPart
from mainspring.models import ToolSpec
from mainspring.models.mock import example_input
from mainspring.permissions import Deny
from mainspring.principals import Caller
from mainspring.state import SessionState
from mainspring.testing import ScriptedCall, ScriptedResponse, check_events, collect
from mainspring.tools import Tool
from mainspring.tools.context import RunScope, run_scope

pytestmark = pytest.mark.anyio


def _wiper(ran: list[str]) -> Tool:
    @tool
    def wipe(path: str) -> str:
        """Delete a folder."""
        ran.append(path)
        return f"wiped {path}"

    return wipe


def _calls_wipe() -> ScriptedModel:
    return ScriptedModel([ScriptedResponse(tool_calls=[ScriptedCall("wipe", {"path": "/"})]), "ok"])


def _denials(events: Sequence[Event]) -> list[PermissionDenied]:
    return [e for e in events if isinstance(e, PermissionDenied)]


# ------------------------------------------------------------- permission_denied


async def test_a_deny_list_refusal_is_a_permission_denied_event_before_its_error_result() -> None:
    ran: list[str] = []
    model = _calls_wipe()
    agent = Agent(model=model, tools=[_wiper(ran)], permissions=PermissionRules(deny=("wipe",)))
    events = await collect(Session(agent).send("clean up"))
    (denied,) = _denials(events)
    assert (denied.name, denied.source, denied.principal) == ("wipe", "deny_list", None)
    assert denied.reason == "'wipe' is on the deny list"
    at = events.index(denied)
    result = events[at + 1]
    assert isinstance(result, ToolResult) and result.tool_use_id == denied.tool_use_id
    assert result.is_error and result.content == "permission denied: 'wipe' is on the deny list"
    assert ran == []  # it never ran
    # What the model sees is the error result, as before.
    seen = [p for p in model.requests[1].messages[-1].parts if isinstance(p, ToolResultPart)]
    assert [(p.content, p.is_error) for p in seen] == [(result.content, True)]


async def test_a_callback_denial_and_a_guard_block_name_their_source_and_the_principal() -> None:
    ran: list[str] = []

    def no_root(name: str, args: object) -> Deny | None:
        return Deny("not the root folder") if name == "wipe" else None

    agent = Agent(
        model=_calls_wipe(),
        tools=[_wiper(ran)],
        permissions=PermissionRules(can_use_tool=no_root),
    )
    state = SessionState(session_id="s-1", agent_name=agent.name, principal="alice")
    (denied,) = _denials(await collect(Session(agent, state=state).send("clean up")))
    assert (denied.source, denied.reason, denied.principal) == (
        "callback",
        "not the root folder",
        "alice",
    )

    guard = Guard(name="no_rm_root", before=lambda t, args: ("block", "refusing to wipe /"))
    agent = Agent(model=_calls_wipe(), tools=[_wiper(ran)], guards=[guard])
    with run_scope(RunScope(caller=Caller("bob"))):  # an engine's caller, for a session of no one
        events = await collect(Session(agent).send("clean up"))
    (denied,) = _denials(events)
    assert (denied.source, denied.reason, denied.principal) == (
        "no_rm_root",
        "refusing to wipe /",
        "user:bob",
    )
    assert ran == []


async def test_a_persons_rejection_is_a_decision_not_a_permission_denied() -> None:
    ran: list[str] = []

    @tool(permission="confirm")
    def wipe(path: str) -> str:
        """Delete a folder."""
        ran.append(path)
        return "wiped"

    session = Session(Agent(model=_calls_wipe(), tools=[wipe]))
    paused = await collect(session.send("clean up"))
    pending = next(e for e in paused if isinstance(e, PendingAction))
    rejected = await collect(session.resume(pending.attempt_id, Reject("no")))
    assert not _denials(paused + rejected) and ran == []


# ------------------------------------------------------------------ MockModel


@tool
def get_balance(account: str, currency: Literal["usd", "eur"] = "usd") -> dict[str, float]:
    """The balance of an account."""
    return {currency: 42.0}


async def test_the_mock_model_calls_the_first_tool_once_then_answers_from_its_result() -> None:
    model = MockModel()
    result = await Session(Agent(model=model, tools=[get_balance])).run("What do I have?")
    starts = [e for e in result.events if isinstance(e, ToolStart)]
    assert [s.name for s in starts] == ["get_balance"]
    assert starts[0].input["account"] == "example"  # required: made up; optional: its default
    assert result.text == 'You asked: "What do I have?"\nget_balance returned: {"usd": 42.0}'
    assert len(model.requests) == 2  # one call, one answer
    check_events(result.events)


async def test_any_agent_runs_offline_with_the_mock_model_string() -> None:
    agent = Agent(model="mock", instructions="Be brief.")
    result = await Session(agent).run("hello there")
    assert result.text == 'You asked: "hello there"\n(mock answer: no tool was called)'
    assert result.stop_reason == "end_turn" and result.usage.requests == 1


async def test_the_mock_models_write_pauses_for_approval_and_runs_once_approved() -> None:
    paid: list[int] = []

    @tool(permission="confirm")
    def pay(amount_usd: int, to: str) -> str:
        """Pay someone."""
        paid.append(amount_usd)
        return f"paid {to} ${amount_usd}"

    session = Session(Agent(model=MockModel(), tools=[pay]))
    first = await session.run("pay the rent")
    assert first.pending is not None and first.pending.input == {"amount_usd": 1, "to": "example"}
    assert paid == []
    done = await session.run(attempt_id=first.pending.attempt_id, decision=Approve())
    assert paid == [1] and done.text.endswith("pay returned: paid example $1")


def test_example_input_fills_the_required_fields_of_a_schema_with_fitting_values() -> None:
    schema: dict[str, object] = {
        "type": "object",
        "$defs": {
            "Addr": {
                "type": "object",
                "properties": {"zip": {"type": "string", "minLength": 9}},
                "required": ["zip"],
            }
        },
        "properties": {
            "n": {"type": "integer", "minimum": 5},
            "ratio": {"type": "number", "exclusiveMinimum": 2, "maximum": 2.5},
            "kind": {"enum": ["a", "b"]},
            "on": {"type": "boolean"},
            "when": {"type": "string", "format": "date"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "addr": {"$ref": "#/$defs/Addr"},
            "maybe": {"anyOf": [{"type": "null"}, {"type": "integer"}]},
            "size": {"type": "integer", "default": 7},
            "optional": {"type": "string"},
        },
        "required": ["n", "ratio", "kind", "on", "when", "tags", "addr", "maybe", "size"],
    }
    assert example_input(schema) == {  # type: ignore[arg-type]  # a literal schema
        "n": 5,
        "ratio": 2.5,
        "kind": "a",
        "on": True,
        "when": "2024-01-01",
        "tags": ["example", "example"],
        "addr": {"zip": "examplexx"},
        "maybe": 1,
        "size": 7,
    }
    assert example_input({"$ref": "#/nowhere"}) == {}  # nothing to follow: no arguments
    loop = {"$defs": {"A": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"}
    assert example_input(loop) == {}  # type: ignore[arg-type]  # a reference cycle ends


def test_mainspring_run_takes_model_mock_for_any_agent() -> None:
    from mainspring.cli.commands import app

    result = CliRunner().invoke(
        app, ["run", "tests.cli_agents:paying", "pay", "--model", "mock", "--yes"]
    )
    assert result.exit_code == 0, result.output
    assert "pay returned: paid $1" in result.output


# ------------------------------------------------------------------- run_loop


async def test_run_loop_runs_a_turn_on_the_hosts_own_history_and_extends_it() -> None:
    model = MockModel()
    agent = Agent(model=model, tools=[get_balance])
    history = [Message.user("What do I have?")]
    events = [e async for e in run_loop(agent, history)]
    check_events(events)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.endswith('get_balance returned: {"usd": 42.0}')
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    history.append(Message.user("And now?"))
    more = [e async for e in run_loop(agent, history)]
    check_events(more)
    assert model.requests[-1].messages[0].text == "What do I have?"  # the whole history went in
    assert len(history) == 8


async def test_a_write_through_run_loop_pauses_for_approval_as_through_a_session() -> None:
    paid: list[int] = []

    def paying(amount_usd: int) -> str:
        """Pay."""
        paid.append(amount_usd)
        return "paid"

    pay = tool(name="pay", permission="confirm")(paying)

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        if messages[-1].role == "user":
            return ScriptedResponse(tool_calls=[ScriptedCall("pay", {"amount_usd": 5})])
        return ScriptedResponse(text="done")

    agent = Agent(model=ScriptedModel(script), tools=[pay])
    through_session = await collect(Session(agent).send("pay"))
    through_loop = [e async for e in run_loop(agent, [Message.user("pay")])]
    check_events(through_loop)
    assert [e.type for e in through_loop] == [e.type for e in through_session]
    last = through_loop[-1]
    assert isinstance(last, TurnComplete) and last.stop_reason == "pending_action"
    assert paid == []  # never without a decision

    asked: list[PendingAction] = []

    async def approve(pending: PendingAction) -> Approve:
        asked.append(pending)
        return Approve(edits={"amount_usd": 3})

    pending_edit = Agent(
        model=ScriptedModel(script),
        tools=[tool(name="pay", permission="confirm", modifiable_fields=("amount_usd",))(paying)],
    )
    history = [Message.user("pay")]
    decided = [e async for e in run_loop(pending_edit, history, decide=approve)]
    check_events(decided)
    assert [a.name for a in asked] == ["pay"] and paid == [3]
    assert not any(isinstance(e, PendingAction) for e in decided)
    last = decided[-1]
    assert isinstance(last, TurnComplete) and last.stop_reason == "end_turn"
    assert history[-1].text == "done"

    rejected = [
        e async for e in run_loop(agent, [Message.user("pay")], decide=lambda p: Reject("no"))
    ]
    check_events(rejected)
    assert paid == [3]  # a rejected write never runs


async def test_run_loop_refuses_a_conversation_without_the_users_message_last() -> None:
    agent = Agent(model=MockModel())
    with pytest.raises(ConfigError, match="user's new message last"):
        [e async for e in run_loop(agent, [])]
    history = [Message.user("hi"), Message.assistant("hello")]
    with pytest.raises(ConfigError):
        [e async for e in run_loop(agent, history)]
    assert len(history) == 2  # untouched
