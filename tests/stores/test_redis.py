"""Redis-specific behaviour of RedisCheckpointStore and RedisRunLock, on a real redis-server."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

pytest.importorskip("redis", reason='needs redis-py (pip install -e ".[test]")')

import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection

from mainspring.errors import CheckpointCorrupt, ConfigError, SchemaTooNew, StoreError
from mainspring.events import TextDelta, TurnComplete
from mainspring.stores import SCHEMA_VERSION, CheckpointStore, RunLock
from mainspring.stores.redis import RedisCheckpointStore, RedisRunLock
from tests.stores.servers import (
    RedisServer,
    free_port,
    redis_prefix,
    start_redis,
    stop_process,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # redis-py's asyncio client


@pytest.fixture
def prefix() -> str:
    return redis_prefix()


@pytest.fixture
async def raw(redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    """A plain client, to look at and tamper with what the stores wrote."""
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def store(redis_server: RedisServer, prefix: str) -> AsyncIterator[RedisCheckpointStore]:
    store = await RedisCheckpointStore.open(redis_server.url, prefix=prefix)
    try:
        yield store
    finally:
        await store.aclose()


def test_the_stores_keep_the_protocols() -> None:
    assert issubclass(RedisCheckpointStore, CheckpointStore)
    assert issubclass(RedisRunLock, RunLock)


@pytest.mark.parametrize("cls", [RedisCheckpointStore, RedisRunLock])
async def test_an_unreachable_server_is_a_store_error_naming_it_without_the_password(
    cls: type[RedisCheckpointStore] | type[RedisRunLock],
) -> None:
    port = free_port()  # nothing listens there
    with anyio.fail_after(10), pytest.raises(StoreError) as caught:
        await cls.open(f"redis://:hunter2@127.0.0.1:{port}/0")
    message = str(caught.value)
    assert f"cannot reach Redis at 127.0.0.1:{port}" in message
    assert "hunter2" not in message


async def test_a_url_that_is_not_redis_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        await RedisCheckpointStore.open("postgresql://user:hunter2@db/app")
    assert "hunter2" not in str(caught.value)


async def test_first_open_records_the_schema_version(
    redis_server: RedisServer, raw: aioredis.Redis, prefix: str
) -> None:
    assert await raw.get(f"{prefix}schema") is None
    lock = await RedisRunLock.open(redis_server.url, prefix=prefix)
    await lock.aclose()
    assert await raw.get(f"{prefix}schema") == str(SCHEMA_VERSION).encode()


@pytest.mark.parametrize("cls", [RedisCheckpointStore, RedisRunLock])
async def test_a_newer_schema_refuses_to_open(
    cls: type[RedisCheckpointStore] | type[RedisRunLock],
    redis_server: RedisServer,
    raw: aioredis.Redis,
    prefix: str,
) -> None:
    await raw.set(f"{prefix}schema", SCHEMA_VERSION + 1)
    with pytest.raises(SchemaTooNew, match=f"schema version {SCHEMA_VERSION + 1}"):
        await cls.open(redis_server.url, prefix=prefix)
    # Another prefix is another layout: it opens.
    other = await cls.open(redis_server.url, prefix=redis_prefix())
    await other.aclose()


async def test_a_garbled_schema_key_is_a_store_error(
    redis_server: RedisServer, raw: aioredis.Redis, prefix: str
) -> None:
    await raw.set(f"{prefix}schema", "one")
    with pytest.raises(StoreError, match="not a schema version"):
        await RedisCheckpointStore.open(redis_server.url, prefix=prefix)


@pytest.mark.parametrize(
    "garbage",
    [b"\xff\xfe not utf-8", b"{not json", b'{"type": "no_such_event"}', b'{"type": "text_delta"}'],
)
async def test_a_corrupt_record_names_stream_and_offset(
    store: RedisCheckpointStore, raw: aioredis.Redis, prefix: str, garbage: bytes
) -> None:
    await store.append("s1", TextDelta(text="one"))
    await store.append("s1", TextDelta(text="two"))
    await raw.rpush(f"{prefix}stream:s1", garbage)
    await store.append("s1", TextDelta(text="after"))
    with pytest.raises(CheckpointCorrupt) as caught:
        await store.load("s1")
    assert caught.value.stream_id == "s1"
    assert caught.value.offset == 2
    assert "'s1'" in str(caught.value)
    assert "offset 2" in str(caught.value)


async def test_a_stream_expires_ttl_after_its_last_append(
    redis_server: RedisServer, raw: aioredis.Redis, prefix: str
) -> None:
    # Time passes on the server's clock only: the test ages the key (PEXPIRE), so
    # no assertion depends on how fast a busy machine runs it.
    store = await RedisCheckpointStore.open(redis_server.url, prefix=prefix, ttl=60)
    try:
        key = f"{prefix}stream:s"
        await store.append("s", TextDelta(text="a"))
        assert 1_000 < await raw.pttl(key) <= 60_000
        await raw.pexpire(key, 1_000)  # most of its time to live has passed
        await store.append("s", TextDelta(text="b"))  # slides the expiry
        assert await raw.pttl(key) > 1_000
        assert await store.load("s") == [TextDelta(text="a"), TextDelta(text="b")]
        await raw.pexpire(key, 1)  # all of it has passed
        with anyio.fail_after(60):  # (only a hang)
            while await raw.exists(key):  # noqa: ASYNC110  # polling the server's expiry
                await anyio.sleep(0.01)
        assert await store.load("s") == []
        assert await raw.exists(key) == 0
    finally:
        await store.aclose()


async def test_a_ttl_must_be_positive(redis_server: RedisServer, prefix: str) -> None:
    with pytest.raises(ConfigError):
        await RedisCheckpointStore.open(redis_server.url, prefix=prefix, ttl=0)


async def test_append_is_one_round_trip(
    store: RedisCheckpointStore,
    raw: aioredis.Redis,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every request redis-py sends goes through ``send_packed_command``; count them."""
    await store.append("s", TextDelta(text="warm up"))  # the pool's connection is made
    before = await raw.info("commandstats")
    sent: list[bytes] = []
    original = AbstractConnection.send_packed_command

    async def counting(
        self: AbstractConnection, command: object, check_health: bool = True
    ) -> None:
        sent.append(command if isinstance(command, bytes) else b"".join(command))  # type: ignore[arg-type]  # bytes or a list of bytes
        await original(self, command, check_health)  # type: ignore[arg-type]  # passed through

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting)
    await store.append("s", TurnComplete(stop_reason="end_turn", turn_index=0))
    monkeypatch.undo()

    assert len(sent) == 1, sent
    assert b"RPUSH" in sent[0] and b"PEXPIRE" in sent[0]
    after = await raw.info("commandstats")
    for command in ("rpush", "pexpire", "exec"):  # the server ran both, in a transaction
        calls = after[f"cmdstat_{command}"]["calls"]
        assert calls == before.get(f"cmdstat_{command}", {"calls": 0})["calls"] + 1
    assert await raw.pttl(f"{prefix}stream:s") > 0


