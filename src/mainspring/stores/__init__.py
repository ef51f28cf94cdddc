"""Stores: session state, per-stream event logs (checkpoints), run locks, memory.

``open_stores(url)`` picks them by URL (``memory://``, ``sqlite:///…``,
``redis://…``, ``postgresql://…``; see :mod:`mainspring.stores.urls`).

The SQLite stores load on first use (``sqlite3`` stays out of ``import mainspring``).
"""

from typing import TYPE_CHECKING

from mainspring._lowlevel.lazy import lazy_attributes
from mainspring.stores.base import (
    SCHEMA_VERSION,
    CheckpointStore,
    ClaimRelease,
    Commit,
    JointCommit,
    JointLease,
    RunLock,
    SessionStore,
    SharedRecords,
    SpendHolds,
    SpendKind,
    SpendLedger,
    TailLoad,
    TaskRecords,
    load_after,
)
from mainspring.stores.memory import InMemoryCheckpointStore, InMemoryRunLock, InMemorySessionStore

if TYPE_CHECKING:
    from mainspring.memory import InMemoryMemoryStore, MemoryItem, MemoryStore
    from mainspring.stores.sqlite import SQLiteCheckpointStore, SQLiteRunLock, SQLiteSessionStore
    from mainspring.stores.sqlite_audit import SQLiteAuditStore
    from mainspring.stores.sqlite_memory import SQLiteMemoryStore
    from mainspring.stores.urls import (
        Stores,
        open_audit_store,
        open_checkpoint_store,
        open_memory_store,
        open_run_lock,
        open_session_store,
        open_stores,
    )

_LAZY: dict[str, str] = {
    "InMemoryMemoryStore": "mainspring.memory",
    "MemoryItem": "mainspring.memory",
    "MemoryStore": "mainspring.memory",
    "SQLiteAuditStore": "mainspring.stores.sqlite_audit",
    "SQLiteCheckpointStore": "mainspring.stores.sqlite",
    "SQLiteMemoryStore": "mainspring.stores.sqlite_memory",
    "SQLiteRunLock": "mainspring.stores.sqlite",
    "SQLiteSessionStore": "mainspring.stores.sqlite",
    "Stores": "mainspring.stores.urls",
    "open_audit_store": "mainspring.stores.urls",
    "open_checkpoint_store": "mainspring.stores.urls",
    "open_memory_store": "mainspring.stores.urls",
    "open_run_lock": "mainspring.stores.urls",
    "open_session_store": "mainspring.stores.urls",
    "open_stores": "mainspring.stores.urls",
}


__getattr__, __dir__ = lazy_attributes("mainspring.stores", globals(), _LAZY)


__all__ = [
    "SCHEMA_VERSION",
    "CheckpointStore",
    "ClaimRelease",
    "Commit",
    "InMemoryCheckpointStore",
    "InMemoryMemoryStore",
    "InMemoryRunLock",
    "InMemorySessionStore",
    "JointCommit",
    "JointLease",
    "MemoryItem",
    "MemoryStore",
    "RunLock",
    "SQLiteAuditStore",
    "SQLiteCheckpointStore",
    "SQLiteMemoryStore",
    "SQLiteRunLock",
    "SQLiteSessionStore",
    "SessionStore",
    "SharedRecords",
    "SpendHolds",
    "SpendKind",
    "SpendLedger",
    "Stores",
    "TailLoad",
    "TaskRecords",
    "load_after",
    "open_audit_store",
    "open_checkpoint_store",
    "open_memory_store",
    "open_run_lock",
    "open_session_store",
    "open_stores",
]
