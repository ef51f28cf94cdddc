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

from mainspring._json import JsonValue
from mainspring.codec import encode_without
from mainspring.messages import Message
from mainspring.state import SessionState

__all__ = ["KnownTranscripts", "Stored", "common_prefix", "header"]

_APART = {"messages", "decided", "writes"}
"""Fields a store keeps in rows of their own (the transcript, claims, the ledger)."""


def header(state: SessionState) -> dict[str, JsonValue]:
    """``state`` as JSON data without its transcript, decisions and write ledger.

    Raises:
        ValueError, TypeError, RecursionError: A field cannot be encoded.
    """
    return encode_without(state, _APART)


def common_prefix(ours: Sequence[Message], theirs: Sequence[Message]) -> int:
    """How many leading messages two transcripts share."""
    n = min(len(ours), len(theirs))
    if ours[:n] == theirs[:n]:  # list equality checks identity first: fast when unchanged
        return n
    return next(i for i in range(n) if ours[i] != theirs[i])


@dataclasses.dataclass(frozen=True, slots=True)
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
