"""What the session stores share about saving a state: its header, and the stored prefix.

A store keeps a session's transcript apart from the rest of its state (the
*header*), so that a save encodes and writes only the messages it has not
stored yet: messages are immutable and the transcript is append-only, so the
messages a store knows it saved are compared by reference, not re-encoded.
"""

from __future__ import annotations

from collections.abc import Sequence

from mainspring._json import JsonValue
from mainspring.codec import encode_without
from mainspring.messages import Message
from mainspring.state import SessionState

__all__ = ["common_prefix", "header"]

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
