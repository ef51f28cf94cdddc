"""SQLite memory store: remembered texts, recalled with full-text search (FTS5, BM25).

The embedded durable :class:`~mainspring.memory.MemoryStore`::

    async with SQLiteMemoryStore("var/mainspring.db") as memory:
        await memory.remember("the user prefers metric units", scope="user-42")
        items = await memory.recall("which units?", scope="user-42")

It may share the database file with the other SQLite stores. Like them it holds
one connection (WAL journal, a busy timeout) and runs one operation at a time on
it in a worker thread, so the event loop never blocks; asyncio and trio alike.
Tables, created when missing:

- ``mainspring_memory``: one row per item (id, scope, text, meta as JSON text,
  created_at); the text is kept exactly, NUL characters included.
- ``mainspring_memory_fts``: an FTS5 index over that text (external content,
  ``unicode61`` tokenizer without diacritics), kept in step in each transaction.

A query is user text, never FTS5 syntax: it is cut into words at whitespace,
ASCII punctuation and control characters (where the tokenizer cuts too), each
word is quoted as a phrase and the phrases are joined with ``OR``. A phrase
holds no quote, NUL or surrogate, so no input can make a syntax error; FTS5
tokenizes each phrase by its own rules, so a word means the same in the query
as in the text. Every item sharing a word is a candidate, ranked by BM25.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Self

import anyio
from pydantic import JsonValue

from mainspring.errors import ConfigError, StoreError
from mainspring.memory import (
    DEFAULT_SCOPE,
    MemoryItem,
    check_k,
    check_memory_text,
    check_meta,
    check_query,
    check_scope,
    check_str,
)
from mainspring.stores._sqlite import CODEC_ERRORS, Clock, Database, StrPath, transaction

__all__ = ["SQLiteMemoryStore", "fts_query"]

MAX_QUERY_WORDS = 64
"""Distinct query words searched for; the rest of a longer query is ignored."""

_SEPARATORS = re.compile(r"[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x9f\s\ud800-\udfff]+")
"""ASCII non-alphanumerics (every FTS5 operator and quote), controls, whitespace, surrogates."""

_TABLES = (
    """CREATE TABLE IF NOT EXISTS mainspring_memory (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        scope TEXT NOT NULL,
        text TEXT NOT NULL,
        meta TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
    """CREATE VIRTUAL TABLE IF NOT EXISTS mainspring_memory_fts USING fts5(
        text,
        content = 'mainspring_memory',
        content_rowid = 'seq',
        tokenize = 'unicode61 remove_diacritics 2'
    )""",
)

_RECALL = """
    SELECT m.id, m.text, m.meta, m.created_at, bm25(mainspring_memory_fts) AS rank
    FROM mainspring_memory_fts JOIN mainspring_memory AS m ON m.seq = mainspring_memory_fts.rowid
    WHERE mainspring_memory_fts MATCH ? AND m.scope = ?
    ORDER BY rank, m.created_at DESC, m.id
    LIMIT ?
"""
_MAX_LIMIT = 2**62  # SQLite integers are 64-bit


def fts_query(query: str) -> str:
    """An FTS5 query matching any word of ``query``; ``""`` if it has none.

    Each distinct word (compared case-insensitively) becomes a quoted phrase, at
    most :data:`MAX_QUERY_WORDS` of them.
    """
    distinct: dict[str, str] = {}
    for word in _SEPARATORS.split(query):
        if not word:
            continue
        distinct.setdefault(word.lower(), word)
        if len(distinct) == MAX_QUERY_WORDS:
            break
    return " OR ".join(f'"{word}"' for word in distinct.values())


