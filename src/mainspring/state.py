"""The durable state of a session, as plain data a SessionStore can persist.

```
SessionState
├── messages        the transcript (append-only)
├── turn: Turn      the one record of the turn in progress, None between turns
│   ├── status      streaming → executing → (paused →) executing … → done (None)
│   ├── steps       model calls made in this turn
│   ├── calls       the current step's calls, in the model's order
│   ├── position    the next call to dispatch serially
│   ├── pending     the action waiting for a decision (status "paused")
│   ├── output_retries  answers sent back as not a valid typed output
│   └── usage, cost_usd
├── writes          the write ledger, keyed by the engine's call id
└── decided, usage, cost_usd, auto_spent_usd, active_stream, last_stream …
```

Every fact of a turn lives in its :class:`Turn`; the loop reads it there and
changes it only through its verbs (each checked against :data:`TRANSITIONS`),
so a pause is setting a status and a resume (or crash recovery in a new
process) is reading it back. Calls are identified by
the engine: :attr:`Call.id` is assigned when the model emits the call, and
the provider's own id is kept in :attr:`Call.provider_id`, never used as a key
(a model may repeat an id or send none).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from operator import attrgetter
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from mainspring._lowlevel.ids import new_call_id
from mainspring._lowlevel.ids import new_uuid4 as new_uuid4  # (re-exported: run.py, session.py)
from mainspring._lowlevel.json_value import JsonValue
from mainspring.codec import decode
from mainspring.events import ErrorEvent, PendingAction, TurnComplete
from mainspring.messages import Message, ToolResultPart
from mainspring.usage import Usage

__all__ = [
    "LEDGER",
    "TRANSITIONS",
    "Call",
    "IllegalTransition",
    "SessionState",
    "SpendKind",
    "StateView",
    "Turn",
    "TurnStatus",
    "WriteRecord",
    "new_call_id",
    "state_from_stored",
]

TurnStatus: TypeAlias = Literal["streaming", "executing", "paused"]


@dataclass(slots=True, kw_only=True)
class Call:
    """One tool call of a model step and what became of it."""

    id: str
    """The engine's id for this call (the key of everything about it)."""
    index: int
    """Its position in the model's answer."""
    name: str
    provider_id: str = ""
    """The id the model gave it ("" when it gave none); may repeat within a step."""
    input: dict[str, JsonValue] | None = None
    """Validated input; ``None`` when validation failed (then ``result`` says why)."""
    result: ToolResultPart | None = None
    parallel: bool = False
    """Started mid-stream as a concurrency-safe read."""
    started: bool = False
    """Its ``tool_start`` was emitted (it began to run)."""


class IllegalTransition(RuntimeError):
    """A turn, or a write of the ledger, was asked to move along no edge of its table.

    An internal bug of the run (never a user's error): the verb refused, and
    the record is as it was.
    """


Where: TypeAlias = TurnStatus | None
"""Where a session's turn is: its status, or ``None`` between turns."""

_TABLE: dict[str, frozenset[Where]] = {
    # verb: the states it may start from (the verb's own docstring says where it goes)
    "start_turn": frozenset({None, "streaming"}),
    "begin_step": frozenset({"streaming"}),
    "add_call": frozenset({"streaming"}),
    "answered": frozenset({"streaming"}),
    "cut_answer": frozenset({"streaming"}),
    "advance": frozenset({"executing"}),
    "pause": frozenset({"executing"}),
    "unpause": frozenset({"paused"}),
    "repause": frozenset({"executing"}),
    "commit_step": frozenset({"executing"}),
    "charge": frozenset({"streaming", "executing"}),
    "refuse_output": frozenset({"streaming", "executing"}),
    "finish_turn": frozenset({None, "streaming", "executing", "paused"}),
}
TRANSITIONS: Mapping[str, frozenset[Where]] = MappingProxyType(_TABLE)
"""The one table of a turn's transitions: each verb and the states it is legal from.

```
None ──start_turn──► streaming ◄──────────── commit_step ─────────┐
                     │ begin_step, add_call, cut_answer, charge,  │
                     │ refuse_output                              │
                     └─answered (with calls)─► executing ─────────┤
                                               │ advance, charge, │
                                               │ refuse_output    │
                                               ├─pause──► paused  │
                                               ◄─unpause─┘  ▲     │
                                               └─repause────┘     │
finish_turn: streaming, executing ─► None (a paused turn is kept)
```
"""

