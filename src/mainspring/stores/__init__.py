"""Stores: session state, per-stream event logs (checkpoints), run locks, memory.

The SQLite stores load on first use (``sqlite3`` stays out of ``import mainspring``).
"""

from typing import TYPE_CHECKING

from mainspring._lazy import lazy_attributes
from mainspring.stores.base import SCHEMA_VERSION, CheckpointStore, RunLock, SessionStore
from mainspring.stores.memory import InMemoryCheckpointStore, InMemoryRunLock, InMemorySessionStore

if TYPE_CHECKING:
    from mainspring.stores.sqlite import SQLiteCheckpointStore, SQLiteRunLock, SQLiteSessionStore
    from mainspring.stores.sqlite_memory import SQLiteMemoryStore

_LAZY: dict[str, str] = {
    "SQLiteCheckpointStore": "mainspring.stores.sqlite",
    "SQLiteMemoryStore": "mainspring.stores.sqlite_memory",
    "SQLiteRunLock": "mainspring.stores.sqlite",
    "SQLiteSessionStore": "mainspring.stores.sqlite",
}


__getattr__, __dir__ = lazy_attributes("mainspring.stores", globals(), _LAZY)


__all__ = [
    "SCHEMA_VERSION",
    "CheckpointStore",
    "InMemoryCheckpointStore",
    "InMemoryRunLock",
    "InMemorySessionStore",
    "RunLock",
    "SQLiteCheckpointStore",
    "SQLiteMemoryStore",
    "SQLiteRunLock",
    "SQLiteSessionStore",
    "SessionStore",
]
