"""Decoding a stream's log, shared by every CheckpointStore."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import JsonValue, ValidationError

from mainspring.codec import event_from_dict, event_from_json
from mainspring.errors import CheckpointCorrupt, StoreError
from mainspring.events import Event

__all__ = ["decode_log"]


def decode_log(stream_id: str, records: Iterable[str | bytes | JsonValue]) -> list[Event]:
    """Events from stored records (JSON text, or JSON data), in order.

    Raises:
        CheckpointCorrupt: Naming the stream and the offset of the first bad
            record; nothing after it is returned, nothing is skipped.
    """
    events: list[Event] = []
    for offset, record in enumerate(records):
        try:
            if isinstance(record, str | bytes):
                events.append(event_from_json(record))
            else:
                events.append(event_from_dict(record))
        except (StoreError, ValidationError, ValueError, RecursionError) as exc:
            raise CheckpointCorrupt(
                f"checkpoint of stream {stream_id!r} is corrupt at offset {offset}: {exc}",
                stream_id=stream_id,
                offset=offset,
            ) from exc
    return events
