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

- with an embedder: ``mainspring_memory_vec``, a sqlite-vec ``vec0`` table
  (cosine distance, the scope as partition key) holding each item's vector
  under the item's ``seq``, and two rows of ``mainspring_meta``
  (``memory_embedder``, ``memory_dimensions``) naming the model the vectors
  came from. Opened with another model, the table is rebuilt and every text
  embedded again before the store is used; items without a vector (remembered
  while the embedder failed, or by a store without one) get theirs then too.

sqlite-vec needs a ``sqlite3`` that can load extensions; where Python's cannot,
``pysqlite3`` (``pip install "mainspring[vec]"``) is used, and without either
an embedder is refused with that advice (:class:`~mainspring.errors.ConfigError`).

Recall with an embedder fuses the FTS5 ranking and the nearest vectors by
reciprocal rank (:func:`~mainspring.memory.fuse`); ``where`` filters apply to
both (to the vector side after its nearest-neighbour search, which therefore
looks further when there is a filter).

A query is user text, never FTS5 syntax: it is cut into words at whitespace,
ASCII punctuation and control characters (where the tokenizer cuts too), each
word is quoted as a phrase and the phrases are joined with ``OR``. A phrase
holds no quote, NUL or surrogate, so no input can make a syntax error; FTS5
tokenizes each phrase by its own rules, so a word means the same in the query
as in the text. Every item sharing a word is a candidate, ranked by BM25.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import time
import uuid
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Self

import anyio
from pydantic import JsonValue

from mainspring.errors import ConfigError, StoreError
from mainspring.memory import (
    DEFAULT_SCOPE,
    MemoryItem,
    Where,
    candidates,
    check_k,
    check_memory_text,
    check_meta,
    check_query,
    check_scope,
    check_str,
    check_where,
    embed_one,
    fuse,
)
from mainspring.stores._sqlite import CODEC_ERRORS, Clock, Database, StrPath, transaction

if TYPE_CHECKING:
    from mainspring.embeddings import Embedder, Vector

log = logging.getLogger("mainspring.memory")

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
    SELECT m.seq, m.id, m.text, m.meta, m.created_at, bm25(mainspring_memory_fts) AS rank
    FROM mainspring_memory_fts JOIN mainspring_memory AS m ON m.seq = mainspring_memory_fts.rowid
    WHERE mainspring_memory_fts MATCH ? AND m.scope = ? {where}
    ORDER BY rank, m.created_at DESC, m.id
    LIMIT ?
"""
_NEAREST = """
    WITH v AS MATERIALIZED (
        SELECT rowid, item_id, distance FROM mainspring_memory_vec
        WHERE embedding MATCH ? AND k = ? AND scope = ?
    )
    SELECT m.seq, m.id, m.text, m.meta, m.created_at, v.distance
    FROM v JOIN mainspring_memory AS m ON m.seq = v.rowid AND m.id = v.item_id
    WHERE m.scope = ? {where}
    ORDER BY v.distance, m.created_at DESC, m.id
    LIMIT ?
