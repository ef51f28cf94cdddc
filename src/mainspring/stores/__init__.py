"""Stores: session state and per-stream event logs (checkpoints)."""

from mainspring.stores.base import CheckpointStore, SessionStore
from mainspring.stores.memory import InMemoryCheckpointStore, InMemorySessionStore

__all__ = [
    "CheckpointStore",
    "InMemoryCheckpointStore",
    "InMemorySessionStore",
    "SessionStore",
]
