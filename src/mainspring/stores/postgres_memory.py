"""PostgreSQL memory store: full-text search and pgvector, fused in one query.

Import it from this module (it needs the ``postgres`` extra)::

    from mainspring.stores.postgres_memory import PostgresMemoryStore

    memory = await PostgresMemoryStore.open("postgresql://…", embedder=OpenAIEmbedder(…))

One table, ``mainspring_memory``, created when missing (with ``CREATE
EXTENSION IF NOT EXISTS vector``): per item its id, scope, text (as JSON text:
PostgreSQL's ``text`` cannot hold NUL), meta (JSON text), created_at, a
``tsvector`` of its words (:func:`~mainspring.memory.words`, diacritics
removed, the ``simple`` configuration), and — with an embedder — the vector
and the :attr:`~mainspring.embeddings.Embedder.model_id` it came from.

Vectors of one model get a partial HNSW index of their own (cosine distance,
``embedding::vector(N)`` where ``model = …``), and recall only ever compares
vectors of the store's model. Opened with another model, the store embeds
every text again (in batches) before it is used; the other model's vectors are
replaced as it goes, never compared with the new ones.

Recall is one statement: the full-text ranking (``ts_rank_cd``) and the
nearest vectors (HNSW with iterative scan, so scope and ``where`` filters do
not starve it) each give their best candidates, fused by reciprocal rank.
Without an embedder, or while it fails, recall is full-text only.

One connection per store object, one operation at a time; psycopg's async
connection runs on asyncio only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from pydantic import JsonValue

try:
    import psycopg
    from psycopg import sql

    from mainspring.stores._postgres import Connection, PostgresConnection
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'mainspring.stores.postgres_memory needs: pip install "mainspring[postgres]"'
    ) from exc

from mainspring.errors import StoreError
from mainspring.memory import (
    DEFAULT_SCOPE,
    RRF_K,
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
    words,
)

if TYPE_CHECKING:
    from mainspring.embeddings import Embedder, Vector

__all__ = ["PostgresMemoryStore"]

log = logging.getLogger("mainspring.memory")

_SETUP_LOCK = 0x6D61696E6D656D  # "mainmem": serializes table creation across workers
_MAX_QUERY_WORDS = 64
_REINDEX_BATCH = 256
_MAX_LIMIT = 2**62

_TABLE = """CREATE TABLE IF NOT EXISTS mainspring_memory (
    seq bigserial PRIMARY KEY,
    id text NOT NULL UNIQUE,
    scope text NOT NULL,
    body text NOT NULL,
    meta text NOT NULL,
    created_at double precision NOT NULL,
    tsv tsvector NOT NULL,
    model text,
    embedding vector
)"""
_INDEXES = (
    "CREATE INDEX IF NOT EXISTS mainspring_memory_tsv ON mainspring_memory USING gin (tsv)",
    "CREATE INDEX IF NOT EXISTS mainspring_memory_scope ON mainspring_memory (scope, created_at)",
)

_LEXICAL = """
    SELECT m.id, m.body, m.meta, m.created_at, ts_rank_cd(m.tsv, q.query) AS rank
    FROM mainspring_memory AS m, (SELECT to_tsquery('simple', {tsq}) AS query) AS q
    WHERE m.scope = {scope} AND m.tsv @@ q.query {where}
    ORDER BY rank DESC, m.created_at DESC, m.id
    LIMIT {k}
"""
_HYBRID = """
    WITH q AS (SELECT to_tsquery('simple', {tsq}) AS query),
    lex AS (
        SELECT seq, row_number() OVER (ORDER BY rank DESC, created_at DESC, id) AS r FROM (
            SELECT m.seq, m.created_at, m.id, ts_rank_cd(m.tsv, q.query) AS rank
            FROM mainspring_memory AS m, q
            WHERE m.scope = {scope} AND m.tsv @@ q.query {where}
            ORDER BY rank DESC, m.created_at DESC, m.id
            LIMIT {n}
        ) AS l
    ),
    vec AS (
        SELECT seq, row_number() OVER (ORDER BY distance, created_at DESC, id) AS r FROM (
            SELECT m.seq, m.created_at, m.id,
                (m.embedding::vector({dims})) <=> ({vector}::vector({dims})) AS distance
            FROM mainspring_memory AS m
            WHERE m.model = {model} AND m.scope = {scope} {where}
            ORDER BY distance
            LIMIT {n}
        ) AS v
    )
    SELECT m.id, m.body, m.meta, m.created_at,
        COALESCE(1.0 / ({rrf} + lex.r), 0) + COALESCE(1.0 / ({rrf} + vec.r), 0) AS score
    FROM lex FULL JOIN vec ON lex.seq = vec.seq
    JOIN mainspring_memory AS m ON m.seq = COALESCE(lex.seq, vec.seq)
    ORDER BY score DESC, m.created_at DESC, m.id
    LIMIT {k}