LEDGER: Mapping[str | None, frozenset[str]] = MappingProxyType(
    {
        None: frozenset({"started"}),
        "started": frozenset({"started", "done", "unknown"}),
        "done": frozenset(),
        "unknown": frozenset(),
    }
)
"""The write ledger's edges, by a call's entry (``None``: no entry yet).

``started → started`` is a write that suspended on a nested decision
(``ToolContext.suspend``) and runs again once it is decided; crash recovery
leaves such a write ``started`` (it was parked, not cut off), so ``unknown``
is final. An entry never moves back (stores refuse ``done → started`` too).
"""


def _refuse(verb: str, where: Where, why: str = "") -> IllegalTransition:
    return IllegalTransition(f"{verb}() from {where or 'no turn'}{why}")


@dataclass(slots=True, kw_only=True)
class Turn:
    """The one record of a turn in progress.

    Its verbs (:meth:`begin_step` … :meth:`charge`, and
    :meth:`SessionState.start_turn` / :meth:`SessionState.finish_turn`) are
    the only writers of its status, steps, calls, position, pending action and
    spend; each checks its legal prior state in :data:`TRANSITIONS` and raises
    :class:`IllegalTransition` (changing nothing) when the turn is elsewhere.
    """

    index: int
    status: TurnStatus = "streaming"
    steps: int = 0
    """Model calls made so far in this turn (for ``max_steps``)."""
    calls: list[Call] = field(default_factory=list)
    """The current step's calls, in the model's order (empty while streaming text)."""
    position: int = 0
    """Index into ``calls`` of the next call to dispatch serially (the pending one
    while paused; later calls have not been judged)."""
    pending: PendingAction | None = None
    """The action waiting for a decision, when ``status`` is ``"paused"``."""
    usage: Usage = Usage()
    cost_usd: float = 0.0
    output_retries: int = 0
    """Answers of this turn sent back to the model as not a valid typed output."""

    def call(self, call_id: str) -> Call | None:
        """The call of the current step with this engine id."""
        for c in self.calls:
            if c.id == call_id:
                return c
        return None

    def _check(self, verb: str) -> None:
        if self.status not in _TABLE[verb]:
            raise _refuse(verb, self.status)

    @property
    def current(self) -> Call:
        """The call at :attr:`position` (the pending one while paused)."""
        if self.position >= len(self.calls):
            raise IllegalTransition(f"no call at position {self.position} of {len(self.calls)}")
        return self.calls[self.position]

    def begin_step(self) -> None:
        """A model step starts: ``streaming``, no calls yet, one more step counted."""
        if self.status not in _TABLE["begin_step"]:
            raise _refuse("begin_step", self.status)
        if self.calls:
            raise _refuse("begin_step", self.status, " with calls of a step not committed")
        self.steps += 1
        self.position = 0

    def add_call(self, call: Call) -> None:
        """A call the model made in the step being streamed."""
        if self.status not in _TABLE["add_call"]:
            raise _refuse("add_call", self.status)
        self.calls.append(call)

    def answered(self) -> None:
        """The model's answer is in: its calls in the model's order, ``executing`` if any."""
        if self.status not in _TABLE["answered"]:
            raise _refuse("answered", self.status)
        calls = self.calls
        if calls:
            calls.sort(key=attrgetter("index"))
            self.status = "executing"

    def cut_answer(self) -> None:
        """The answer being streamed was cut off: its calls never reach the transcript."""
        self._check("cut_answer")
        self.calls = []

    def advance(self) -> None:
        """The call at :attr:`position` is settled: the serial pass moves to the next."""
        if self.status not in _TABLE["advance"]:
            raise _refuse("advance", self.status)
        if self.position >= len(self.calls):
            raise _refuse("advance", self.status, " past the step's last call")
        self.position += 1

    def pause(self, pending: PendingAction) -> None:
        """Wait for a decision on the call at :attr:`position`: ``paused``."""
        self._check("pause")
        if self.position >= len(self.calls):
            raise _refuse("pause", self.status, " with no call to pause on")
        self.pending, self.status = pending, "paused"

    def unpause(self) -> PendingAction:
        """A decision arrived: back to ``executing``; the pending action it answers."""
        self._check("unpause")
        pending = self.pending
        if pending is None:  # (pause always sets one; a decoded state might not have)
            raise _refuse("unpause", self.status, " with no pending action")
        self.pending, self.status = None, "executing"
        return pending

    def repause(self, pending: PendingAction) -> None:
        """Undo an :meth:`unpause` that did not go on record: ``paused`` on ``pending`` again."""
        self._check("repause")
        if self.position >= len(self.calls):
            raise _refuse("repause", self.status, " with no call to pause on")
        self.pending, self.status = pending, "paused"

    def commit_step(self) -> list[ToolResultPart]:
        """The step is done: its results in the model's order; ``streaming``, no calls."""
        if self.status not in _TABLE["commit_step"]:
            raise _refuse("commit_step", self.status)
        results: list[ToolResultPart] = []
        for call in self.calls:
            if call.result is None:
                raise _refuse("commit_step", self.status, " with a call that has no result")
            results.append(call.result)
        self.calls, self.position, self.status = [], 0, "streaming"
        return results

    def refuse_output(self) -> int:
        """An answer was not a valid typed output and goes back to the model: the count so far."""
        self._check("refuse_output")
        self.output_retries += 1
        return self.output_retries

    def charge(self, usd: float, usage: Usage | None = None, *, sums: Usage | None = None) -> None:
        """What a model call (``usage``) or a tool (only ``usd``) spent in this turn.

        ``sums`` is the session's total after the charge, given when this turn
        sums what it does (the session's first turn): the turn holds that one
        object instead of an equal second.
        """
        if self.status not in _TABLE["charge"]:
            raise _refuse("charge", self.status)
        if usage is not None:
            self.usage = sums if sums is not None else self.usage + usage
        self.cost_usd += usd


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteRecord:
    """The write ledger: recorded before and after a write runs."""

    key: str
    """The engine's call id of the write (unique across turns)."""
    tool: str
    status: Literal["started", "done", "unknown"]
    attempt_id: str | None = None
    turn_index: int = 0
    result: ToolResultPart | None = None
    """What the write returned (with ``done``), so a crash before the result
    reached the transcript does not lose it."""