"""
_MAX_KNN = 4096  # sqlite-vec's largest k
_REINDEX_BATCH = 256
_MODEL_KEY = "memory_embedder"
_DIMS_KEY = "memory_dimensions"

Row = tuple[int, str, str, str, float, float]
"""seq, id, text, meta, created_at, rank or distance."""
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
    """Memories in a SQLite file, recalled by FTS5 full-text search (BM25), and by vectors.

    ``SQLiteMemoryStore(path)`` does no I/O: the file is opened by :meth:`open`,
    ``async with``, or the first operation. :meth:`remember` and :meth:`forget`
    commit with ``synchronous=NORMAL``: a commit survives the process crashing; a
    power loss may roll back the last ones.
    """

    def __init__(
        self, path: StrPath, *, embedder: Embedder | None = None, clock: Clock = time.time
    ) -> None:
        """A store on the SQLite file at ``path`` (created, with its directory, if missing).

        Args:
            path: The database file; may be shared with the other SQLite stores.
            embedder: Recall by meaning too (hybrid), with vectors in sqlite-vec.
            clock: Wall-clock time, stamps :attr:`MemoryItem.created_at`.

        Raises:
            ConfigError: ``path`` is not a file path, or an embedder is given and
                sqlite-vec cannot be loaded here (the message says what to install).
        """
        self._path = _check_path(path)
        self._clock = clock
        self._embedder = embedder
        self._driver: ModuleType = sqlite3
        if embedder is not None:
            from mainspring.stores._vec import vec_driver

            self._driver = vec_driver()
        self._db: Database | None = None
        self._opening = anyio.Lock()
        self._closed = False
        self.embed_failures = 0
        """Embedder calls that failed (items were kept, recall went on by full text)."""

    @classmethod
    async def open(
        cls, path: StrPath, *, embedder: Embedder | None = None, clock: Clock = time.time
    ) -> Self:
        """Open (or create) the store in the SQLite file at ``path`` now.

        With an embedder, texts without a vector of its model are embedded first.

        Raises:
            StoreError: The file cannot be opened, is not a SQLite database, or
                this SQLite has no FTS5.
            SchemaTooNew: The file was written by a newer mainspring.
        """
        store = cls(path, embedder=embedder, clock=clock)
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
                database = await self._open_database()
                try:
                    await database.run(_create_tables)
                    if self._embedder is not None:
                        embedder = self._embedder
                        await database.run(_vector_table, embedder.model_id, embedder.dimensions)
                        await self._reindex(database)
                except BaseException:
                    await database.aclose()
                    raise
                self._db = database
            return self._db

    async def _open_database(self) -> Database:
        if self._embedder is None:
            return await Database.open(self._path)
        from mainspring.stores._vec import load_vec

        return await Database.open(self._path, driver=self._driver, prepare=load_vec)

    async def reindex(self) -> int:
        """Embed the texts that have no vector of this store's model yet; how many were.

        Raises:
            StoreError: The file cannot be written.
        """
        return await self._reindex(await self._database())

    async def _reindex(self, database: Database) -> int:
        embedder = self._embedder
        if embedder is None:
            return 0
        from mainspring.embeddings import embed_batched

        done = 0
        after = 0
        while True:
            rows = await database.run(_without_vector, after, _REINDEX_BATCH)
            if not rows:
                return done
            try:
                vectors = await embed_batched(embedder, [text for _, _, text, _ in rows])
            except Exception:
                self.embed_failures += 1
                log.warning("embedding stored memories failed; they stay full-text only",
                            exc_info=True)  # fmt: skip
                return done
            await database.run(_put_vectors, embedder.model_id, rows, vectors)
            done += len(rows)
            after = rows[-1][0]

    def _embed_failed(self) -> None:
        self.embed_failures += 1

    async def remember(
        self,
        text: str,
        *,
        scope: str = DEFAULT_SCOPE,
        meta: Mapping[str, JsonValue] | None = None,
    ) -> MemoryItem:
        """Store ``text`` in ``scope``; committed when this returns.

        With an embedder the text is embedded first; if that fails the text is
        stored without a vector (counted in :attr:`embed_failures`).

        Raises:
            ConfigError: See :meth:`MemoryStore.remember`.
            StoreError: The file cannot be written.
        """
        text = check_memory_text(text)
        scope = check_scope(scope)
        stored_meta, meta_json = check_meta(meta)
        database = await self._database()
        vector = await embed_one(self._embedder, text, self._embed_failed)
        item = MemoryItem(
            id=uuid.uuid4().hex, text=text, meta=stored_meta, created_at=self._clock()
        )
        model = self._embedder.model_id if self._embedder is not None else None
        await database.run(_remember, item, scope, meta_json, model, vector)
        return item

    async def recall(
        self,
        query: str,
        *,
        k: int = 5,
        scope: str = DEFAULT_SCOPE,
        where: Mapping[str, JsonValue] | None = None,
    ) -> Sequence[MemoryItem]:
        """The best ``k`` matches in ``scope``.

        :attr:`MemoryItem.score` is ``-bm25`` without an embedder, the fused
        reciprocal-rank score with one.

        Raises:
            ConfigError: See :meth:`MemoryStore.recall`.
            StoreError: The file cannot be read, or a stored row cannot be decoded.
        """
        match = fts_query(check_query(query))
        k = check_k(k)
        scope = check_scope(scope)
        filters = check_where(where)
        if not match:
            return []
        database = await self._database()
        if self._embedder is None:
            rows = await database.run(_lexical, match, scope, filters, min(k, _MAX_LIMIT))
            return [_item(row, -float(row[5])) for row in rows]
        vector = await embed_one(self._embedder, query, self._embed_failed)
        n = candidates(k)
        lexical = await database.run(_lexical, match, scope, filters, n)
        nearest: list[Row] = []
        if vector is not None:
            nearest = await database.run(_nearest, vector, scope, filters, n)
        return _fused(lexical, nearest, k)

    async def forget(self, item_id: str, *, scope: str = DEFAULT_SCOPE) -> bool:
        """Delete the item from ``scope``; ``False`` if it is not there."""
        item_id = check_str("item_id", item_id)
        scope = check_scope(scope)
        database = await self._database()
        return await database.run(_forget, item_id, scope, self._embedder is not None)

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
    except Exception as exc:
        if "fts5" in str(exc):
            raise StoreError(
                f"this SQLite ({sqlite3.sqlite_version}) has no FTS5, which memory needs: {exc}"
            ) from exc
        raise


def _meta_value(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM mainspring_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _vector_table(conn: sqlite3.Connection, model: str, dimensions: int) -> None:
    """The vec0 table for ``model``: rebuilt (emptied) when it held another model's vectors."""
    with transaction(conn, write=True):
        same = _meta_value(conn, _MODEL_KEY) == model and _meta_value(conn, _DIMS_KEY) == str(
            dimensions
        )
        if not same:
            conn.execute("DROP TABLE IF EXISTS mainspring_memory_vec")
            for key, value in ((_MODEL_KEY, model), (_DIMS_KEY, str(dimensions))):
                conn.execute(
                    "INSERT INTO mainspring_meta (key, value) VALUES (?, ?)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS mainspring_memory_vec USING vec0("
            f" scope text partition key, embedding float[{int(dimensions)}]"
            " distance_metric=cosine, +item_id text)"
        )
        # Vectors of items forgotten by a store that could not reach this table.
        conn.execute(
            "DELETE FROM mainspring_memory_vec"
            " WHERE rowid NOT IN (SELECT seq FROM mainspring_memory)"
        )


