"""Every audit store: one chain, its head apart, safe with two worker processes appending."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from mainspring.audit import AuditLog, AuditStore, InMemoryAuditStore, verify_log
from mainspring.engine.signing import SigningKey
from mainspring.errors import StoreError
from tests.stores.servers import redis_prefix

pytestmark = pytest.mark.anyio

KEY = SigningKey.generate("shared")
KEYS = {KEY.key_id: KEY.public_key}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # redis-py and psycopg's async clients run on asyncio


@dataclass
class Backend:
    name: str
    url: str
    prefix: str = ""

    async def open(self) -> AuditStore:
        if self.name == "memory":
            return InMemoryAuditStore()
        if self.name == "redis":
            from mainspring.stores.redis import RedisAuditStore

            return await RedisAuditStore.open(self.url, prefix=self.prefix)
        if self.name == "postgres":
            from mainspring.stores.postgres_audit import PostgresAuditStore

            return await PostgresAuditStore.open(self.url)
        from mainspring.stores.urls import open_audit_store

        return await open_audit_store(self.url)


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    name = request.param
    if name == "memory":
        return Backend(name, "memory://")
    if name == "sqlite":
        return Backend(name, f"sqlite:///{tmp_path / 'audit.db'}")
    if name == "redis":
        pytest.importorskip("redis", reason='needs redis-py (pip install -e ".[test]")')
        return Backend(name, request.getfixturevalue("redis_server").url, redis_prefix())
    pytest.importorskip("psycopg", reason='needs psycopg (pip install -e ".[test]")')
    return Backend(name, request.getfixturevalue("postgres_url"))


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[AuditStore]:
    opened = await backend.open()
    try:
        yield opened
    finally:
        await opened.aclose()


async def test_entries_chain_in_order_and_the_head_names_the_last(store: AuditStore) -> None:
    log = AuditLog(store, KEY)
    made = [await log.append("approved", outcome="approved", tool=f"t{i}") for i in range(5)]
    assert [e.seq for e in made] == [1, 2, 3, 4, 5]
    assert [e.prev for e in made[1:]] == [e.hash for e in made[:-1]]
    assert await log.entries() == made
    assert await log.entries(after=3) == made[3:]
    assert [seq for seq, _ in await store.audit_entries("audit", after=1, limit=2)] == [2, 3]
    result = await verify_log(store, "audit", KEYS)
    assert result.ok and result.entries == 5
    assert result.head is not None and result.head.seq == 5 and result.head.hash == made[-1].hash


async def test_logs_in_one_store_are_apart(store: AuditStore) -> None:
    one, two = AuditLog(store, KEY, log="one"), AuditLog(store, KEY, log="two")
    await one.append("denied", outcome="denied")
    entry = await two.append("blocked", outcome="blocked")
    assert entry.seq == 1
    assert (await verify_log(store, "one", KEYS)).entries == 1
    assert await store.audit_head("three") is None
    assert (await verify_log(store, "three", KEYS)).ok  # an empty log


async def test_an_unreadable_head_stops_appends_and_nothing_is_added(store: AuditStore) -> None:
    log = AuditLog(store, KEY)
    await log.append("approved", outcome="approved")

    def broken(head: str | None) -> object:
        raise StoreError("sealing failed")

    with pytest.raises(StoreError, match="sealing failed"):
        await store.append_audit("audit", broken)  # type: ignore[arg-type]  # a seal that fails
    assert len(await store.audit_entries("audit")) == 1
    assert (await verify_log(store, "audit", KEYS)).ok


async def test_a_seq_already_held_is_refused(store: AuditStore) -> None:
    log = AuditLog(store, KEY)
    first = await log.append("approved", outcome="approved")
    head = await store.audit_head("audit")
    assert head is not None

    def stale(_: str | None) -> object:  # seals entry 1 again, as a forked writer would
        from mainspring.audit.store import Sealed

        return Sealed(1, first.to_json(), head)

    with pytest.raises(StoreError):
        await store.append_audit("audit", stale)  # type: ignore[arg-type]  # a forking seal
    assert (await verify_log(store, "audit", KEYS)).ok


def run_workers(backend: Backend, per_worker: int) -> None:
    """Two appender processes, released at once once both have opened the store."""
    raw = KEY.private_key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()).hex()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.audit.appender",
                backend.name,
                backend.url,
                backend.prefix,
                raw,
                name,
                str(per_worker),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        for name in ("w1", "w2")
    ]
    try:
        for worker in workers:  # both opened the store: then both start at once
            assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        for worker in workers:
            assert worker.wait(timeout=120) == 0
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
            for pipe in (worker.stdin, worker.stdout):
                if pipe is not None:
                    pipe.close()


@pytest.mark.parametrize("backend", ["sqlite", "redis", "postgres"], indirect=True)
async def test_two_processes_appending_at_once_make_one_chain(backend: Backend) -> None:
    per_worker = 150
    await anyio.to_thread.run_sync(run_workers, backend, per_worker)
    store = await backend.open()
    try:
        result = await verify_log(store, "audit", KEYS)
        assert result.ok, result.reason
        assert result.entries == 2 * per_worker
        got = await AuditLog(store, KEY).entries(limit=10_000)
        assert [e.seq for e in got] == list(range(1, 2 * per_worker + 1))
        for name in ("w1", "w2"):  # each worker's entries, in its own order
            mine = [e.tool for e in got if e.session_id == name]
            assert mine == [f"t{i}" for i in range(per_worker)]
    finally:
        await store.aclose()