SpendKind = Literal["auto", "cost"]
"""A session's spend totals in a store's ``SpendLedger``: ``auto`` (auto-approved
writes, against the auto-spend cap) and ``cost`` (model and tool spend, against
the budget)."""


@dataclass(slots=True, kw_only=True)
class SessionState:
    """Everything persisted for one session."""

    session_id: str
    agent_name: str
    messages: list[Message] = field(default_factory=list)
    turn_index: int = 0
    usage: Usage = Usage()
    cost_usd: float = 0.0
    auto_spent_usd: float = 0.0
    turn: Turn | None = None
    """The turn in progress (streaming, executing or paused); ``None`` between turns."""
    decided: dict[str, str] = field(default_factory=dict)
    """attempt id -> what was decided (``approved``, ``rejected``, ``client_result``)."""
    writes: dict[str, WriteRecord] = field(default_factory=dict)
    """The write ledger by the engine's call id."""
    active_stream: str | None = None
    """The stream id of a run in progress; set when a run starts, cleared when it ends.
    Found set on load (with no live run holding the session's lock), it means the
    process running it died."""
    last_stream: str | None = None
    """The id of the last stream that ended, and its terminal event below: a
    client resuming a stream whose log was already cleared still learns how it ended."""
    last_terminal: TurnComplete | ErrorEvent | None = None
    principal: str | None = None
    """Who owns the session (set by a server to the authenticated caller; ``None``
    for a session of no one in particular). Only its owner may read, stream,
    decide or delete it through :mod:`mainspring.server`."""
    version: int = 2

    @property
    def pending(self) -> PendingAction | None:
        """The action awaiting a decision, if the session is paused."""
        turn = self.turn
        return turn.pending if turn is not None and turn.status == "paused" else None

    # The verbs below are the writers of the state's turn, ledger, streams,
    # decisions and totals (a store decoding a state builds it directly).

    def start_turn(self) -> Turn:
        """A new turn (the next index), ``streaming``: the one in progress.

        Legal between turns, or after a turn's answer ended it with no calls
        (a follow-up message starts the next one in the same run).
        """
        turn = self.turn
        where = None if turn is None else turn.status
        if where not in _TABLE["start_turn"] or (turn is not None and turn.calls):
            raise _refuse("start_turn", where, " with calls" if turn is not None else "")
        self.turn_index += 1
        new = self.turn = Turn(index=self.turn_index)
        return new

    def finish_turn(self) -> None:
        """The turn is over, unless it is paused (it waits for its decision)."""
        turn = self.turn
        if turn is not None and turn.status != "paused":
            self.turn = None

    def ledger(self, record: WriteRecord) -> None:
        """A write's ledger entry, moved forward along :data:`LEDGER` (keyed by its call id)."""
        before = self.writes.get(record.key)
        was = None if before is None else before.status
        if record.status not in LEDGER[was]:
            raise IllegalTransition(f"ledger entry {record.key!r}: {was} -> {record.status}")
        self.writes[record.key] = record

    def begin_stream(self, stream_id: str) -> None:
        """A run started streaming as ``stream_id``."""
        self.active_stream = stream_id

    def end_stream(self, stream_id: str, terminal: TurnComplete | ErrorEvent) -> None:
        """The run streaming as ``stream_id`` ended with ``terminal``."""
        self.active_stream = None
        self.last_stream, self.last_terminal = stream_id, terminal

    def note_terminal(self, stream_id: str, terminal: TurnComplete | ErrorEvent | None) -> None:
        """The stream ``stream_id`` ended with ``terminal`` (kept for a later replay).

        ``active_stream`` stays until the run's end clears it (:meth:`clear_stream`).
        """
        self.last_stream, self.last_terminal = stream_id, terminal

    def clear_stream(self) -> None:
        """No run is in progress (one that ended without a terminal, or died)."""
        self.active_stream = None

    def note_decision(self, attempt_id: str, record: str) -> None:
        """What was decided for ``attempt_id`` (claimed in the store first)."""
        self.decided[attempt_id] = record

    def forget_decision(self, attempt_id: str) -> None:
        """A claimed decision given back (it was never applied)."""
        self.decided.pop(attempt_id, None)

    def set_totals(self, cost_usd: float, usage: Usage | None = None) -> None:
        """The session's spend (and model usage, when given), as the run's pricing sums them."""
        self.cost_usd = cost_usd
        if usage is not None:
            self.usage = usage

    def set_auto_spent(self, total: float) -> None:
        """What auto-approved writes have spent, as the store (or this worker) sums it."""
        self.auto_spent_usd = total

    def raise_floor(self, *, auto_spent_usd: float, cost_usd: float) -> None:
        """Totals at least these (spend other callers of the session saw already)."""
        self.auto_spent_usd = max(self.auto_spent_usd, auto_spent_usd)
        self.cost_usd = max(self.cost_usd, cost_usd)

    def bind_messages(self, messages: list[Message]) -> None:
        """The transcript's list, shared with the context compiler (one transcript)."""
        self.messages = messages


