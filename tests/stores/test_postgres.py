"""PostgreSQL-specific behaviour of PostgresSessionStore, on a real server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("psycopg", reason='needs psycopg (pip install -e ".[test]")')

import psycopg
from psycopg.conninfo import make_conninfo

from mainspring.errors import ConfigError, SchemaTooNew, StoreError
from mainspring.events import PendingAction
from mainspring.messages import Message, ToolCallPart, ToolResultPart
from mainspring.state import Call, SessionState, Turn, WriteRecord
from mainspring.stores import SCHEMA_VERSION, SessionStore
from mainspring.stores.postgres import PostgresSessionStore
from tests import strategies
from tests.stores.servers import free_port

pytestmark = pytest.mark.anyio

TABLES = {
    "mainspring_meta",
    "mainspring_sessions",
    "mainspring_messages",
    "mainspring_decisions",
    "mainspring_writes",
    "mainspring_spend",
    "mainspring_records",
    "mainspring_tasks",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async connection


@pytest.fixture
async def raw(postgres_url: str) -> AsyncIterator[psycopg.AsyncConnection[tuple[object, ...]]]:
    """A plain connection on the test's schema, to look at and tamper with the tables."""
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[PostgresSessionStore]:
    store = await PostgresSessionStore.open(postgres_url)
    try:
        yield store
    finally:
        await store.aclose()


def state_with(*texts: str, session_id: str = "s") -> SessionState:
    return SessionState(
        session_id=session_id,
        agent_name="agent",
        messages=[Message.user(text) for text in texts],
    )


async def rows(
    raw: psycopg.AsyncConnection[tuple[object, ...]], query: str, *params: object
) -> list[tuple[object, ...]]:
    cur = await raw.execute(query, params)
    return await cur.fetchall()


def test_the_store_keeps_the_protocol() -> None:
    assert issubclass(PostgresSessionStore, SessionStore)


async def test_an_unreachable_server_is_a_store_error_naming_it_without_the_password() -> None:
    port = free_port()  # nothing listens there
    with anyio.fail_after(20), pytest.raises(StoreError) as caught:
        await PostgresSessionStore.open(f"postgresql://app:hunter2@127.0.0.1:{port}/app")
    message = str(caught.value)
    assert f"cannot reach PostgreSQL at 127.0.0.1:{port}" in message
    assert "hunter2" not in message


