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
│   └── usage, cost_usd
├── writes          the write ledger, keyed by the engine's call id
└── decided, usage, cost_usd, auto_spent_usd, active_stream, last_stream …
```

Every fact of a turn lives in its :class:`Turn`; the loop reads and writes
it there and nowhere else, so a pause is setting a status and a resume (or
crash recovery in a new process) is reading it back. Calls are identified by
the engine: :attr:`Call.id` is assigned when the model emits the call, and
the provider's own id is kept in :attr:`Call.provider_id`, never used as a key
(a model may repeat an id or send none).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
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
    "Call",
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


@dataclass(slots=True, kw_only=True)
class Turn:
    """The one record of a turn in progress."""

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

    def call(self, call_id: str) -> Call | None:
        """The call of the current step with this engine id."""
        for c in self.calls:
            if c.id == call_id:
                return c
        return None


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