def state_from_stored(header: object, writes: Iterable[tuple[str, object]]) -> SessionState:
    """A state from its stored JSON header and ledger rows, upgrading older layouts.

    Version 1 (mainspring 0.1) kept a paused step in ``paused`` and the step
    being executed in ``in_flight``, keyed calls by the provider's id and the
    ledger by ``"<turn>:<provider id>"``; both become a :class:`Turn` whose
    calls keep the provider id as their engine id.
    """
    data = header
    legacy = isinstance(data, dict) and int(data.get("version", 1)) < 2
    if legacy:
        assert isinstance(data, dict)
        data = _upgrade_v1(data)
    state = decode(SessionState, data)
    for key, raw in writes:
        record = decode(WriteRecord, raw)
        turn, sep, rest = key.partition(":")
        if legacy and sep and turn.isdigit():
            key = rest
            record = replace(record, key=rest, turn_index=int(turn))
        state.writes[key] = record
    return state


def _upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    data = dict(data)
    paused, in_flight = data.pop("paused", None), data.pop("in_flight", None)

    def call(c: dict[str, Any]) -> dict[str, Any]:
        tid = c.get("tool_use_id", "")
        return {k: v for k, v in c.items() if k != "tool_use_id"} | {"id": tid, "provider_id": tid}

    if isinstance(paused, dict):
        data["turn"] = {
            "index": paused.get("turn_index", data.get("turn_index", 0)),
            "status": "paused",
            "steps": paused.get("steps", 0),
            "calls": [call(c) for c in paused.get("calls", [])],
            "position": paused.get("position", 0),
            "pending": paused.get("pending"),
            "usage": paused.get("turn_usage", {}),
            "cost_usd": paused.get("turn_cost_usd", 0.0),
        }
    elif isinstance(in_flight, list):
        data["turn"] = {
            "index": data.get("turn_index", 0),
            "status": "executing",
            "calls": [call(c) for c in in_flight],
        }
    data["version"] = 2
    return data