@pytest.mark.parametrize(
    "url", ["postgresql://app:hunter2@db/app?nonsense=1", "dbname=app hunter2 host=db"]
)
async def test_a_malformed_url_is_a_config_error_without_the_password(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        await PostgresSessionStore.open(url)
    assert "hunter2" not in str(caught.value)
    assert caught.value.__cause__ is None  # libpq's message may quote the password


async def test_open_creates_the_tables_with_json_as_text(
    postgres_url: str, raw: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    found = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    assert await rows(raw, found) == []
    store = await PostgresSessionStore.open(postgres_url)
    await store.aclose()
    assert {name for (name,) in await rows(raw, found)} == TABLES
    kinds = await rows(
        raw,
        "SELECT data_type FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND column_name IN ('data', 'value')"
        " AND table_name <> 'mainspring_tasks'",
    )
    assert {kind for (kind,) in kinds} == {"text"}  # jsonb would reject \u0000
    tasks = await rows(
        raw,
        "SELECT data_type FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND table_name = 'mainspring_tasks' AND column_name = 'data'",
    )
    assert tasks == [("bytea",)]  # A2A tasks: protobuf bytes, not JSON
    assert await rows(raw, "SELECT key, value FROM mainspring_meta") == [
        ("schema_version", str(SCHEMA_VERSION))
    ]


async def test_a_newer_schema_refuses_to_open(
    postgres_url: str, raw: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    store = await PostgresSessionStore.open(postgres_url)
    await store.aclose()
    await raw.execute(
        "UPDATE mainspring_meta SET value = %s WHERE key = 'schema_version'",
        (str(SCHEMA_VERSION + 1),),
    )
    with pytest.raises(SchemaTooNew, match=f"schema version {SCHEMA_VERSION + 1}"):
        await PostgresSessionStore.open(postgres_url)


async def test_nul_and_other_awkward_text_round_trips(store: PostgresSessionStore) -> None:
    awkward = 'nul:\x00 line\u2028sep ✓ 日本 😀 \\u0000 quote" backslash\\'
    call = ToolCallPart(id="c\x001", name="pay", arguments={"memo\x00": awkward})
    pending = PendingAction(
        attempt_id="att-1",
        tool_use_id="c\x001",
        turn_index=1,
        name="pay",
        input={"memo\x00": awkward},
        description=awkward,
    )
    state = SessionState(
        session_id="s",
        agent_name=awkward,
        messages=[
            Message.user(awkward),
            Message(role="assistant", parts=(call,)),
            Message.tool_results(
                [ToolResultPart(tool_use_id="c\x001", name="pay", content=awkward)]
            ),
        ],
        turn=Turn(
            index=1,
            status="paused",
            steps=1,
            calls=[Call(id="c\x001", index=0, name="pay", input={"m": awkward})],
            position=0,
            pending=pending,
        ),
    )
    state.writes["1:c1"] = WriteRecord(key="1:c1", tool=awkward, status="started")
    await store.save(state)
    assert await store.load("s") == state


async def test_data_survives_reopening(postgres_url: str) -> None:
    record = WriteRecord(key="1:c1", tool="pay", status="done", attempt_id="att-1")
    first = await PostgresSessionStore.open(postgres_url)
    try:
        await first.save(state_with("hello", "again"))
        assert await first.claim_decision("s", "att-1", "approved")
        await first.record_write("s", record)
    finally:
        await first.aclose()
    second = await PostgresSessionStore.open(postgres_url)
    try:
        loaded = await second.load("s")
        assert loaded is not None
        assert [m.text for m in loaded.messages] == ["hello", "again"]
        assert loaded.decided == {"att-1": "approved"}
        assert loaded.writes == {"1:c1": record}
        assert not await second.claim_decision("s", "att-1", "rejected")
    finally:
        await second.aclose()


async def test_separate_connections_racing_for_a_claim_have_one_winner(
    postgres_url: str,
) -> None:
    stores = [await PostgresSessionStore.open(postgres_url) for _ in range(8)]
    try:
        for attempt in range(5):
            won: list[str] = []
            async with anyio.create_task_group() as tg:
                for i, one in enumerate(stores):
                    tg.start_soon(claim, one, f"att-{attempt}", f"approved-by-{i}", won)
            assert len(won) == 1
            loaded_decisions = await rows_decided(postgres_url, f"att-{attempt}")
            assert loaded_decisions == won
    finally:
        for one in stores:
            await one.aclose()


async def claim(
    store: PostgresSessionStore, attempt_id: str, decision: str, won: list[str]
) -> None:
    if await store.claim_decision("s", attempt_id, decision):
        won.append(decision)


async def rows_decided(url: str, attempt_id: str) -> list[str]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT decision FROM mainspring_decisions WHERE attempt_id = %s", (attempt_id,)
        )
        return [str(decision) for (decision,) in await cur.fetchall()]


async def test_save_inserts_only_the_new_messages(
    store: PostgresSessionStore, raw: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    """A row's ``xmin`` is the transaction that wrote it: untouched rows keep theirs."""
    stamps = "SELECT seq, xmin::text FROM mainspring_messages WHERE session_id = 's' ORDER BY seq"
    state = state_with("one", "two")
    await store.save(state)
    before = await rows(raw, stamps)
    state.messages.append(Message.assistant("three"))
    await store.save(state)
    after = await rows(raw, stamps)
    assert after[:2] == before
    assert [seq for seq, _ in after] == [0, 1, 2]
    assert after[2][1] != before[0][1]
    await store.save(state)  # nothing new: nothing written
    assert await rows(raw, stamps) == after


async def test_an_earlier_message_rewritten_rewrites_the_rows_from_it_on(
    store: PostgresSessionStore,
    raw: psycopg.AsyncConnection[tuple[object, ...]],
    postgres_url: str,
) -> None:
    stamps = "SELECT seq, xmin::text FROM mainspring_messages WHERE session_id = 's' ORDER BY seq"
    state = state_with("one", "two", "three")
    await store.save(state)
    before = await rows(raw, stamps)
    state.messages[1] = Message.assistant("TWO")  # the last message stays as it was
    await store.save(state)
    after = await rows(raw, stamps)
    assert after[0] == before[0] and after[1][1] != before[1][1]
    other = await PostgresSessionStore.open(postgres_url)  # a worker that knows nothing
    try:
        state.messages[1] = Message.assistant("two again")
        await other.save(state)
        loaded = await store.load("s")
        assert loaded is not None and loaded.messages == state.messages
    finally:
        await other.aclose()


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(transcript=st.lists(strategies.messages, max_size=6), keep=st.integers(0, 6))
async def test_random_transcripts_round_trip_as_they_grow_and_shrink(
    store: PostgresSessionStore, transcript: list[Message], keep: int
) -> None:
    state = SessionState(session_id="h", agent_name="agent")
    for message in transcript:  # saved after every message, as a session does
        state.messages.append(message)
        await store.save(state)
        assert await store.load("h") == state
    state.messages = state.messages[:keep]
    await store.save(state)
    assert await store.load("h") == state
    await store.delete("h")


async def test_a_rewritten_transcript_replaces_the_stored_one(
    store: PostgresSessionStore,
) -> None:
    state = state_with("one", "two", "three")
    await store.save(state)
    state.messages = [Message.user("summary")]  # shorter
    await store.save(state)
    loaded = await store.load("s")
    assert loaded is not None and loaded.messages == state.messages
    state.messages = [Message.user("other summary"), Message.assistant("four")]  # longer, new
    await store.save(state)
    loaded = await store.load("s")
    assert loaded is not None and loaded.messages == state.messages


async def test_an_unreadable_row_is_a_store_error_naming_the_session(
    store: PostgresSessionStore, raw: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    await store.save(state_with("one"))
    await raw.execute("UPDATE mainspring_messages SET data = '{not json' WHERE session_id = 's'")
    with pytest.raises(StoreError, match="stored session 's' is unreadable"):
        await store.load("s")


async def test_a_lost_connection_fails_one_call_then_reconnects(
    postgres_url: str, raw: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    url = make_conninfo(postgres_url, application_name="victim")
    store = await PostgresSessionStore.open(url)
    try:
        await store.save(state_with("before"))
        await raw.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'victim'"
        )
        with pytest.raises(StoreError, match="PostgreSQL at"):
            await store.load("s")
        loaded = await store.load("s")
        assert loaded is not None and [m.text for m in loaded.messages] == ["before"]
    finally:
        await store.aclose()
