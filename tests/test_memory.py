"""The MemoryStore contract (full text), run against the in-memory, SQLite FTS5 and
PostgreSQL stores (a real server; see ``tests/stores/servers.py``)."""

from __future__ import annotations

import re
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mainspring.errors import ConfigError, StoreError
from mainspring.memory import InMemoryMemoryStore, MemoryItem, MemoryStore, words
from mainspring.stores import SQLiteMemoryStore, SQLiteSessionStore
from mainspring.stores.sqlite_memory import MAX_QUERY_WORDS, fts_query
from tests.stores.servers import Schemas

pytestmark = pytest.mark.anyio

Clock = Callable[[], float]
Factory = Callable[..., MemoryStore]
"""Makes a fresh, empty store; ``clock=`` is passed on."""

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def ticking(start: float = 1000.0) -> Clock:
    """A clock that advances one second per reading."""
    now = iter(range(10**6))
    return lambda: start + next(now)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def factory(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    backend: str = request.param
    if backend == "postgres":
        if request.getfixturevalue("anyio_backend") != "asyncio":
            pytest.skip("postgres client is asyncio-only")
        schemas: Schemas = request.getfixturevalue("postgres_schemas")
        from mainspring.stores.postgres_memory import PostgresMemoryStore

    def make(*, clock: Clock = time.time) -> MemoryStore:
        if backend == "memory":
            return InMemoryMemoryStore(clock=clock)
        if backend == "postgres":
            return PostgresMemoryStore(schemas.url(), clock=clock)
        return SQLiteMemoryStore(tmp_path / f"{uuid.uuid4().hex}.db", clock=clock)

    return make


@pytest.fixture
async def store(factory: Factory) -> AsyncIterator[MemoryStore]:
    made = factory()
    try:
        yield made
    finally:
        await made.aclose()


def ids(items: object) -> list[str]:
    assert isinstance(items, list | tuple)
    found: list[str] = []
    for item in items:
        assert isinstance(item, MemoryItem)
        found.append(item.id)
    return found


# ------------------------------------------------------------------ contract


async def test_both_stores_satisfy_the_protocol(store: MemoryStore) -> None:
    assert isinstance(store, MemoryStore)


async def test_remember_then_recall_finds_by_keyword(store: MemoryStore) -> None:
    item = await store.remember("The user prefers metric units", meta={"source": "chat"})
    await store.remember("Deploys happen on Fridays")
    assert item.text == "The user prefers metric units"
    assert item.meta == {"source": "chat"}
    assert item.score == 0.0
    assert item.id

    found = await store.recall("which UNITS does the user like?")
    assert ids(found) == [item.id]
    assert found[0].text == item.text
    assert found[0].meta == item.meta
    assert found[0].created_at == item.created_at
    assert found[0].score > 0


async def test_better_match_ranks_first(store: MemoryStore) -> None:
    one_word = await store.remember("apples are on sale")
    both = await store.remember("apples and oranges are both on the list")
    unrelated = await store.remember("bananas")
    found = await store.recall("apples oranges")
    assert ids(found) == [both.id, one_word.id]
    assert found[0].score > found[1].score
    assert unrelated.id not in ids(found)


async def test_recall_returns_at_most_k(store: MemoryStore) -> None:
    for i in range(10):
        await store.remember(f"note number {i}")
    assert len(await store.recall("note", k=3)) == 3
    assert len(await store.recall("note", k=1)) == 1
    assert len(await store.recall("note", k=100)) == 10
    assert len(await store.recall("note")) == 5  # the default


async def test_ties_go_to_the_newer_item_then_the_smaller_id(factory: Factory) -> None:
    store = factory(clock=ticking())
    try:
        items = [await store.remember("same words") for _ in range(3)]
        assert ids(await store.recall("words")) == [i.id for i in reversed(items)]
    finally:
        await store.aclose()

    store = factory(clock=lambda: 5.0)
    try:
        items = [await store.remember("same words") for _ in range(4)]
        assert ids(await store.recall("words", k=10)) == sorted(i.id for i in items)
    finally:
        await store.aclose()


async def test_scopes_are_isolated(store: MemoryStore) -> None:
    alice = await store.remember("favourite colour is green", scope="alice")
    bob = await store.remember("favourite colour is blue", scope="bob")
    default = await store.remember("favourite colour is red")
    assert ids(await store.recall("favourite colour", scope="alice")) == [alice.id]
    assert ids(await store.recall("favourite colour", scope="bob")) == [bob.id]
    assert ids(await store.recall("favourite colour")) == [default.id]
    assert await store.recall("colour", scope="carol") == []
    # forget never crosses scopes either
    assert await store.forget(alice.id, scope="bob") is False
    assert await store.forget(alice.id) is False
    assert ids(await store.recall("green", scope="alice")) == [alice.id]


async def test_forget(store: MemoryStore) -> None:
    keep = await store.remember("keep this fact")
    drop = await store.remember("drop this fact")
    assert await store.forget(drop.id) is True
    assert ids(await store.recall("fact")) == [keep.id]
    assert await store.recall("drop") == []
    assert await store.forget(drop.id) is False
    assert await store.forget("no-such-id") is False
    again = await store.remember("drop this fact")  # the index stays consistent
    assert ids(await store.recall("drop")) == [again.id]


async def test_unicode_text_round_trips_and_matches_without_diacritics(
    store: MemoryStore,
) -> None:
    text = "Crème brûlée à Zürich ✓ 日本語 Ελληνικά"
    item = await store.remember(text, meta={"note": "✓ \ud800"})
    for query in ("creme", "ZURICH", "Brûlée", "日本語", "ελληνικά"):
        found = await store.recall(query)
        assert ids(found) == [item.id], query
        assert found[0].text == text
        assert found[0].meta == {"note": "✓ \ud800"}  # JSON keeps even a lone surrogate


async def test_nul_characters_in_text_survive(store: MemoryStore) -> None:
    text = "before\x00after \x00 end"
    item = await store.remember(text)
    found = await store.recall("after")
    assert ids(found) == [item.id]
    assert found[0].text == text
    assert ids(await store.recall("end\x00")) == [item.id]


async def test_meta_is_json_and_copied(store: MemoryStore) -> None:
    meta: dict[object, object] = {"n": 1, "tags": ["a", "b"], "nested": {"x": None}, 2: True}
    item = await store.remember("with meta", meta=meta)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    expected = {"n": 1, "tags": ["a", "b"], "nested": {"x": None}, "2": True}
    assert item.meta == expected
    item.meta["n"] = 99
    meta["n"] = 98
    found = await store.recall("meta")
    assert found[0].meta == expected
    found[0].meta["n"] = 97
    assert (await store.recall("meta"))[0].meta == expected


async def test_queries_without_words_recall_nothing(store: MemoryStore) -> None:
    await store.remember("something to find")
    for query in ("", "   ", "\n\t", "!!! ??? ...", "___", '""', "*"):
        assert await store.recall(query) == [], repr(query)


FTS_SYNTAX = [
    'cat"',
    '"cat',
    'cat" OR "',
    "AND",
    "OR cat",
    "cat AND",
    "NOT cat",
    "NEAR(cat mat)",
    "NEAR(cat, 2)",
    "cat*",
    "*cat",
    "-cat",
    "+cat",
    "^cat",
    "text:cat",
    "{text}: cat",
    "(cat",
    "cat)",
    "cat''",
    "'; DROP TABLE mainspring_memory; --",
    "cat\x00mat",
    "c\u0301at",
    "\ud800 cat",
]


@pytest.mark.parametrize("query", FTS_SYNTAX)
async def test_query_syntax_characters_are_plain_text(store: MemoryStore, query: str) -> None:
    cat = await store.remember("the cat sat on the mat")
    found = await store.recall(query)
    if any(w in ("cat", "mat") for w in words(query)):
        assert ids(found) == [cat.id]
    else:
        assert found in ([], [cat]) or ids(found) == [cat.id]


async def test_concurrent_remembers_are_all_kept(store: MemoryStore) -> None:
    async def writer(n: int) -> None:
        for i in range(10):
            await store.remember(f"writer{n} item{i} shared")

    async with anyio.create_task_group() as tg:
        for n in range(4):
            tg.start_soon(writer, n)
    found = await store.recall("shared", k=100)
    assert sorted(i.text for i in found) == sorted(
        f"writer{n} item{i} shared" for n in range(4) for i in range(10)
    )


# ---------------------------------------------------------------- bad inputs


async def snapshot(store: MemoryStore) -> list[MemoryItem]:
    return list(await store.recall("kept", k=100))


@pytest.mark.parametrize("k", [0, -1, True, 1.5, "3", None])
async def test_bad_k_is_a_config_error(store: MemoryStore, k: object) -> None:
    await store.remember("kept item")
    before = await snapshot(store)
    with pytest.raises(ConfigError, match="k must be a positive integer"):
        await store.recall("kept", k=k)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    assert await snapshot(store) == before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "must not be empty"),
        ("   \n", "must not be empty"),
        (None, "text must be a str"),
        (b"bytes", "text must be a str"),
        ("lone \ud800 surrogate", "not valid Unicode"),
    ],
)
async def test_bad_text_is_a_config_error_and_stores_nothing(
    store: MemoryStore, text: object, message: str
) -> None:
    await store.remember("kept item")
    before = await snapshot(store)
    with pytest.raises(ConfigError, match=message):
        await store.remember(text)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    assert await snapshot(store) == before
    assert await store.recall("surrogate bytes") == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scope": ""}, "scope must not be empty"),
        ({"scope": 7}, "scope must be a str"),
        ({"meta": ["not", "a", "mapping"]}, "meta must be a mapping"),
        ({"meta": {"x": object()}}, "meta must be JSON-serializable"),
    ],
)
async def test_bad_scope_or_meta_is_a_config_error(
    store: MemoryStore, kwargs: dict[str, object], message: str
) -> None:
    await store.remember("kept item")
    before = await snapshot(store)
    with pytest.raises(ConfigError, match=message):
        await store.remember("kept too", **kwargs)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    assert await snapshot(store) == before


