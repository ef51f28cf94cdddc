"""Stores: session state, per-stream event logs (checkpoints), run locks.

The SQLite stores load on first use (``sqlite3`` stays out of ``import mainspring``).
"""

import importlib
from typing import TYPE_CHECKING, Any

from mainspring.stores.base import SCHEMA_VERSION, CheckpointStore, RunLock, SessionStore
from mainspring.stores.memory import InMemoryCheckpointStore, InMemoryRunLock, InMemorySessionStore

if TYPE_CHECKING:
    from mainspring.stores.sqlite import SQLiteCheckpointStore, SQLiteRunLock, SQLiteSessionStore

_LAZY: dict[str, str] = {
    "SQLiteCheckpointStore": "mainspring.stores.sqlite",
    "SQLiteRunLock": "mainspring.stores.sqlite",
    "SQLiteSessionStore": "mainspring.stores.sqlite",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mainspring.stores' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "SCHEMA_VERSION",
    "CheckpointStore",
    "InMemoryCheckpointStore",
    "InMemoryRunLock",
    "InMemorySessionStore",
    "RunLock",
    "SQLiteCheckpointStore",
    "SQLiteRunLock",
    "SQLiteSessionStore",
    "SessionStore",
]
