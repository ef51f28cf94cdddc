"""The one PostgreSQL connection both PostgreSQL stores hold (``stores/_postgres.py``).

Against a real server: a connection left inside a transaction is replaced
(and set up again) before the next operation; a set-up that fails closes its
connection and is tried again on the next use; the memory store, like the
session store, fails one call on a lost connection and then reconnects.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

pytest.importorskip("psycopg", reason='needs psycopg (pip install -e ".[test]")')

import psycopg
from psycopg.conninfo import make_conninfo

from mainspring.embeddings import HashingEmbedder
from mainspring.errors import ConfigError, StoreError
from mainspring.stores._postgres import Connection, PostgresConnection
from mainspring.stores.postgres_memory import PostgresMemoryStore
from tests.stores.servers import Schemas

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async connection


@pytest.fixture
async def raw(postgres_url: str) -> AsyncIterator[psycopg.AsyncConnection[tuple[object, ...]]]:
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        yield conn


class SetUps:
    """A set-up hook that records the connections it set up (and can be told to fail)."""

    def __init__(self) -> None:
        self.connections: list[Connection] = []
        self.fail = False

    async def __call__(self, conn: Connection) -> None:
        self.connections.append(conn)
        await conn.execute("CREATE TABLE IF NOT EXISTS set_up_ran (n int)")
        if self.fail:
            await conn.execute("SELECT 1 / 0")


def holder(url: str, set_ups: SetUps) -> PostgresConnection:
    return PostgresConnection(
        url, connect_timeout=10, set_up=set_ups, setup_lock=0x7E57, what="the test tables"
    )


async def test_a_connection_left_inside_a_transaction_is_replaced_and_set_up_again(
    postgres_url: str,
) -> None:
    set_ups = SetUps()
    db = holder(postgres_url, set_ups)
    try:
        async with db.use("first") as conn:
            await conn.execute("BEGIN")  # an operation that never finished its transaction
            await conn.execute("INSERT INTO set_up_ran VALUES (1)")
        left = set_ups.connections[0]
        async with db.use("second") as conn:
            cur = await conn.execute("SELECT count(*) FROM set_up_ran")
            assert await cur.fetchone() == (0,)  # the half-done insert was never committed
        assert len(set_ups.connections) == 2 and set_ups.connections[1] is not left
        assert left.closed
        async with db.use("third"):
            pass
        assert len(set_ups.connections) == 2  # an idle connection is kept
    finally:
        await db.aclose()
    assert set_ups.connections[1].closed


async def test_a_failed_set_up_closes_its_connection_and_is_tried_again(postgres_url: str) -> None:
    set_ups = SetUps()
    set_ups.fail = True
    db = holder(postgres_url, set_ups)
    try:
        with pytest.raises(StoreError, match="setting up the test tables failed"):
            await db.connect()
        assert set_ups.connections[0].closed
        set_ups.fail = False
        async with db.use("after") as conn:
            cur = await conn.execute("SELECT count(*) FROM set_up_ran")
            assert await cur.fetchone() == (0,)  # the failed set-up's table was rolled back too
        assert len(set_ups.connections) == 2
    finally:
        await db.aclose()


async def test_a_database_error_names_the_operation_and_the_connection_goes_on(
    postgres_url: str,
) -> None:
    db = holder(postgres_url, SetUps())
    try:
        with pytest.raises(StoreError, match=r"PostgreSQL at .*: counting things failed"):
            async with db.use("counting things") as conn:
                await conn.execute("SELECT * FROM no_such_table")
        async with db.use("next") as conn:
            cur = await conn.execute("SELECT 41 + 1")
            assert await cur.fetchone() == (42,)
    finally:
        await db.aclose()


@pytest.mark.parametrize(
    "url", ["postgresql://app:hunter2@db/app?nonsense=1", "dbname=app hunter2 host=db"]
)
def test_the_memory_store_refuses_a_malformed_url_without_the_password(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        PostgresMemoryStore(url)
    assert "hunter2" not in str(caught.value)
    assert caught.value.__cause__ is None  # libpq's message may quote the password


async def test_the_memory_store_fails_one_call_on_a_lost_connection_then_reconnects(
    postgres_schemas: Schemas, raw: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    # (a schema that sees the pgvector extension, whichever test ran first on this server)
    url = make_conninfo(postgres_schemas.url(), application_name="memory-victim")
    store = await PostgresMemoryStore.open(url, embedder=HashingEmbedder())
    try:
        await store.remember("the user prefers metric units")
        await raw.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'memory-victim'"
        )
        with pytest.raises(StoreError, match=r"PostgreSQL at .*: recall failed"):
            await store.recall("metric units")
        found = await store.recall("metric units")
        assert [item.text for item in found] == ["the user prefers metric units"]
    finally:
        await store.aclose()