class SQLiteMemoryStore:
    """Memories in a SQLite file, recalled by FTS5 full-text search with BM25 ranking.

    ``SQLiteMemoryStore(path)`` does no I/O: the file is opened by :meth:`open`,
    ``async with``, or the first operation. :meth:`remember` and :meth:`forget`
    commit with ``synchronous=NORMAL``: a commit survives the process crashing; a
    power loss may roll back the last ones.
    """

    def __init__(self, path: StrPath, *, clock: Clock = time.time) -> None:
        """A store on the SQLite file at ``path`` (created, with its directory, if missing).

        Args:
            path: The database file; may be shared with the other SQLite stores.
            clock: Wall-clock time, stamps :attr:`MemoryItem.created_at`.

        Raises:
            ConfigError: ``path`` is not a file path.
        """
        self._path = _check_path(path)
        self._clock = clock
        self._db: Database | None = None
        self._opening = anyio.Lock()
        self._closed = False

    @classmethod
    async def open(cls, path: StrPath, *, clock: Clock = time.time) -> Self:
        """Open (or create) the store in the SQLite file at ``path`` now.

        Raises:
            StoreError: The file cannot be opened, is not a SQLite database, or
                this SQLite has no FTS5.
            SchemaTooNew: The file was written by a newer mainspring.
        """
        store = cls(path, clock=clock)
        await store._database()
        return store

    async def __aenter__(self) -> Self:
        await self._database()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _database(self) -> Database:
        database = self._db
        if database is not None:  # a concurrent aclose makes its run raise StoreError
            return database
        async with self._opening:
            if self._closed:
                raise StoreError(f"SQLite memory store {str(self._path)!r} is closed")
            if self._db is None:
                database = await Database.open(self._path)
                try:
                    await database.run(_create_tables)
                except BaseException:
                    await database.aclose()
                    raise
                self._db = database
            return self._db

    async def remember(
        self,
        text: str,
        *,
        scope: str = DEFAULT_SCOPE,
        meta: Mapping[str, JsonValue] | None = None,
    ) -> MemoryItem:
        """Store ``text`` in ``scope``; committed when this returns.

        Raises:
            ConfigError: See :meth:`MemoryStore.remember`.
            StoreError: The file cannot be written.
        """
        text = check_memory_text(text)
        scope = check_scope(scope)
        stored_meta, meta_json = check_meta(meta)
        item = MemoryItem(
            id=uuid.uuid4().hex, text=text, meta=stored_meta, created_at=self._clock()
        )
        database = await self._database()
        await database.run(_remember, item, scope, meta_json)
        return item

    async def recall(
        self, query: str, *, k: int = 5, scope: str = DEFAULT_SCOPE
    ) -> Sequence[MemoryItem]:
        """The best ``k`` matches in ``scope``; :attr:`MemoryItem.score` is ``-bm25``.

        Raises:
            ConfigError: See :meth:`MemoryStore.recall`.
            StoreError: The file cannot be read, or a stored row cannot be decoded.
        """
        match = fts_query(check_query(query))
        k = check_k(k)
        scope = check_scope(scope)
        if not match:
            return []
        database = await self._database()
        return await database.run(_recall, match, scope, min(k, _MAX_LIMIT))

    async def forget(self, item_id: str, *, scope: str = DEFAULT_SCOPE) -> bool:
        """Delete the item from ``scope``; ``False`` if it is not there."""
        item_id = check_str("item_id", item_id)
        scope = check_scope(scope)
        database = await self._database()
        return await database.run(_forget, item_id, scope)

    async def aclose(self) -> None:
        """Close the connection (idempotent); the store cannot be used after."""
        with anyio.CancelScope(shield=True):
            async with self._opening:
                self._closed = True
                database, self._db = self._db, None
        if database is not None:
            await database.aclose()


def _check_path(path: object) -> StrPath:
    if not isinstance(path, str | os.PathLike):
        raise ConfigError(f"path must be a str or os.PathLike, not {type(path).__name__}")
    if str(path) in ("", ":memory:"):
        raise ConfigError("an SQLite store needs a file path; use InMemoryMemoryStore instead")
    return path


def _create_tables(conn: sqlite3.Connection) -> None:
    try:
        with transaction(conn, write=True):
            for ddl in _TABLES:
                conn.execute(ddl)
    except sqlite3.OperationalError as exc:
        if "fts5" in str(exc):
            raise StoreError(
                f"this SQLite ({sqlite3.sqlite_version}) has no FTS5, which memory needs: {exc}"
            ) from exc
        raise


def _remember(conn: sqlite3.Connection, item: MemoryItem, scope: str, meta: str) -> None:
    with transaction(conn, write=True):
        cursor = conn.execute(
            "INSERT INTO mainspring_memory (id, scope, text, meta, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (item.id, scope, item.text, meta, item.created_at),
        )
        conn.execute(
            "INSERT INTO mainspring_memory_fts (rowid, text) VALUES (?, ?)",
            (cursor.lastrowid, item.text),
        )


def _recall(conn: sqlite3.Connection, match: str, scope: str, limit: int) -> list[MemoryItem]:
    rows = conn.execute(_RECALL, (match, scope, limit)).fetchall()
    items: list[MemoryItem] = []
    for item_id, text, meta, created_at, rank in rows:
        try:
            decoded: dict[str, JsonValue] = json.loads(meta)
            if not isinstance(decoded, dict):
                raise TypeError(f"meta is a {type(decoded).__name__}, not an object")
        except CODEC_ERRORS as exc:
            raise StoreError(f"stored memory {item_id!r} cannot be decoded: {exc}") from exc
        items.append(
            MemoryItem(
                id=str(item_id),
                text=str(text),
                score=-float(rank),
                meta=decoded,
                created_at=float(created_at),
            )
        )
    return items


def _forget(conn: sqlite3.Connection, item_id: str, scope: str) -> bool:
    with transaction(conn, write=True):
        row = conn.execute(
            "SELECT seq, text FROM mainspring_memory WHERE id = ? AND scope = ?", (item_id, scope)
        ).fetchone()
        if row is None:
            return False
        # External content: the index forgets exactly the tokens it was given.
        conn.execute(
            "INSERT INTO mainspring_memory_fts (mainspring_memory_fts, rowid, text)"
            " VALUES ('delete', ?, ?)",
            row,
        )
        conn.execute("DELETE FROM mainspring_memory WHERE seq = ?", (row[0],))
    return True
