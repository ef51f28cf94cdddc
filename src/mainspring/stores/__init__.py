"""Stores: session state, per-stream event logs (checkpoints), run locks."""

from mainspring.stores.base import SCHEMA_VERSION, CheckpointStore, RunLock, SessionStore
from mainspring.stores.memory import InMemoryCheckpointStore, InMemoryRunLock, InMemorySessionStore

__all__ = [
    "SCHEMA_VERSION",
    "CheckpointStore",
    "InMemoryCheckpointStore",
    "InMemoryRunLock",
    "InMemorySessionStore",
    "RunLock",
    "SessionStore",
]