Pending = tuple[int, str, str, str]
"""seq, scope, text, id of an item that needs a vector."""


def _without_vector(conn: sqlite3.Connection, after: int, limit: int) -> list[Pending]:
    # A vector counts only beside the item it was made for: a seq reused after a
    # forget that could not reach the vector table has a stale one.
    rows = conn.execute(
        "SELECT seq, scope, text, id FROM mainspring_memory WHERE seq > ?"
        " AND (seq, id) NOT IN (SELECT rowid, item_id FROM mainspring_memory_vec)"
        " ORDER BY seq LIMIT ?",
        (after, limit),
    ).fetchall()
    return [(int(seq), str(scope), str(text), str(i)) for seq, scope, text, i in rows]


def _put_vectors(
    conn: sqlite3.Connection,
    model: str,
    rows: list[Pending],
    vectors: list[Vector],
) -> None:
    from sqlite_vec import serialize_float32

    with transaction(conn, write=True):
        if _meta_value(conn, _MODEL_KEY) != model:
            return  # another store switched the model meanwhile: never mix vectors
        for (seq, scope, _, item_id), vector in zip(rows, vectors, strict=True):
            exists = conn.execute(
                "SELECT 1 FROM mainspring_memory WHERE seq = ? AND id = ?", (seq, item_id)
            ).fetchone()
            if exists is not None:  # still there (not forgotten while it was embedded)
                conn.execute("DELETE FROM mainspring_memory_vec WHERE rowid = ?", (seq,))
                conn.execute(
                    "INSERT INTO mainspring_memory_vec (rowid, scope, embedding, item_id)"
                    " VALUES (?, ?, ?, ?)",
                    (seq, scope, serialize_float32(vector), item_id),
                )