async def test_bad_query_and_id_types_are_config_errors(store: MemoryStore) -> None:
    with pytest.raises(ConfigError, match="query must be a str"):
        await store.recall(None)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    with pytest.raises(ConfigError, match="item_id must be a str"):
        await store.forget(3)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused
    with pytest.raises(ConfigError, match="scope must not be empty"):
        await store.recall("x", scope="")


# ---------------------------------------------------------------- properties

SCOPES = ("a", "b")
SEED = ["alpha beta", "beta gamma", "gamma delta ✓", "a b c 1 2 3", "Ünïcödé wörds", "x\x00y"]


@PROPERTY
@given(query=st.text(), k=st.integers(1, 8), scope=st.sampled_from(SCOPES))
async def test_any_query_recalls_at_most_k_from_its_scope(
    factory: Factory, query: str, k: int, scope: str
) -> None:
    store = factory()
    try:
        by_scope: dict[str, set[str]] = {s: set() for s in SCOPES}
        for s in SCOPES:
            for text in SEED:
                by_scope[s].add((await store.remember(text, scope=s)).id)
        found = await store.recall(query, k=k, scope=scope)
        assert len(found) <= k
        assert set(ids(found)) <= by_scope[scope]
        scores = [i.score for i in found]
        assert scores == sorted(scores, reverse=True)
    finally:
        await store.aclose()


