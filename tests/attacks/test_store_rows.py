"""Corrupt and tampered SQLite rows, and who may read the store's files.

A row damaged on disk or edited by hand (text that is not UTF-8, a blob or a
number where text belongs, JSON of the wrong shape, a time that is not a
number) fails the load with a typed ``StoreError`` naming the session (or
``CheckpointCorrupt`` naming the stream), never a ``TypeError`` or
``UnicodeDecodeError``, and never a value quietly made up from it; the other
sessions of the file still load. The files and folders a store creates are
private to its user (``0600``/``0700``), the ``-wal`` and ``-shm`` files too.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

from mainspring import Agent, ScriptedModel, Session
from mainspring.errors import CheckpointCorrupt, StoreError
from mainspring.events import TextDelta
from mainspring.stores import SQLiteCheckpointStore, SQLiteSessionStore
from mainspring.stores.artifacts import ArtifactStore

pytestmark = pytest.mark.anyio


async def stored_sessions(path: Path) -> None:
    store = await SQLiteSessionStore.open(path)
    try:
        for sid in ("victim", "bystander"):
            session = Session(
                Agent(model=ScriptedModel(lambda m, t: "hi")), session_store=store, session_id=sid
            )
            async for _ in session.send("hello"):
                pass
    finally:
        await store.aclose()


def tamper(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


VICTIM = "session_id = 'victim'"
TAMPERED_SESSION_ROWS = [
    pytest.param(
        f"UPDATE mainspring_sessions SET header = CAST(X'7BFF7D' AS TEXT) WHERE {VICTIM}",
        id="header-not-utf8",
    ),
    pytest.param(
        f"UPDATE mainspring_messages SET data = CAST(X'FFFE' AS TEXT) WHERE {VICTIM}",
        id="message-not-utf8",
    ),
    pytest.param(
        f"UPDATE mainspring_sessions SET revision = X'FF' WHERE {VICTIM}", id="revision-a-blob"
    ),
    pytest.param(
        "INSERT INTO mainspring_decisions (session_id, attempt_id, decision)"
        " VALUES ('victim', X'FF', 'approved')",
        id="attempt-id-a-blob",
    ),
    pytest.param(f"UPDATE mainspring_sessions SET header = 5 WHERE {VICTIM}", id="header-a-number"),
    pytest.param(
        f"UPDATE mainspring_sessions SET header = '[]' WHERE {VICTIM}", id="header-a-list"
    ),
    pytest.param(
        f"UPDATE mainspring_messages SET data = '{{\"role\": 5}}' WHERE {VICTIM}",
        id="message-wrong-shape",
    ),
    pytest.param(
        "INSERT INTO mainspring_writes (session_id, key, data) VALUES ('victim', 'k', '[]')",
        id="write-wrong-shape",
    ),
]


@pytest.mark.parametrize("sql", TAMPERED_SESSION_ROWS)
async def test_a_tampered_session_row_is_a_store_error_naming_the_session(
    tmp_path: Path, sql: str
) -> None:
    path = tmp_path / "s.db"
    await stored_sessions(path)
    tamper(path, sql)
    store = await SQLiteSessionStore.open(path)
    try:
        with pytest.raises(StoreError, match="stored session 'victim' cannot be decoded") as info:
            await store.load("victim")
        assert type(info.value) is StoreError
        # Nothing else is lost: the other session of the file loads whole.
        other = await store.load("bystander")
        assert other is not None and [m.text for m in other.messages] == ["hello", "hi"]
    finally:
        await store.aclose()


async def test_a_session_saves_over_a_damaged_message_row(tmp_path: Path) -> None:
    """Another process damaged a stored row: the next save rewrites it instead of failing."""
    path = tmp_path / "s.db"
    await stored_sessions(path)
    store = await SQLiteSessionStore.open(path)
    try:
        state = await store.load("victim")
        assert state is not None
        tamper(path, f"UPDATE mainspring_messages SET data = CAST(X'FF' AS TEXT) WHERE {VICTIM}")
        tamper(path, f"UPDATE mainspring_sessions SET revision = 'other' WHERE {VICTIM}")
        await store.save(state)
        again = await store.load("victim")
        assert again is not None and [m.text for m in again.messages] == ["hello", "hi"]
    finally:
        await store.aclose()


TAMPERED_CHECKPOINT_ROWS = [
    pytest.param("UPDATE mainspring_checkpoints SET updated_at = 'x'", id="time-text"),
    pytest.param("UPDATE mainspring_checkpoints SET updated_at = X'00'", id="time-blob"),
    pytest.param("UPDATE mainspring_checkpoints SET data = CAST(X'FF' AS TEXT)", id="not-utf8"),
    pytest.param("UPDATE mainspring_checkpoints SET data = 5", id="data-a-number"),
]


@pytest.mark.parametrize("sql", TAMPERED_CHECKPOINT_ROWS)
async def test_a_tampered_checkpoint_row_is_checkpoint_corrupt_naming_the_stream(
    tmp_path: Path, sql: str
) -> None:
    path = tmp_path / "c.db"
    store = await SQLiteCheckpointStore.open(path)
    await store.append("victim", TextDelta(text="a"))
    await store.append("bystander", TextDelta(text="b"))
    await store.aclose()
    tamper(path, sql + " WHERE stream_id = 'victim'")
    store = await SQLiteCheckpointStore.open(path)
    try:
        with pytest.raises(CheckpointCorrupt, match="stream 'victim'") as info:
            await store.load("victim")
        assert info.value.stream_id == "victim"
        assert await store.load("bystander") == [TextDelta(text="b")]
    finally:
        await store.aclose()


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
async def test_a_sqlite_store_creates_its_folders_and_files_private(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the common default: without care, files come out 0644
    try:
        path = tmp_path / "var" / "deep" / "mainspring.db"
        store = await SQLiteSessionStore.open(path)
        checkpoints = await SQLiteCheckpointStore.open(path)
        try:
            await checkpoints.append("s", TextDelta(text="a"))
            made = [path.parent, path.parent.parent]
            files = [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]
            assert all(f.exists() for f in files)
            assert {mode(d) for d in made} == {0o700}
            assert {mode(f) for f in files} == {0o600}
        finally:
            await checkpoints.aclose()
            await store.aclose()
    finally:
        os.umask(old)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
async def test_an_existing_store_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    path.touch(mode=0o640)
    os.chmod(path, 0o640)
    store = await SQLiteSessionStore.open(path)
    await store.aclose()
    assert mode(path) == 0o640  # its owner chose it


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
async def test_a_local_artifact_store_keeps_artifacts_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        root = tmp_path / "artifacts" / "here"
        store = ArtifactStore.local(root)
        ref = await store.put("team/agent", b"secret bytes", name="s.txt")
        assert await store.get(ref) == b"secret bytes"
    finally:
        os.umask(old)
    assert mode(root) == 0o700 and mode(root.parent) == 0o700
    made = list(root.rglob("*"))
    assert made and all(mode(p) == (0o700 if p.is_dir() else 0o600) for p in made), [
        (str(p.relative_to(root)), oct(mode(p))) for p in made
    ]
    shutil.rmtree(root)