def _remember(
    conn: sqlite3.Connection,
    item: MemoryItem,
    scope: str,
    meta: str,
    model: str | None,
    vector: Vector | None,
) -> None:
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
        if vector is not None and _meta_value(conn, _MODEL_KEY) == model:
            from sqlite_vec import serialize_float32

            conn.execute(
                "INSERT INTO mainspring_memory_vec (rowid, scope, embedding, item_id)"
                " VALUES (?, ?, ?, ?)",
                (cursor.lastrowid, scope, serialize_float32(vector), item.id),
            )


def _where_sql(where: Where) -> tuple[str, list[str]]:
    """SQL for the filter (keys are checked to be plain identifiers) and its parameters."""
    clauses = [f"AND COALESCE(m.meta -> '$.{key}', 'null') = ?" for key, _ in where]
    return " ".join(clauses), [value for _, value in where]


def _lexical(
    conn: sqlite3.Connection, match: str, scope: str, where: Where, limit: int
) -> list[Row]:
    clause, params = _where_sql(where)
    rows = conn.execute(_RECALL.format(where=clause), (match, scope, *params, limit)).fetchall()
    return [tuple(row) for row in rows]


def _nearest(
    conn: sqlite3.Connection, vector: Vector, scope: str, where: Where, limit: int
) -> list[Row]:
    from sqlite_vec import serialize_float32

    clause, params = _where_sql(where)
    knn = min(limit * 10 if where else limit, _MAX_KNN)
    rows = conn.execute(
        _NEAREST.format(where=clause),
        (serialize_float32(vector), knn, scope, scope, *params, limit),
    ).fetchall()
    return [tuple(row) for row in rows]


def _item(row: Row, score: float) -> MemoryItem:
    _, item_id, text, meta, created_at, _ = row
    try:
        decoded: dict[str, JsonValue] = json.loads(meta)
        if not isinstance(decoded, dict):
            raise TypeError(f"meta is a {type(decoded).__name__}, not an object")
        if not isinstance(text, str):
            raise TypeError(f"text is {type(text).__name__}, not text")
        if not isinstance(created_at, int | float):
            raise TypeError(f"created_at is {type(created_at).__name__}, not a number")
    except CODEC_ERRORS as exc:
        raise StoreError(f"stored memory {item_id!r} cannot be decoded: {exc}") from exc
    return MemoryItem(
        id=str(item_id), text=text, score=score, meta=decoded, created_at=float(created_at)
    )


def _fused(lexical: list[Row], nearest: list[Row], k: int) -> list[MemoryItem]:
    rows = {str(row[1]): row for row in (*lexical, *nearest)}
    scores = fuse([[str(r[1]) for r in lexical], [str(r[1]) for r in nearest]])
    ranked = sorted(scores, key=lambda i: (-scores[i], -float(rows[i][4]), i))
    return [_item(rows[i], scores[i]) for i in ranked[:k]]


def _forget(conn: sqlite3.Connection, item_id: str, scope: str, vectors: bool) -> bool:
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
        if vectors:
            conn.execute("DELETE FROM mainspring_memory_vec WHERE rowid = ?", (row[0],))
        # Without sqlite-vec loaded the vector table cannot be touched; its stale row is
        # ignored (vectors match their item's id) and purged when a store with an
        # embedder opens the file.
    return True
