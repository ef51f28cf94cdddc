"""Stores chosen by URL: every scheme, and every misuse failing clearly at startup."""

from __future__ import annotations

from pathlib import Path

import pytest

from mainspring.errors import ConfigError, StoreError
from mainspring.stores import (
    InMemoryCheckpointStore,
    InMemoryRunLock,
    InMemorySessionStore,
    SQLiteCheckpointStore,
    SQLiteRunLock,
    SQLiteSessionStore,
)
from mainspring.stores.urls import (
    open_checkpoint_store,
    open_run_lock,
    open_session_store,
    open_stores,
)

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "url", ["", "nothing", "mysql://db", "sqlite:/x.db", "file:///x", "memory:"]
)
async def test_unknown_or_malformed_urls_fail_with_the_schemes_to_use(url: str) -> None:
    with pytest.raises(ConfigError, match="sqlite:///"):
        await open_stores(url)


async def test_sqlite_url_fills_every_role_with_one_file(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    stores = await open_stores(f"sqlite:///{path}")
    try:
        assert isinstance(stores.sessions, SQLiteSessionStore)
        assert isinstance(stores.checkpoints, SQLiteCheckpointStore)
        assert isinstance(stores.locks, SQLiteRunLock)
        assert path.exists()
        kwargs = stores.session_kwargs()
        assert kwargs["session_store"] is stores.sessions
    finally:
        await stores.aclose()


async def test_memory_urls_with_a_name_share_their_data() -> None:
    one = await open_stores("memory://shared-test")
    two = await open_stores("memory://shared-test")
    fresh = await open_stores("memory://")
    assert isinstance(one.sessions, InMemorySessionStore)
    assert isinstance(one.checkpoints, InMemoryCheckpointStore)
    assert isinstance(one.locks, InMemoryRunLock)
    assert one.sessions is two.sessions and one.locks is two.locks
    assert fresh.sessions is not one.sessions


async def test_backends_refuse_roles_they_do_not_hold() -> None:
    with pytest.raises(ConfigError, match="not sessions"):
        await open_session_store("redis://127.0.0.1:1")
    with pytest.raises(ConfigError, match="sessions only"):
        await open_checkpoint_store("postgresql://localhost/x")
    with pytest.raises(ConfigError, match="sessions only"):
        await open_run_lock("postgres://localhost/x")


async def test_a_relative_sqlite_path_is_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = await open_session_store("sqlite:///rel.db")
    await store.aclose()
    assert (tmp_path / "rel.db").exists()


async def test_an_unreachable_server_fails_at_startup_and_opens_nothing(
    tmp_path: Path, anyio_backend: str
) -> None:
    if anyio_backend != "asyncio":
        pytest.skip("redis client is asyncio-only")
    pytest.importorskip("redis", reason='needs redis-py (pip install -e ".[test]")')
    with pytest.raises(StoreError, match="cannot reach Redis"):
        await open_stores(
            sessions=f"sqlite:///{tmp_path / 'a.db'}", checkpoints="redis://127.0.0.1:1"
        )
