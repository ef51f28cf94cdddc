"""Stores chosen by URL, for the CLI, the server and the Python API alike.

=====================  =============================================  ==================
URL                    backend                                        holds
=====================  =============================================  ==================
``memory://[name]``    in-process dicts (a name shares them)          sessions, checkpoints, locks
``sqlite:///rel.db``   one SQLite file (WAL); ``sqlite:////abs.db``   sessions, checkpoints, locks
``redis://host:port``  Redis (also ``rediss://``)                     checkpoints, locks
``postgresql://…``     PostgreSQL (also ``postgres://``)              sessions, memory
=====================  =============================================  ==================

Every backend also holds audit logs (:func:`open_audit_store`, :mod:`mainspring.audit`).

Memory (:func:`open_memory_store`) takes ``memory://``, ``sqlite:///…`` and
``postgresql://…``; give it an embedder for hybrid recall.

SQLite paths follow SQLAlchemy's convention: three slashes then a relative
path, four for an absolute one.

```python
stores = await open_stores("sqlite:///agent.db")
session = Session(agent, **stores.session_kwargs())
# many workers: sessions in PostgreSQL, checkpoints and locks in Redis
stores = await open_stores(sessions="postgresql://…", checkpoints="redis://…", locks="redis://…")
```
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mainspring.errors import ConfigError
from mainspring.stores.base import CheckpointStore, RunLock, SessionStore
from mainspring.stores.memory import InMemoryCheckpointStore, InMemoryRunLock, InMemorySessionStore

__all__ = [
    "Stores",
    "open_audit_store",
    "open_checkpoint_store",
    "open_memory_store",
    "open_run_lock",
    "open_session_store",
    "open_stores",
]

if TYPE_CHECKING:
    from mainspring.audit.store import AuditStore, InMemoryAuditStore
    from mainspring.embeddings import Embedder
    from mainspring.memory import MemoryStore

_SCHEMES = ("memory", "sqlite", "redis", "rediss", "postgresql", "postgres")
_SHARED: dict[str, tuple[InMemorySessionStore, InMemoryCheckpointStore, InMemoryRunLock]] = {}
_SHARED_AUDIT: dict[str, InMemoryAuditStore] = {}


def _scheme(url: str) -> str:
    scheme, sep, _ = url.partition("://")
    if not sep or scheme not in _SCHEMES:
        raise ConfigError(
            f"unknown store URL {url!r}: use memory://, sqlite:///path, redis://host:port "
            "or postgresql://…"
        )
    return scheme


def _memory(url: str) -> tuple[InMemorySessionStore, InMemoryCheckpointStore, InMemoryRunLock]:
    name = url.removeprefix("memory://")
    lock = InMemoryRunLock()
    fresh = (InMemorySessionStore(run_lock=lock), InMemoryCheckpointStore(), lock)
    if not name:
        return fresh
    return _SHARED.setdefault(name, fresh)


def _sqlite_path(url: str) -> str:
    path = url.removeprefix("sqlite:///")
    if not path or url == path:
        raise ConfigError(
            f"a SQLite URL is sqlite:///relative/path or sqlite:////absolute/path: {url!r}"
        )
    return path


async def open_session_store(url: str) -> SessionStore:
    """A SessionStore for ``url``.

    Raises:
        ConfigError: Unknown scheme, or a backend that holds no sessions.
        StoreError: The store cannot be reached or opened.
    """
    scheme = _scheme(url)
    if scheme == "memory":
        return _memory(url)[0]
    if scheme == "sqlite":
        from mainspring.stores.sqlite import SQLiteSessionStore

        return await SQLiteSessionStore.open(_sqlite_path(url))
    if scheme in ("postgresql", "postgres"):
        from mainspring.stores.postgres import PostgresSessionStore

        return await PostgresSessionStore.open(url)
    raise ConfigError(
        f"{scheme}:// holds checkpoints and locks, not sessions: "
        "use postgresql:// or sqlite:/// for sessions"
    )


async def open_memory_store(url: str, *, embedder: Embedder | None = None) -> MemoryStore:
    """A MemoryStore for ``url``; with ``embedder``, recall is hybrid (full text and vectors).

    ``memory://`` gives a fresh in-process store (a name does not share it).

    Raises:
        ConfigError: Unknown scheme, ``redis://`` (holds no memory), or an
            embedder where sqlite-vec cannot be loaded (the message says what to install).
        StoreError: The store cannot be reached or opened.
    """
    scheme = _scheme(url)
    if scheme == "memory":
        from mainspring.memory import InMemoryMemoryStore

        return InMemoryMemoryStore(embedder=embedder)
    if scheme == "sqlite":
        from mainspring.stores.sqlite_memory import SQLiteMemoryStore

        return await SQLiteMemoryStore.open(_sqlite_path(url), embedder=embedder)
    if scheme in ("postgresql", "postgres"):
        from mainspring.stores.postgres_memory import PostgresMemoryStore

        return await PostgresMemoryStore.open(url, embedder=embedder)
    raise ConfigError(
        f"{scheme}:// holds checkpoints and locks, not memory: "
        "use sqlite:/// or postgresql:// for memory"
    )


async def open_audit_store(url: str) -> AuditStore:
    """An audit store (:mod:`mainspring.audit`) for ``url``: every backend holds one.

    ``memory://name`` shares one store per name in this process.

    Raises:
        ConfigError: Unknown scheme.
        StoreError: The store cannot be reached or opened.
    """
    scheme = _scheme(url)
    if scheme == "memory":
        from mainspring.audit.store import InMemoryAuditStore

        name = url.removeprefix("memory://")
        fresh = InMemoryAuditStore()
        return _SHARED_AUDIT.setdefault(name, fresh) if name else fresh
    if scheme == "sqlite":
        from mainspring.stores.sqlite_audit import SQLiteAuditStore

        return await SQLiteAuditStore.open(_sqlite_path(url))
    if scheme in ("redis", "rediss"):
        from mainspring.stores.redis import RedisAuditStore

        return await RedisAuditStore.open(url)
    from mainspring.stores.postgres_audit import PostgresAuditStore

    return await PostgresAuditStore.open(url)


async def open_checkpoint_store(url: str) -> CheckpointStore:
    """A CheckpointStore for ``url`` (see :func:`open_session_store` for errors)."""
    scheme = _scheme(url)
    if scheme == "memory":
        return _memory(url)[1]
    if scheme == "sqlite":
        from mainspring.stores.sqlite import SQLiteCheckpointStore

        return await SQLiteCheckpointStore.open(_sqlite_path(url))
    if scheme in ("redis", "rediss"):
        from mainspring.stores.redis import RedisCheckpointStore

        return await RedisCheckpointStore.open(url)
    raise ConfigError(
        f"{scheme}:// holds sessions only: use redis:// or sqlite:/// for checkpoints"
    )


async def open_run_lock(url: str) -> RunLock:
    """A RunLock for ``url`` (see :func:`open_session_store` for errors)."""
    scheme = _scheme(url)
    if scheme == "memory":
        return _memory(url)[2]
    if scheme == "sqlite":
        from mainspring.stores.sqlite import SQLiteRunLock

        return await SQLiteRunLock.open(_sqlite_path(url))
    if scheme in ("redis", "rediss"):
        from mainspring.stores.redis import RedisRunLock

        return await RedisRunLock.open(url)
    raise ConfigError(f"{scheme}:// holds sessions only: use redis:// or sqlite:/// for locks")


@dataclass(frozen=True, slots=True)
class Stores:
    """The stores of a deployment."""

    sessions: SessionStore | None = None
    checkpoints: CheckpointStore | None = None
    locks: RunLock | None = None

    def session_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :class:`~mainspring.session.Session`."""
        return {
            "session_store": self.sessions,
            "checkpoint_store": self.checkpoints,
            "run_lock": self.locks,
        }

    async def aclose(self) -> None:
        """Close every store."""
        for store in (self.sessions, self.checkpoints, self.locks):
            if store is not None:
                await store.aclose()


