"""The A2A task store on the session store (``SharedTaskStore``), SQLite and PostgreSQL.

Two store objects on one SQLite file or one PostgreSQL schema are two
workers (two connections): what one saves the other reads, replaces, lists
and deletes; owners never see each other's tasks; a record expires a week
after its last change and is pruned lazily; streamed text alone waits for
the next status change (or a second); a damaged row is a StoreError
naming it (through the A2A route too) and nothing else is lost.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from a2a.helpers.proto_helpers import new_text_part
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import (
    Artifact,
    GetTaskRequest,
    ListTasksRequest,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import A2AError
from google.protobuf.timestamp_pb2 import Timestamp

from mainspring.demo import demo_agent
from mainspring.errors import ConfigError, StoreError
from mainspring.server import ServerConfig, create_app
from mainspring.server._a2a import _Caller  # the SDK user the routes build
from mainspring.server._a2a_saves import SaveFilter
from mainspring.server._a2a_tasks import SharedTaskStore, task_store_for
from mainspring.server._auth import Principal
from mainspring.stores import InMemorySessionStore, SessionStore
from tests.server.servers import serving
from tests.server.test_a2a import a2a, events, last_status, user
from tests.stores import backend_postgres, backend_sqlite

pytestmark = pytest.mark.anyio

Tamper = Callable[[str, dict[str, Any]], None]
"""Run one SQL statement (named parameters) on the backend, behind the stores' backs."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async connection (and the SDK) run on asyncio


class Backend:
    def __init__(self, stores: tuple[SessionStore, SessionStore], tamper: Tamper) -> None:
        self.stores = stores
        self.one, self.two = shared(stores[0]), shared(stores[1])
        self.tamper = tamper


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "sqlite":
        stores = await backend_sqlite.session_stores(tmp_path)
        path = tmp_path / backend_sqlite.DB_NAME

        def tamper(sql: str, args: dict[str, Any]) -> None:
            with sqlite3.connect(path, isolation_level=None) as conn:
                conn.execute(sql.replace("%(", ":").replace(")s", ""), args)
    else:
        stores = await backend_postgres.session_stores(request)
        url: str = request.getfixturevalue("postgres_url")

        def tamper(sql: str, args: dict[str, Any]) -> None:
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql, args)

    try:
        yield Backend(stores, tamper)
    finally:
        for store in stores:
            await store.aclose()


def shared(store: SessionStore) -> SharedTaskStore:
    tasks = SharedTaskStore()
    tasks.bind(store)  # as the app does when it starts
    return tasks


def caller(name: str) -> ServerCallContext:
    return ServerCallContext(user=_Caller(Principal(name)))


ALICE, BOB = caller("alice"), caller("bob")


def task(task_id: str, *, context: str = "c1", state: int = TaskState.TASK_STATE_WORKING,
         at: int | None = None, note: str = "") -> Task:  # fmt: skip
    status = TaskStatus(state=state)  # type: ignore[arg-type]  # (the enum is an int)
    if at is not None:
        status.timestamp.CopyFrom(Timestamp(seconds=at))
    made = Task(id=task_id, context_id=context, status=status)
    if note:
        made.metadata.update({"note": note})
    return made


async def test_one_worker_saves_the_other_reads_replaces_and_deletes(backend: Backend) -> None:
    one, two = backend.one, backend.two
    first = task("t1", state=TaskState.TASK_STATE_INPUT_REQUIRED, note="ünïcödé ✓ \x00")
    await one.save(first, ALICE)
    assert await two.get("t1", ALICE) == first
    done = task("t1", state=TaskState.TASK_STATE_COMPLETED)
    await two.save(done, ALICE)
    assert await one.get("t1", ALICE) == done  # replaced, not added
    assert [t.id for t in (await one.list(ListTasksRequest(), ALICE)).tasks] == ["t1"]
    await one.delete("t1", ALICE)
    assert await two.get("t1", ALICE) is None
    assert list((await two.list(ListTasksRequest(), ALICE)).tasks) == []
    await two.delete("t1", ALICE)  # nothing there: no error


async def test_another_principals_task_is_simply_not_there(backend: Backend) -> None:
    one, two = backend.one, backend.two
    await one.save(task("t1", note="alice's"), ALICE)
    assert await two.get("t1", BOB) is None
    assert list((await two.list(ListTasksRequest(), BOB)).tasks) == []
    await two.delete("t1", BOB)  # not Bob's to delete
    assert await one.get("t1", ALICE) == task("t1", note="alice's")
    await two.save(task("t1", note="bob's"), BOB)  # the same id, Bob's own task
    assert await one.get("t1", ALICE) == task("t1", note="alice's")
    assert await one.get("t1", BOB) == task("t1", note="bob's")


