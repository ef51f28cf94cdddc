"""Shared records (:class:`~mainspring.stores.base.SharedRecords`): the in-memory one, and checks.

Every backend keeps the same contract (``tests/stores/test_records.py``):

- memory: :class:`InMemoryRecords` (one process; :class:`InMemorySessionStore`
  holds one);
- SQLite: ``SQLiteSessionStore`` (table ``mainspring_records``, one statement
  or one write transaction per operation, fsynced);
- PostgreSQL: ``PostgresSessionStore`` (table ``mainspring_records``, one
  statement per operation under a per-owner advisory lock when bounded);
- Redis: ``RedisRunLock`` (a key per record with the record's TTL and a sorted
  set per owner, changed by one script).

:func:`shared_records` picks the store of a deployment that holds them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from mainspring.errors import ConfigError
from mainspring.stores.base import RecordAdded, SharedRecords

__all__ = ["InMemoryRecords", "check_kind", "check_record_ttl", "shared_records"]

_KIND = re.compile(r"[A-Za-z0-9_-]{1,40}")


def check_kind(kind: object) -> str:
    """``kind`` if it is a short name (letters, digits, ``_``, ``-``), else :class:`ConfigError`."""
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise ConfigError(f"a record kind is 1-40 of A-Z a-z 0-9 _ -, not {kind!r}")
    return kind


def check_record_ttl(ttl: object, limit: object = None) -> float:
    """``ttl`` as a float if positive (and ``limit`` ``None`` or positive), else ConfigError."""
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise ConfigError(f"ttl must be a positive number of seconds, not {ttl!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"limit must be a positive integer or None, not {limit!r}")
    return float(ttl)


class InMemoryRecords:
    """:class:`~mainspring.stores.base.SharedRecords` in a dict: one process only.

    It holds at most ``max_records`` live records: past that a put is refused
    (``full``) rather than a live record forgotten (a used nonce must stay used).
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, max_records: int = 100_000
    ) -> None:
        """An empty table (expiry measured on ``clock``)."""
        self._clock = clock
        self.max_records = max_records
        self._records: dict[tuple[str, str], tuple[str, str, float]] = {}
        self._puts = 0

    def _live(self, kind: str, key: str) -> tuple[str, str, float] | None:
        record = self._records.get((kind, key))
        if record is not None and record[2] <= self._clock():
            del self._records[(kind, key)]
            return None
        return record

    def _sweep(self) -> None:
        now = self._clock()
        for where in [k for k, r in self._records.items() if r[2] <= now]:
            del self._records[where]

    async def put_record(
        self,
        kind: str,
        key: str,
        value: str,
        *,
        owner: str,
        ttl: float,
        limit: int | None = None,
    ) -> RecordAdded:
        """Add the record unless a live one has the key or ``owner`` holds ``limit``."""
        check_kind(kind)
        seconds = check_record_ttl(ttl, limit)
        self._puts += 1
        if self._puts % 1024 == 0:  # expired records do not pile up
            self._sweep()
        if self._live(kind, key) is not None:
            return "exists"
        if len(self._records) >= self.max_records:
            self._sweep()
            if len(self._records) >= self.max_records:
                return "full"
        if limit is not None:
            held = sum(1 for (k, _), r in self._records.items() if k == kind and r[0] == owner)
            if held >= limit:
                self._sweep()
                held = sum(1 for (k, _), r in self._records.items() if k == kind and r[0] == owner)
                if held >= limit:
                    return "full"
        self._records[(kind, key)] = (owner, value, self._clock() + seconds)
        return "added"

    async def take_record(self, kind: str, key: str) -> tuple[str, str] | None:
        """Remove the live record; ``(owner, value)`` or ``None``."""
        record = self._live(check_kind(kind), key)
        if record is None:
            return None
        del self._records[(kind, key)]
        return record[0], record[1]

    async def owned_records(
        self, kind: str, owner: str, *, limit: int = 1000
    ) -> list[tuple[str, str]]:
        """``(key, value)`` of ``owner``'s live records of ``kind``, sorted by key."""
        check_kind(kind)
        now = self._clock()
        found = sorted(
            (key, value)
            for (k, key), (who, value, until) in self._records.items()
            if k == kind and who == owner and until > now
        )
        return found[: max(limit, 0)]


def shared_records(*stores: Any) -> SharedRecords | None:
    """The first of ``stores`` that holds shared records, or ``None``.

    Give it a deployment's session store, then its run lock.
    """
    for store in stores:
        if isinstance(store, SharedRecords):
            return store
    return None