@PROPERTY
@given(
    texts=st.lists(st.text(min_size=1).filter(str.strip), min_size=1, max_size=4),
    query=st.text(),
)
async def test_any_remembered_text_round_trips(
    factory: Factory, texts: list[str], query: str
) -> None:
    store = factory()
    try:
        items = [await store.remember(t, scope="s") for t in texts]
        assert len(await store.recall(query, k=2, scope="s")) <= 2
        assert await store.recall(query, scope="other") == []
        for item in items:
            found = await store.recall(item.text, k=len(items), scope="s")
            assert len(found) <= len(items)
            if re.search("[A-Za-z0-9]", item.text):  # both tokenizers agree on ASCII words
                assert item.id in ids(found), item.text
            for hit in found:
                assert hit.text == next(i.text for i in items if i.id == hit.id)
        for item in items:
            assert await store.forget(item.id, scope="s") is True
        for item in items:
            assert await store.recall(item.text, scope="s") == []
    finally:
        await store.aclose()


# -------------------------------------------------------------------- SQLite


def fts_integrity(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute(
            "INSERT INTO mainspring_memory_fts (mainspring_memory_fts) VALUES ('integrity-check')"
        )
    finally:
        conn.close()


async def test_sqlite_memory_persists_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "memory.db"
    async with SQLiteMemoryStore(path) as store:
        kept = await store.remember("persistent fact", scope="u1", meta={"v": [1, 2]})
        gone = await store.remember("temporary fact", scope="u1")
    store = await SQLiteMemoryStore.open(path)
    try:
        found = await store.recall("fact", scope="u1")
        assert found == [  # equal scores: the newer first
            MemoryItem(
                id=gone.id,
                text=gone.text,
                meta=gone.meta,
                created_at=gone.created_at,
                score=found[0].score,
            ),
            MemoryItem(
                id=kept.id,
                text=kept.text,
                meta=kept.meta,
                created_at=kept.created_at,
                score=found[1].score,
            ),
        ]
        assert await store.forget(gone.id, scope="u1") is True
    finally:
        await store.aclose()
    async with SQLiteMemoryStore(path) as store:
        assert ids(await store.recall("fact", scope="u1")) == [kept.id]
    await anyio.to_thread.run_sync(fts_integrity, path)


async def test_sqlite_index_stays_consistent_after_forgetting(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    async with SQLiteMemoryStore(path) as store:
        items = [await store.remember(f"item {i} wörd\x00 {'x' * i}") for i in range(20)]
        for item in items[::2]:
            assert await store.forget(item.id)
        assert ids(await store.recall("item", k=50)) != []
        assert len(await store.recall("item", k=50)) == 10
    await anyio.to_thread.run_sync(fts_integrity, path)


async def test_sqlite_memory_shares_a_file_with_the_other_stores(tmp_path: Path) -> None:
    path = tmp_path / "mainspring.db"
    sessions = await SQLiteSessionStore.open(path)
    try:
        async with SQLiteMemoryStore(path) as memory:
            item = await memory.remember("shared file")
            assert ids(await memory.recall("file")) == [item.id]
        assert await sessions.load("nobody") is None
    finally:
        await sessions.aclose()


async def test_sqlite_memory_closed_store_raises_store_error(tmp_path: Path) -> None:
    store = SQLiteMemoryStore(tmp_path / "m.db")
    await store.remember("opened lazily")
    await store.aclose()
    await store.aclose()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        await store.recall("opened")
    never_opened = SQLiteMemoryStore(tmp_path / "n.db")
    await never_opened.aclose()
    with pytest.raises(StoreError, match="closed"):
        await never_opened.remember("too late")
    assert not (tmp_path / "n.db").exists()


@pytest.mark.parametrize("path", ["", ":memory:", 3])
def test_sqlite_memory_needs_a_file_path(path: object) -> None:
    with pytest.raises(ConfigError, match="path"):
        SQLiteMemoryStore(path)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused


async def test_sqlite_memory_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "not.db"
    path.write_bytes(b"definitely not sqlite" * 100)
    with pytest.raises(StoreError, match="not a SQLite database"):
        await SQLiteMemoryStore.open(path)


def test_fts_query_quotes_each_word_once() -> None:
    assert fts_query('cat "mat" NEAR(x*) Cat') == '"cat" OR "mat" OR "NEAR" OR "x"'
    assert fts_query("  ... ") == ""
    assert fts_query("a_b") == '"a" OR "b"'
    many = " ".join(f"w{i}" for i in range(MAX_QUERY_WORDS + 10))
    assert fts_query(many).count(" OR ") == MAX_QUERY_WORDS - 1


@pytest.fixture(scope="module")
def fts_table() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(text, tokenize='unicode61 remove_diacritics 2')"
    )
    conn.execute("INSERT INTO t (text) VALUES ('some text to match against')")
    yield conn
    conn.close()


@given(query=st.text())
def test_fts_query_is_always_valid_fts5(fts_table: sqlite3.Connection, query: str) -> None:
    match = fts_query(query)
    assert '""' not in match
    if match:
        fts_table.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)).fetchall()