async def open_stores(
    url: str | None = None,
    *,
    sessions: str | None = None,
    checkpoints: str | None = None,
    locks: str | None = None,
) -> Stores:
    """Open the stores named by URLs; ``url`` fills every role its backend can hold.

    Raises:
        ConfigError: An unknown scheme, or a role its URL cannot hold.
        StoreError: A store cannot be reached, or was written by a newer version.
    """
    if url is not None:
        scheme = _scheme(url)
        if scheme in ("memory", "sqlite"):
            sessions, checkpoints, locks = sessions or url, checkpoints or url, locks or url
        elif scheme in ("redis", "rediss"):
            checkpoints, locks = checkpoints or url, locks or url
        else:
            sessions = sessions or url
    if sessions is not None and sqlite_file(sessions) == sqlite_file(checkpoints) is not None:
        return await _open_sqlite(sessions, locks)
    if sessions is not None and sessions == checkpoints == locks and _scheme(sessions) == "memory":
        one = _memory(sessions)  # one set: the session store drops the lock's leases
        return Stores(sessions=one[0], checkpoints=one[1], locks=one[2])
    opened: list[Any] = []
    try:
        s = await open_session_store(sessions) if sessions else None
        opened.append(s)
        c = await open_checkpoint_store(checkpoints) if checkpoints else None
        opened.append(c)
        lk = await open_run_lock(locks) if locks else None
    except BaseException:
        for store in opened:
            if store is not None:
                await store.aclose()
        raise
    return Stores(sessions=s, checkpoints=c, locks=lk)


def sqlite_file(url: str | None) -> str | None:
    """The file a ``sqlite:///`` URL names, else ``None``."""
    if url is None or _scheme(url) != "sqlite":
        return None
    return _sqlite_path(url)


async def _open_sqlite(sessions: str, locks: str | None) -> Stores:
    """Sessions and checkpoints (and locks, when they are there too) on one connection."""
    from mainspring.stores._sqlite import Database
    from mainspring.stores.sqlite import SQLiteCheckpointStore, SQLiteRunLock, SQLiteSessionStore

    path = _sqlite_path(sessions)
    database = await Database.open(path)
    try:
        s = SQLiteSessionStore(database)
        c = SQLiteCheckpointStore(database.share(), ttl=300.0, clock=time.time)
        if locks is not None and sqlite_file(locks) == path:
            lk: RunLock | None = SQLiteRunLock(database.share(), clock=time.time)
        else:
            lk = await open_run_lock(locks) if locks else None
    except BaseException:
        await database.aclose()
        raise
    return Stores(sessions=s, checkpoints=c, locks=lk)
