"""Where notes and todo lists live: a small keyed store, by namespace.

``SessionState`` has no room for a tool's own data, so the toolkits keep
theirs beside it: a :class:`ToolDataStore` holds JSON values under
``(namespace, key)``. Notes use ``notes/<caller's data scope>`` with
sequential keys, todo lists ``todo`` keyed by the caller and the session id —
a session reloaded from its session store (same id) finds its list again.
:class:`SQLiteToolDataStore` can share the session store's file (its one table is
``mainspring_tool_data``).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Protocol

import anyio.to_thread
from pydantic import JsonValue

__all__ = ["InMemoryToolDataStore", "SQLiteToolDataStore", "ToolDataStore"]


class ToolDataStore(Protocol):
    """JSON values under ``(namespace, key)``; keys sort as strings."""

    async def get(self, namespace: str, key: str) -> JsonValue | None:
        """The value, or ``None``."""
        ...

    async def put(self, namespace: str, key: str, value: JsonValue) -> None:
        """Set the value."""
        ...

    async def append(self, namespace: str, value: JsonValue) -> str:
        """Store ``value`` under the next sequential key (``"00000001"``…); that key."""
        ...

    async def items(
        self, namespace: str, *, after: str = "", limit: int = 100
    ) -> list[tuple[str, JsonValue]]:
        """Up to ``limit`` entries with keys after ``after``, in key order."""
        ...

    async def count(self, namespace: str) -> int:
        """How many entries the namespace has."""
        ...


def _key(number: int) -> str:
    return f"{number:08d}"


class InMemoryToolDataStore:
    """A :class:`ToolDataStore` in a dict (for tests and one process)."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    async def get(self, namespace: str, key: str) -> JsonValue | None:
        """The value, or ``None``."""
        raw = self._data.get(namespace, {}).get(key)
        return None if raw is None else json.loads(raw)

    async def put(self, namespace: str, key: str, value: JsonValue) -> None:
        """Set the value (stored as JSON, so it is copied)."""
        with self._lock:
            self._data.setdefault(namespace, {})[key] = json.dumps(value)

    async def append(self, namespace: str, value: JsonValue) -> str:
        """Store under the next sequential key."""
        with self._lock:
            entries = self._data.setdefault(namespace, {})
            key = _key(len(entries) + 1)
            entries[key] = json.dumps(value)
            return key

    async def items(
        self, namespace: str, *, after: str = "", limit: int = 100
    ) -> list[tuple[str, JsonValue]]:
        """Entries after ``after``, in key order."""
        entries = self._data.get(namespace, {})
        keys = sorted(k for k in entries if k > after)[:limit]
        return [(k, json.loads(entries[k])) for k in keys]

    async def count(self, namespace: str) -> int:
        """How many entries the namespace has."""
        return len(self._data.get(namespace, {}))


class SQLiteToolDataStore:
    """A :class:`ToolDataStore` in one SQLite file (table ``mainspring_tool_data``)."""

    def __init__(self, path: str | Path) -> None:
        """Open (and create) the file; work runs in worker threads."""
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS mainspring_tool_data (namespace TEXT NOT NULL, "
                "key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (namespace, key))"
            )

    def _run(self, sql: str, args: tuple[object, ...]) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._conn.execute(sql, args).fetchall())

    async def get(self, namespace: str, key: str) -> JsonValue | None:
        """The value, or ``None``."""
        rows = await anyio.to_thread.run_sync(
            self._run,
            "SELECT key, value FROM mainspring_tool_data WHERE namespace = ? AND key = ?",
            (namespace, key),
        )
        return json.loads(rows[0][1]) if rows else None

    async def put(self, namespace: str, key: str, value: JsonValue) -> None:
        """Set the value."""
        await anyio.to_thread.run_sync(
            self._run,
            "INSERT INTO mainspring_tool_data (namespace, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value",
            (namespace, key, json.dumps(value)),
        )

    def _append(self, namespace: str, value: str) -> str:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")  # one writer across processes
            try:
                (count,) = self._conn.execute(
                    "SELECT COUNT(*) FROM mainspring_tool_data WHERE namespace = ?", (namespace,)
                ).fetchone()
                key = _key(int(count) + 1)
                self._conn.execute(
                    "INSERT INTO mainspring_tool_data (namespace, key, value) VALUES (?, ?, ?)",
                    (namespace, key, value),
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            return key

    async def append(self, namespace: str, value: JsonValue) -> str:
        """Store under the next sequential key (in one immediate transaction)."""
        return await anyio.to_thread.run_sync(self._append, namespace, json.dumps(value))

    async def items(
        self, namespace: str, *, after: str = "", limit: int = 100
    ) -> list[tuple[str, JsonValue]]:
        """Entries after ``after``, in key order."""
        rows = await anyio.to_thread.run_sync(
            self._run,
            "SELECT key, value FROM mainspring_tool_data WHERE namespace = ? AND key > ? "
            "ORDER BY key LIMIT ?",
            (namespace, after, limit),
        )
        return [(k, json.loads(v)) for k, v in rows]

    async def count(self, namespace: str) -> int:
        """How many entries the namespace has."""
        rows = await anyio.to_thread.run_sync(
            self._run,
            "SELECT COUNT(*), '' FROM mainspring_tool_data WHERE namespace = ?",
            (namespace,),
        )
        return int(rows[0][0])

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()