async def test_streams_are_shared_across_clients_and_survive_reopening(
    redis_server: RedisServer, store: RedisCheckpointStore, prefix: str
) -> None:
    await store.append("s", TextDelta(text="from worker one ✓"))
    other = await RedisCheckpointStore.open(redis_server.url, prefix=prefix)
    try:
        assert await other.load("s") == [TextDelta(text="from worker one ✓")]
    finally:
        await other.aclose()
    elsewhere = await RedisCheckpointStore.open(redis_server.url, prefix=redis_prefix())
    try:
        assert await elsewhere.load("s") == []  # prefixes keep deployments apart
    finally:
        await elsewhere.aclose()


async def test_a_lease_is_a_key_with_the_lease_ttl(
    redis_server: RedisServer, raw: aioredis.Redis, prefix: str
) -> None:
    lock = await RedisRunLock.open(redis_server.url, prefix=prefix)
    try:
        # Minutes apart, so no stall of a busy machine between two calls blurs them.
        assert await lock.acquire("sess", "w1", ttl=600)
        assert await raw.get(f"{prefix}lock:sess") == b"w1"
        assert 300_000 < await raw.pttl(f"{prefix}lock:sess") <= 600_000
        assert await lock.refresh("sess", "w1", ttl=3600)
        assert 1_800_000 < await raw.pttl(f"{prefix}lock:sess") <= 3_600_000
        assert await lock.acquire("sess", "w1", ttl=600)  # re-acquiring sets the new ttl
        assert await raw.pttl(f"{prefix}lock:sess") <= 600_000
        await lock.release("sess", "w1")
        assert await raw.exists(f"{prefix}lock:sess") == 0
    finally:
        await lock.aclose()


async def test_a_lost_server_is_a_store_error(tmp_path: Path) -> None:
    """The server goes away after open: calls fail with StoreError, not a redis-py error."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("needs redis-server (Debian package redis-server)")
    process, port = start_redis(binary, tmp_path)
    try:
        store = await RedisCheckpointStore.open(f"redis://127.0.0.1:{port}/0")
    finally:
        stop_process(process)
    try:
        with anyio.fail_after(30), pytest.raises(StoreError, match=f"127.0.0.1:{port}"):
            await store.append("s", TextDelta(text="lost"))
    finally:
        await store.aclose()