async def test_list_filters_and_pages_as_the_sdks_in_memory_store(backend: Backend) -> None:
    reference = InMemoryTaskStore()
    tasks = [
        task("a", context="c1", state=TaskState.TASK_STATE_COMPLETED, at=100),
        task("b", context="c1", state=TaskState.TASK_STATE_WORKING, at=300),
        task("c", context="c2", state=TaskState.TASK_STATE_COMPLETED, at=200),
        task("d", context="c2", state=TaskState.TASK_STATE_INPUT_REQUIRED),
        task("e", context="c1", state=TaskState.TASK_STATE_COMPLETED, at=300),
        task("f", context="c3", state=TaskState.TASK_STATE_FAILED, at=50),
    ]
    for i, t in enumerate(tasks):
        await (backend.one if i % 2 else backend.two).save(t, ALICE)
        await reference.save(t, ALICE)
    await backend.one.save(task("z", context="c1"), BOB)
    requests = [
        ListTasksRequest(),
        ListTasksRequest(context_id="c1"),
        ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED),
        ListTasksRequest(status_timestamp_after=Timestamp(seconds=200)),
        ListTasksRequest(context_id="c2", status=TaskState.TASK_STATE_COMPLETED),
    ]
    for request in requests:
        assert await backend.two.list(request, ALICE) == await reference.list(request, ALICE)
    # Page by page, following the tokens, through both workers.
    seen: list[str] = []
    token = ""
    for page in range(4):
        request = ListTasksRequest(page_size=2, page_token=token)
        got = await (backend.one if page % 2 else backend.two).list(request, ALICE)
        assert got == await reference.list(request, ALICE)
        seen.extend(t.id for t in got.tasks)
        token = got.next_page_token
        if not token:
            break
    assert seen == ["e", "b", "c", "a", "f", "d"]  # newest first; no timestamp last


async def test_an_expired_task_is_gone_and_pruned_by_the_next_save(backend: Backend) -> None:
    await backend.one.save(task("old"), ALICE)
    await backend.one.save(task("kept"), ALICE)
    # A week passed since "old" last changed (its expiry moved into the past).
    backend.tamper(
        "UPDATE mainspring_tasks SET expires_at = expires_at - %(week)s WHERE task_id = 'old'",
        {"week": 8 * 24 * 3600.0},
    )
    assert await backend.two.get("old", ALICE) is None
    assert [t.id for t in (await backend.two.list(ListTasksRequest(), ALICE)).tasks] == ["kept"]
    await backend.two.save(task("new"), BOB)  # any save prunes expired rows
    backend.tamper(
        "UPDATE mainspring_tasks SET expires_at = expires_at + %(week)s WHERE task_id = 'old'",
        {"week": 8 * 24 * 3600.0},
    )  # were it still there, it would be live again
    assert await backend.one.get("old", ALICE) is None
    assert await backend.one.get("kept", ALICE) == task("kept")


async def test_saving_again_keeps_a_task_a_week_from_its_last_change(backend: Backend) -> None:
    await backend.one.save(task("t"), ALICE)
    backend.tamper(
        "UPDATE mainspring_tasks SET expires_at = expires_at - %(day)s WHERE task_id = 't'",
        {"day": 6 * 24 * 3600.0},
    )  # six days later: still there, and it changes
    await backend.two.save(task("t", state=TaskState.TASK_STATE_COMPLETED), ALICE)
    backend.tamper(
        "UPDATE mainspring_tasks SET expires_at = expires_at - %(day)s WHERE task_id = 't'",
        {"day": 6 * 24 * 3600.0},
    )  # twelve days after the first save, six after the last: a week is counted from the last
    assert await backend.one.get("t", ALICE) == task("t", state=TaskState.TASK_STATE_COMPLETED)


def with_text(base: Task, text: str, *, state: int | None = None) -> Task:
    """``base`` with its response artifact holding ``text`` (and a new state, if given)."""
    grown = Task()
    grown.CopyFrom(base)
    grown.ClearField("artifacts")
    grown.artifacts.append(Artifact(artifact_id="response", parts=[new_text_part(text)]))
    if state is not None:
        grown.status.state = state  # type: ignore[assignment]  # (the enum is an int)
    return grown


async def test_streamed_text_alone_waits_for_the_next_status_change_or_a_second(
    backend: Backend,
) -> None:
    now = [0.0]
    one = SharedTaskStore(saves=SaveFilter(clock=lambda: now[0]))
    one.bind(backend.stores[0])
    working = task("s")
    await one.save(working, ALICE)
    await one.save(with_text(working, "Hel"), ALICE)  # a chunk: only the artifacts changed
    assert await backend.two.get("s", ALICE) == working  # it waits
    now[0] = 1.0  # a second after the last write
    await one.save(with_text(working, "Hello"), ALICE)
    assert await backend.two.get("s", ALICE) == with_text(working, "Hello")
    await one.save(with_text(working, "Hello, wor"), ALICE)  # waits again
    paused = with_text(working, "Hello, world", state=TaskState.TASK_STATE_INPUT_REQUIRED)
    await one.save(paused, ALICE)  # a status change: written at once, with all the text
    assert await backend.two.get("s", ALICE) == paused
    await one.delete("s", ALICE)
    await one.save(paused, ALICE)  # deleted, so nothing of it is remembered: written
    assert await backend.two.get("s", ALICE) == paused


