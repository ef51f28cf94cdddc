"""Store fixtures: every contract test runs against every backend.

Backends that need a server (Redis, PostgreSQL) start a real one on
loopback for the test session. Where the server binary or package is
missing they skip with the reason; under CI (``MAINSPRING_CI=1``) such a
skip is a failure, so CI always runs them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from mainspring.stores import (
    CheckpointStore,
    InMemoryCheckpointStore,
    InMemoryRunLock,
    InMemorySessionStore,
    RunLock,
    SessionStore,
    SharedRecords,
)
from tests.stores import backend_postgres, backend_redis, backend_sqlite

CHECKPOINT_BACKENDS = ["memory", "sqlite", "redis"]
SESSION_BACKENDS = ["memory", "sqlite", "postgres"]
LOCK_BACKENDS = ["memory", "sqlite", "redis"]
# redis-py and psycopg's async APIs run on asyncio only.
ASYNCIO_ONLY = {"redis", "postgres"}


def _only_asyncio(request: pytest.FixtureRequest, backend: str) -> None:
    if backend in ASYNCIO_ONLY and request.getfixturevalue("anyio_backend") != "asyncio":
        pytest.skip(f"{backend} client is asyncio-only")


@pytest.fixture(params=CHECKPOINT_BACKENDS)
async def checkpoint_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[CheckpointStore]:
    backend: str = request.param
    _only_asyncio(request, backend)
    store: CheckpointStore
    if backend == "memory":
        store = InMemoryCheckpointStore()
    elif backend == "sqlite":
        store = await backend_sqlite.checkpoint_store(tmp_path)
    else:
        store = await backend_redis.checkpoint_store(request)
    try:
        yield store
    finally:
        await store.aclose()


@pytest.fixture(params=CHECKPOINT_BACKENDS)
async def checkpoint_stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[CheckpointStore, CheckpointStore]]:
    """Two stores over the same logs: one process appending, another following."""
    backend: str = request.param
    _only_asyncio(request, backend)
    stores: tuple[CheckpointStore, CheckpointStore]
    if backend == "memory":
        one = InMemoryCheckpointStore()
        stores = (one, one)
    elif backend == "sqlite":
        stores = await backend_sqlite.checkpoint_stores(tmp_path)
    else:
        stores = await backend_redis.checkpoint_stores(request)
    try:
        yield stores
    finally:
        for store in stores:
            await store.aclose()


@pytest.fixture(params=SESSION_BACKENDS)
async def session_stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[SessionStore, SessionStore]]:
    """Two stores over the same data: two workers."""
    backend: str = request.param
    _only_asyncio(request, backend)
    stores: tuple[SessionStore, SessionStore]
    if backend == "memory":
        one = InMemorySessionStore()
        stores = (one, one)
    elif backend == "sqlite":
        stores = await backend_sqlite.session_stores(tmp_path)
    else:
        stores = await backend_postgres.session_stores(request)
    try:
        yield stores
    finally:
        for store in stores:
            await store.aclose()


@pytest.fixture
def session_store(session_stores: tuple[SessionStore, SessionStore]) -> SessionStore:
    return session_stores[0]


@pytest.fixture(params=LOCK_BACKENDS)
async def run_locks(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[RunLock, RunLock]]:
    """Two lock clients over the same data: two workers."""
    backend: str = request.param
    _only_asyncio(request, backend)
    locks: tuple[RunLock, RunLock]
    if backend == "memory":
        one = InMemoryRunLock()
        locks = (one, one)
    elif backend == "sqlite":
        locks = await backend_sqlite.run_locks(tmp_path)
    else:
        locks = await backend_redis.run_locks(request)
    try:
        yield locks
    finally:
        for lock in locks:
            await lock.aclose()


RECORD_BACKENDS = ["memory", "sqlite", "postgres", "redis"]


@pytest.fixture(params=RECORD_BACKENDS)
async def shared_records(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[SharedRecords, SharedRecords]]:
    """Two clients of one backend's shared records: two workers."""
    backend: str = request.param
    _only_asyncio(request, backend)
    clients: tuple[Any, Any]
    if backend == "memory":
        one = InMemorySessionStore()
        clients = (one, one)
    elif backend == "sqlite":
        clients = await backend_sqlite.session_stores(tmp_path)
    elif backend == "postgres":
        clients = await backend_postgres.session_stores(request)
    else:
        clients = await backend_redis.run_locks(request)
    try:
        assert all(isinstance(c, SharedRecords) for c in clients)
        yield cast("tuple[SharedRecords, SharedRecords]", clients)
    finally:
        for client in clients:
            await client.aclose()