class StateView:
    """A read-only view of a session's state: what ``Session.state`` hands the host.

    It reads the live state (no copy); collections come back read-only
    (tuples, mapping proxies) and the turn as a detached copy, so a host can
    inspect everything and change nothing. ``snapshot()`` gives a detached
    :class:`SessionState` (e.g. to save it elsewhere).
    """

    __slots__ = ("_state",)
    _state: SessionState

    def __init__(self, state: SessionState) -> None:
        """View ``state``."""
        object.__setattr__(self, "_state", state)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a session's state is read-only (tried to set {name!r})")

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self._state.session_id

    @property
    def agent_name(self) -> str:
        """The name of the agent that runs it."""
        return self._state.agent_name

    @property
    def principal(self) -> str | None:
        """Who owns the session (see :attr:`SessionState.principal`)."""
        return self._state.principal

    @property
    def messages(self) -> tuple[Message, ...]:
        """The transcript."""
        return tuple(self._state.messages)

    @property
    def turn_index(self) -> int:
        """The index of the latest turn."""
        return self._state.turn_index

    @property
    def usage(self) -> Usage:
        """Tokens used by every model call of the session."""
        return self._state.usage

    @property
    def cost_usd(self) -> float:
        """What the session has cost."""
        return self._state.cost_usd

    @property
    def auto_spent_usd(self) -> float:
        """What auto-tier writes have spent (against the auto-spend cap)."""
        return self._state.auto_spent_usd

    @property
    def turn(self) -> Turn | None:
        """A copy of the turn in progress, if any."""
        turn = self._state.turn
        if turn is None:
            return None
        return replace(turn, calls=[replace(c) for c in turn.calls])

    @property
    def pending(self) -> PendingAction | None:
        """The action awaiting a decision, if the session is paused."""
        return self._state.pending

    @property
    def decided(self) -> Mapping[str, str]:
        """Recorded decisions by attempt id."""
        return MappingProxyType(self._state.decided)

    @property
    def writes(self) -> Mapping[str, WriteRecord]:
        """The write ledger by the engine's call id."""
        return MappingProxyType(self._state.writes)

    @property
    def active_stream(self) -> str | None:
        """The stream id of the run in progress (or of one whose process died)."""
        return self._state.active_stream

    @property
    def last_stream(self) -> str | None:
        """The id of the last stream that ended."""
        return self._state.last_stream

    @property
    def last_terminal(self) -> TurnComplete | ErrorEvent | None:
        """How the last stream ended."""
        return self._state.last_terminal

    def snapshot(self) -> SessionState:
        """A detached copy of the state."""
        state = self._state
        return replace(
            state,
            messages=list(state.messages),
            turn=self.turn,
            decided=dict(state.decided),
            writes=dict(state.writes),
        )