@pytest.mark.parametrize(
    "damage",
    [b"\xff\xff\xff\xff", task("someone-else").SerializeToString()],
    ids=["not-protobuf", "another-task"],
)
async def test_a_damaged_row_is_a_store_error_naming_it_and_nothing_else_is_lost(
    backend: Backend, damage: bytes
) -> None:
    await backend.one.save(task("hurt"), ALICE)
    await backend.one.save(task("fine", note="intact"), ALICE)
    backend.tamper("UPDATE mainspring_tasks SET data = %(d)s WHERE task_id = 'hurt'", {"d": damage})
    with pytest.raises(StoreError, match="A2A task 'hurt' is damaged"):
        await backend.two.get("hurt", ALICE)
    with pytest.raises(StoreError, match="A2A task 'hurt' is damaged"):
        await backend.two.list(ListTasksRequest(), ALICE)
    assert await backend.two.get("fine", ALICE) == task("fine", note="intact")
    # The next save of the task replaces the damaged row.
    await backend.one.save(task("hurt", state=TaskState.TASK_STATE_COMPLETED), ALICE)
    listed = await backend.two.list(ListTasksRequest(), ALICE)
    assert sorted(t.id for t in listed.tasks) == ["fine", "hurt"]


async def test_a_sqlite_row_of_the_wrong_type_is_a_store_error(tmp_path: Path) -> None:
    one, two = await backend_sqlite.session_stores(tmp_path)
    try:
        store = shared(one)
        await store.save(task("hurt"), ALICE)
        await store.save(task("fine"), ALICE)
        with sqlite3.connect(tmp_path / backend_sqlite.DB_NAME, isolation_level=None) as conn:
            conn.execute("UPDATE mainspring_tasks SET data = 'text' WHERE task_id = 'hurt'")
        other = shared(two)
        with pytest.raises(StoreError, match="A2A task 'hurt' is damaged: its data is str"):
            await other.get("hurt", ALICE)
        with pytest.raises(StoreError, match="A2A task 'hurt' is damaged"):
            await other.list(ListTasksRequest(), ALICE)
        assert await other.get("fine", ALICE) == task("fine")
    finally:
        await one.aclose()
        await two.aclose()


async def test_a_store_before_the_server_starts_or_without_task_records_is_refused() -> None:
    unbound = SharedTaskStore()
    with pytest.raises(StoreError, match="not open"):
        await unbound.get("t", ALICE)
    with pytest.raises(ConfigError, match="keeps no A2A task records"):
        unbound.bind(InMemorySessionStore())


def test_the_deployments_urls_choose_where_tasks_live(tmp_path: Path) -> None:
    sqlite = f"sqlite:///{tmp_path / 'one.db'}"
    assert isinstance(task_store_for(ServerConfig(store=sqlite)), SharedTaskStore)
    postgres = "postgresql://db.internal/app"
    assert isinstance(task_store_for(ServerConfig(sessions=postgres)), SharedTaskStore)
    assert isinstance(
        task_store_for(ServerConfig(store=postgres, checkpoints=sqlite, locks=sqlite)),
        SharedTaskStore,
    )
    assert isinstance(task_store_for(ServerConfig()), InMemoryTaskStore)  # memory://


async def test_through_the_route_a_damaged_task_is_a_clear_error_and_the_rest_serve(
    tmp_path: Path,
) -> None:
    key = "alice-key-a2a-tasks-000001"
    config = ServerConfig(store=f"sqlite:///{tmp_path / 'one.db'}", api_keys={key: "alice"})
    with serving(create_app(demo_agent(), config)) as base:
        async with a2a(base, key) as client:
            first = (await events(client, user(new_text_part("What is my balance?"))))[0]
            second = await events(client, user(new_text_part("What is my balance?")))
            assert last_status(second)["state"] == "TASK_STATE_COMPLETED"
            hurt, fine = first["task"]["id"], second[0]["task"]["id"]
            with sqlite3.connect(tmp_path / "one.db", isolation_level=None) as conn:
                conn.execute(
                    "UPDATE mainspring_tasks SET data = x'ffff' WHERE task_id = ?", (hurt,)
                )
            with pytest.raises(A2AError, match=f"A2A task '{hurt}' is damaged"):
                await client.get_task(GetTaskRequest(id=hurt))
            kept = await client.get_task(GetTaskRequest(id=fine))
            assert kept.status.state == TaskState.TASK_STATE_COMPLETED