"""


def tsquery(query: str) -> str:
    """A ``to_tsquery`` text matching any word of ``query``; ``""`` if it has none.

    Words are letters and digits only (:func:`~mainspring.memory.words`), each
    quoted as a lexeme: no input can make a syntax error.
    """
    distinct = list(dict.fromkeys(words(query)))[:_MAX_QUERY_WORDS]
    return " | ".join(f"'{word}'" for word in distinct)


def _vector_literal(vector: Vector) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


class PostgresMemoryStore:
    """Memories in PostgreSQL: full-text search, pgvector HNSW, fused by reciprocal rank."""

    def __init__(
        self,
        url: str,
        *,
        embedder: Embedder | None = None,
        connect_timeout: int = 10,
        clock: Any = time.time,
    ) -> None:
        """Prepare a store on ``url`` without connecting; use :meth:`open`.

        Raises:
            ConfigError: ``url`` is not a PostgreSQL URL or connection string.
        """
        self._db = PostgresConnection(
            url,
            connect_timeout=connect_timeout,
            set_up=self._set_up,
            setup_lock=_SETUP_LOCK,
            what="memory",
        )
        self._embedder = embedder
        self._clock = clock
        self._indexed = False
        self.embed_failures = 0
        """Embedder calls that failed (items were kept, recall went on by full text)."""

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        embedder: Embedder | None = None,
        connect_timeout: int = 10,
        clock: Any = time.time,
    ) -> Self:
        """Connect, create the table if missing, and embed texts lacking this model's vector.

        Raises:
            StoreError: The server cannot be reached, or has no pgvector.
        """
        store = cls(url, embedder=embedder, connect_timeout=connect_timeout, clock=clock)
        await store._db.connect()
        await store.reindex()
        return store

    async def __aenter__(self) -> Self:
        await self._db.connect()
        if not self._indexed:
            await self.reindex()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _set_up(self, conn: Connection) -> None:
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            await conn.execute(_TABLE)
            for ddl in _INDEXES:
                await conn.execute(ddl)
            if self._embedder is not None:
                await conn.execute(_hnsw_index(self._embedder))
        except psycopg.Error as exc:
            hint = " (memory needs the pgvector extension)" if "vector" in str(exc) else ""
            raise StoreError(
                f"PostgreSQL at {self._db.where}: setting up memory failed{hint}: {exc}"
            ) from exc

    async def reindex(self) -> int:
        """Embed the texts that have no vector of this store's model; how many were.

        Raises:
            StoreError: The database cannot be written.
        """
        embedder = self._embedder
        if embedder is None:
            return 0
        from mainspring.embeddings import embed_batched

        done, after = 0, 0
        while True:
            async with self._db.use("listing texts to embed") as conn:
                cur = await conn.execute(
                    "SELECT seq, body FROM mainspring_memory"
                    " WHERE model IS DISTINCT FROM %s AND seq > %s ORDER BY seq LIMIT %s",
                    (embedder.model_id, after, _REINDEX_BATCH),
                )
                rows = [(int(seq), json.loads(str(body))) for seq, body in await cur.fetchall()]
            if not rows:
                self._indexed = True
                return done
            try:
                vectors = await embed_batched(embedder, [text for _, text in rows])
            except Exception:
                self.embed_failures += 1
                log.warning("embedding stored memories failed; they stay full-text only",
                            exc_info=True)  # fmt: skip
                self._indexed = True
                return done
            async with self._db.use("storing vectors") as conn, conn.cursor() as cur:
                await cur.executemany(
                    "UPDATE mainspring_memory SET model = %s, embedding = %s::vector"
                    " WHERE seq = %s",
                    [
                        (embedder.model_id, _vector_literal(v), seq)
                        for (seq, _), v in zip(rows, vectors, strict=True)
                    ],
                )
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

        Raises:
            ConfigError: See :meth:`MemoryStore.remember`.
            StoreError: The database cannot be written.
        """
        text = check_memory_text(text)
        scope = check_scope(scope)
        stored_meta, meta_json = check_meta(meta)
        vector = await embed_one(self._embedder, text, self._embed_failed)
        item = MemoryItem(
            id=uuid.uuid4().hex, text=text, meta=stored_meta, created_at=self._clock()
        )
        model = self._embedder.model_id if vector is not None and self._embedder else None
        async with self._db.use("remember") as conn:
            await conn.execute(
                "INSERT INTO mainspring_memory"
                " (id, scope, body, meta, created_at, tsv, model, embedding)"
                " VALUES (%s, %s, %s, %s, %s, to_tsvector('simple', %s), %s, %s::vector)",
                (
                    item.id,
                    scope,
                    json.dumps(text),
                    meta_json,
                    item.created_at,
                    " ".join(words(text)),
                    model,
                    None if vector is None else _vector_literal(vector),
                ),
            )
        return item

    async def recall(
        self,
        query: str,
        *,
        k: int = 5,
        scope: str = DEFAULT_SCOPE,
        where: Mapping[str, JsonValue] | None = None,
    ) -> Sequence[MemoryItem]:
        """The best ``k`` matches in ``scope`` (see :meth:`MemoryStore.recall`).

        :attr:`MemoryItem.score` is ``ts_rank_cd`` without an embedder, the
        fused reciprocal-rank score with one.

        Raises:
            ConfigError: See :meth:`MemoryStore.recall`.
            StoreError: The database cannot be read, or a row cannot be decoded.
        """
        tsq = tsquery(check_query(query))
        k = min(check_k(k), _MAX_LIMIT)
        scope = check_scope(scope)
        filters = check_where(where)
        if not tsq:
            return []
        vector = await embed_one(self._embedder, query, self._embed_failed)
        where_sql = _where_sql(filters)
        args = {
            "tsq": sql.Literal(tsq),
            "scope": sql.Literal(scope),
            "where": where_sql,
            "k": sql.Literal(k),
        }
        if vector is None or self._embedder is None:
            statement = sql.SQL(_LEXICAL).format(**args)
        else:
            statement = sql.SQL(_HYBRID).format(
                **args,
                n=sql.Literal(candidates(k)),
                dims=sql.Literal(self._embedder.dimensions),
                vector=sql.Literal(_vector_literal(vector)),
                model=sql.Literal(self._embedder.model_id),
                rrf=sql.Literal(RRF_K),
            )
        async with self._db.use("recall") as conn, conn.transaction():
            await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            await conn.execute(
                sql.SQL("SET LOCAL hnsw.ef_search = {}").format(
                    sql.Literal(max(40, min(candidates(k), 1000)))
                )
            )
            cur = await conn.execute(statement)
            rows = await cur.fetchall()
        return [self._item(row) for row in rows]

    def _item(self, row: tuple[Any, ...]) -> MemoryItem:
        item_id, body, meta, created_at, score = row
        try:
            text: object = json.loads(str(body))
            decoded: object = json.loads(str(meta))
            if not isinstance(decoded, dict) or not isinstance(text, str):
                raise TypeError("stored text or meta has the wrong type")
        except (ValueError, TypeError, RecursionError) as exc:
            raise StoreError(
                f"PostgreSQL at {self._db.where}: stored memory {item_id!r} is unreadable: {exc}"
            ) from exc
        return MemoryItem(
            id=str(item_id),
            text=text,
            score=float(score),
            meta=decoded,
            created_at=float(created_at),
        )

    async def forget(self, item_id: str, *, scope: str = DEFAULT_SCOPE) -> bool:
        """Delete the item from ``scope``; ``False`` if it is not there."""
        item_id = check_str("item_id", item_id)
        scope = check_scope(scope)
        async with self._db.use("forget") as conn:
            cur = await conn.execute(
                "DELETE FROM mainspring_memory WHERE id = %s AND scope = %s", (item_id, scope)
            )
            return cur.rowcount == 1

    async def aclose(self) -> None:
        """Close the connection."""
        await self._db.aclose()


def _hnsw_index(embedder: Embedder) -> sql.Composed:
    """A partial HNSW index over this model's vectors (named after the model)."""
    digest = hashlib.sha256(embedder.model_id.encode()).hexdigest()[:16]
    return sql.SQL(
        "CREATE INDEX IF NOT EXISTS {name} ON mainspring_memory USING hnsw"
        " ((embedding::vector({dims})) vector_cosine_ops) WHERE model = {model}"
    ).format(
        name=sql.Identifier(f"mainspring_memory_hnsw_{digest}"),
        dims=sql.Literal(int(embedder.dimensions)),
        model=sql.Literal(embedder.model_id),
    )


def _where_sql(where: Where) -> sql.Composable:
    clauses = [
        sql.SQL("AND COALESCE((m.meta::json -> {key})::text, 'null') = {value}").format(
            key=sql.Literal(key), value=sql.Literal(value)
        )
        for key, value in where
    ]
    return sql.SQL(" ").join(clauses)
