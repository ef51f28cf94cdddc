"""Fixtures for the SQLite backend: store objects on one database file per test."""

from __future__ import annotations

from pathlib import Path

from mainspring.stores import (
    CheckpointStore,
    RunLock,
    SessionStore,
    SQLiteCheckpointStore,
    SQLiteRunLock,
    SQLiteSessionStore,
)

DB_NAME = "mainspring.db"


async def checkpoint_store(tmp_path: Path) -> CheckpointStore:
    return await SQLiteCheckpointStore.open(tmp_path / DB_NAME)


async def checkpoint_stores(tmp_path: Path) -> tuple[CheckpointStore, CheckpointStore]:
    """Two store objects (two connections) on one file: an appender and a follower."""
    one = await SQLiteCheckpointStore.open(tmp_path / DB_NAME)
    two = await SQLiteCheckpointStore.open(tmp_path / DB_NAME)
    return one, two


async def session_stores(tmp_path: Path) -> tuple[SessionStore, SessionStore]:
    """Two store objects (two connections) on one file: two workers."""
    one = await SQLiteSessionStore.open(tmp_path / DB_NAME)
    two = await SQLiteSessionStore.open(tmp_path / DB_NAME)
    return one, two


async def run_locks(tmp_path: Path) -> tuple[RunLock, RunLock]:
    """Two lock objects (two connections) on one file: two workers."""
    one = await SQLiteRunLock.open(tmp_path / DB_NAME)
    two = await SQLiteRunLock.open(tmp_path / DB_NAME)
    return one, two
