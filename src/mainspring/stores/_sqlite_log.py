"""Reading a SQLite checkpoint log: whole, or from a position on (a follower's poll).

A row holds one event or a batch of them (``_log``), so an event's position is
not its row's ``seq``. A reader remembers an :class:`Anchor`, the last row it
read and the position of that row's first event; its next read from a
position at or after the anchor's starts at that row (``seq >= anchor``, the
primary key's range): the new rows and the anchor row again, never the whole
log. The anchor row is read again to check that it is still the same row (the
log was not cleared and written anew meanwhile), and the rows read to check
that the log did not expire or begin anew (a gap of more than ``ttl``); when
either check fails the whole log is read, as :meth:`load` does.
"""

from __future__ import annotations

import sqlite3

from mainspring._lowlevel.frozen import dataclass
from mainspring.errors import CheckpointCorrupt
from mainspring.events import Event
from mainspring.stores._log import decode_log

__all__ = ["Anchor", "read_log"]

Row = tuple[int, bytes, float]


@dataclass(frozen=True, slots=True)
class Anchor:
    """The last row a reader read of a log, and where its events begin."""

    seq: int
    updated_at: float
    start: int
    """The position in the log of the row's first event."""


def read_log(
    conn: sqlite3.Connection,
    stream_id: str,
    *,
    cursor: int,
    now: float,
    ttl: float,
    anchor: Anchor | None,
) -> tuple[list[Event], Anchor | None]:
    """The log's events from position ``cursor`` on, and the anchor for the next read.

    Expired rows are deleted as :meth:`SQLiteCheckpointStore.load` always did.

    Raises:
        CheckpointCorrupt: A row was tampered with, or a record cannot be decoded.
    """
    if anchor is not None and anchor.start <= cursor:
        rows = _rows(conn, stream_id, anchor.seq)
        if rows and rows[0][0] == anchor.seq and rows[0][2] == anchor.updated_at:
            if now - rows[-1][2] <= ttl and not _gap(rows, ttl):
                return _decode(stream_id, rows, anchor.start, cursor)
    rows = _rows(conn, stream_id, None)
    if not rows:
        return [], None
    if now - rows[-1][2] > ttl:
        _delete_through(conn, stream_id, rows[-1][0])
        return [], None
    start = 0
    for i in range(1, len(rows)):
        if rows[i][2] - rows[i - 1][2] > ttl:
            start = i  # the log expired before this append, which began a new one
    if start:
        _delete_through(conn, stream_id, rows[start - 1][0])
    return _decode(stream_id, rows[start:], 0, cursor)


def _rows(conn: sqlite3.Connection, stream_id: str, first: int | None) -> list[Row]:
    """The stream's rows in order, from ``seq`` ``first`` on (all with ``None``)."""
    sql = "SELECT seq, CAST(data AS BLOB), updated_at FROM mainspring_checkpoints"
    if first is None:
        cursor = conn.execute(f"{sql} WHERE stream_id = ? ORDER BY seq", (stream_id,))
    else:
        cursor = conn.execute(
            f"{sql} WHERE stream_id = ? AND seq >= ? ORDER BY seq", (stream_id, first)
        )
    rows: list[Row] = []
    for index, (seq, data, updated_at) in enumerate(cursor):
        if not isinstance(seq, int) or not isinstance(updated_at, int | float):
            # (a row tampered with: its time decides expiry, so nothing is replayed)
            raise CheckpointCorrupt(
                f"checkpoint of stream {stream_id!r} is corrupt: row {index} has "
                f"{type(seq).__name__} seq and {type(updated_at).__name__} time",
                stream_id=stream_id,
                offset=0,
            )
        rows.append((seq, data, updated_at))
    return rows


def _gap(rows: list[Row], ttl: float) -> bool:
    """Whether the log expired between two of ``rows`` (and began anew)."""
    return any(rows[i][2] - rows[i - 1][2] > ttl for i in range(1, len(rows)))


def _decode(stream_id: str, rows: list[Row], start: int, cursor: int) -> tuple[list[Event], Anchor]:
    """The events of ``rows`` (the first at position ``start``) from ``cursor`` on."""
    events: list[Event] = []
    first = start
    for _, data, _ in rows:
        first = start + len(events)
        events.extend(decode_log(stream_id, (data,), start=first))
    seq, _, updated_at = rows[-1]
    return events[max(cursor - start, 0) :], Anchor(seq, updated_at, first)


def _delete_through(conn: sqlite3.Connection, stream_id: str, seq: int) -> None:
    conn.execute(
        "DELETE FROM mainspring_checkpoints WHERE stream_id = ? AND seq <= ?",
        (stream_id, seq),
    )
