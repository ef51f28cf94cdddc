"""What the session stores share about saving a state: its header, and the stored prefix.

A store keeps a session's transcript apart from the rest of its state (the
*header*), so that a save encodes and writes only the messages it has not
stored yet: messages are immutable and the transcript is append-only, so the
messages a store knows it saved are compared by reference, not re-encoded.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Sequence

from mainspring._lowlevel.frozen import dataclass
from mainspring._lowlevel.json_value import JsonValue
from mainspring.codec import encode_without, event_to_dict, fields_dict, part_to_dict
from mainspring.events import ErrorEvent, TurnComplete
from mainspring.messages import Message
from mainspring.state import Call, SessionState, Turn
from mainspring.usage import Usage

__all__ = ["KnownTranscripts", "Stored", "common_prefix", "header"]

_APART = {"messages", "decided", "writes"}
"""Fields a store keeps in rows of their own (the transcript, claims, the ledger)."""


def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


_HEADER = fields_dict(
    SessionState, tuple(name for name in _names(SessionState) if name not in _APART)
)
_TURN = fields_dict(Turn, _names(Turn))
_CALL = fields_dict(Call, _names(Call))
_USAGE = fields_dict(Usage, _names(Usage))
_TERMINALS = (TurnComplete, ErrorEvent, type(None))


def header(state: SessionState) -> dict[str, JsonValue]:
    """``state`` as JSON data without its transcript, decisions and write ledger.

    Field by field (a run encodes it at each commit; the pydantic adapter costs
    several times as much), the adapter only for what is not plain: a paused
    turn's pending action, a subclass. ``tests/stores/test_header.py`` checks
    both give the same.

    Raises:
        ValueError, TypeError, RecursionError: A field cannot be encoded.
    """
    turn = state.turn
    if (
        type(state) is not SessionState
        or type(state.usage) is not Usage
        or type(state.last_terminal) not in _TERMINALS
        or (turn is not None and (type(turn) is not Turn or not _plain(turn)))
    ):
        return encode_without(state, _APART)
    data = _HEADER(state)
    data["usage"] = _usage(state.usage)
    if turn is not None:
        data["turn"] = _turn(turn)
    if state.last_terminal is not None:
        data["last_terminal"] = event_to_dict(state.last_terminal)
    return data


def _plain(turn: Turn) -> bool:
    """Whether ``turn`` encodes field by field (no pending action, plain parts)."""
    return (
        turn.pending is None
        and type(turn.usage) is Usage
        and all(type(call) is Call for call in turn.calls)
    )


def _usage(usage: Usage) -> dict[str, JsonValue]:
    return _USAGE(usage)


def _turn(turn: Turn) -> dict[str, JsonValue]:
    data = _TURN(turn)
    data["calls"] = [_call(call) for call in turn.calls]
    data["usage"] = _usage(turn.usage)
    return data


def _call(call: Call) -> dict[str, JsonValue]:
    data = _CALL(call)
    if call.result is not None:
        data["result"] = part_to_dict(call.result)
    return data


def common_prefix(ours: Sequence[Message], theirs: Sequence[Message]) -> int:
    """How many leading messages two transcripts share."""
    n = min(len(ours), len(theirs))
    if ours[:n] == theirs[:n]:  # list equality checks identity first: fast when unchanged
        return n
    return next(i for i in range(n) if ours[i] != theirs[i])


@dataclass(frozen=True, slots=True)
class Stored:
    """What a store object knows is stored as a session's transcript."""

    revision: str
    """The session's revision when this object saved or loaded it."""
    messages: Sequence[Message]


class KnownTranscripts:
    """The stored transcripts a store object knows, for its last ``size`` sessions."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._known: OrderedDict[str, Stored] = OrderedDict()

    def get(self, session_id: str) -> Stored | None:
        return self._known.get(session_id)

    def remember(self, session_id: str, stored: Stored | None) -> None:
        """Know ``stored`` for the session (or forget it: ``None``)."""
        self._known.pop(session_id, None)
        if stored is not None:
            self._known[session_id] = stored
            while len(self._known) > self._size:
                self._known.popitem(last=False)
