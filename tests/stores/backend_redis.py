"""Fixtures for the redis backend: clients of the session's redis-server, a fresh prefix each."""

from __future__ import annotations

import pytest

from mainspring.stores import CheckpointStore, RunLock
from tests.stores.servers import RedisServer, redis_prefix

NEEDS_REDIS_PY = 'needs redis-py (pip install -e ".[test]")'


def _server(request: pytest.FixtureRequest) -> RedisServer:
    pytest.importorskip("redis", reason=NEEDS_REDIS_PY)
    server: RedisServer = request.getfixturevalue("redis_server")
    return server


async def checkpoint_store(request: pytest.FixtureRequest) -> CheckpointStore:
    server = _server(request)
    from mainspring.stores.redis import RedisCheckpointStore

    return await RedisCheckpointStore.open(server.url, prefix=redis_prefix())


async def checkpoint_stores(
    request: pytest.FixtureRequest,
) -> tuple[CheckpointStore, CheckpointStore]:
    """Two clients (two connection pools) on one server and prefix: two processes."""
    server = _server(request)
    from mainspring.stores.redis import RedisCheckpointStore

    prefix = redis_prefix()
    one = await RedisCheckpointStore.open(server.url, prefix=prefix)
    try:
        two = await RedisCheckpointStore.open(server.url, prefix=prefix)
    except BaseException:
        await one.aclose()
        raise
    return one, two


async def run_locks(request: pytest.FixtureRequest) -> tuple[RunLock, RunLock]:
    """Two clients (two connection pools) on one server and prefix: two workers."""
    server = _server(request)
    from mainspring.stores.redis import RedisRunLock

    prefix = redis_prefix()
    one = await RedisRunLock.open(server.url, prefix=prefix)
    try:
        two = await RedisRunLock.open(server.url, prefix=prefix)
    except BaseException:
        await one.aclose()
        raise
    return one, two
