"""Decoding a stream's log, shared by every CheckpointStore.

A record is one event (a JSON object), or a batch of them: a JSON array of
event objects (the SQLite store writes a commit's events as one row).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from pydantic import JsonValue, ValidationError

from mainspring.codec import event_from_dict, event_from_json
from mainspring.errors import CheckpointCorrupt, StoreError
from mainspring.events import Event

__all__ = ["check_cursor", "decode_log"]


def check_cursor(cursor: int) -> int:
    """``cursor`` if it is a position in a log (an ``int`` of 0 or more).

    Raises:
        ValueError: It is negative or not an ``int``.
    """
    if type(cursor) is not int or cursor < 0:
        raise ValueError(f"a log cursor is an int of 0 or more, not {cursor!r}")
    return cursor


def decode_log(
    stream_id: str, records: Iterable[str | bytes | JsonValue], *, start: int = 0
) -> list[Event]:
    """Events from stored records (JSON text, or JSON data), in order.

    Args:
        stream_id: The stream the records belong to (named in errors).
        records: The records, in order.
        start: The position in the log of the first record's first event (for
            the offset an error names, when only the log's tail is decoded).

    Raises:
        CheckpointCorrupt: Naming the stream and the offset of the first bad
            record (the number of events before it); nothing after it is
            returned, nothing is skipped.
    """
    events: list[Event] = []
    for record in records:
        try:
            if isinstance(record, str | bytes):
                if record[:1] in ("[", b"["):
                    events.extend(_batch(record))
                else:
                    events.append(event_from_json(record))
            else:
                events.append(event_from_dict(record))
        except (StoreError, ValidationError, ValueError, TypeError, RecursionError) as exc:
            offset = start + len(events)
            raise CheckpointCorrupt(
                f"checkpoint of stream {stream_id!r} is corrupt at offset {offset}: {exc}",
                stream_id=stream_id,
                offset=offset,
            ) from exc
    return events


def _batch(record: str | bytes) -> list[Event]:
    """The events of one batch record, all or none."""
    items = json.loads(record)
    if not isinstance(items, list) or not items:
        raise ValueError("a batch record is a non-empty JSON array of events")
    return [event_from_dict(item) for item in items]
