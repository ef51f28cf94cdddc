"""A2A across two workers sharing Redis (tasks, checkpoints, locks) and one session store.

A task started on one worker is read, decided and refused a second decision
on the other, with the task records in Redis (``RedisTaskStore``) and the
sessions behind them in the shared session store.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import GetTaskRequest, ListTasksRequest, Task, TaskState, TaskStatus
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError

from mainspring.demo import demo_agent
from mainspring.server import ServerConfig, create_app
from mainspring.server._a2a_tasks import RedisTaskStore, task_store_for
from tests.server.servers import serving
from tests.server.test_a2a import (
    a2a,
    events,
    last_status,
    paused_payment,
    session_state,
    tool_events,
    user,
)
from tests.stores.servers import RedisServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def keys() -> dict[str, str]:
    run = uuid.uuid4().hex[:8]  # principals of this test only, in a shared Redis
    return {f"alice-key-{run}-0000000": f"alice-{run}", f"bob-key-{run}-000000000": f"bob-{run}"}


@pytest.fixture
def workers(
    redis_server: RedisServer, tmp_path: Path, keys: dict[str, str]
) -> Iterator[tuple[str, str]]:
    config = ServerConfig(
        store=None,
        sessions=f"sqlite:///{tmp_path / 'sessions.db'}",
        checkpoints=redis_server.url,
        locks=redis_server.url,
        api_keys=keys,
        signing_key=b"s" * 32,
    )
    first = create_app(demo_agent(balance_usd=1_000_000), config)
    second = create_app(demo_agent(balance_usd=1_000_000), config)
    with serving(first) as one, serving(second) as two:
        yield one, two


def test_redis_urls_choose_the_shared_task_store(redis_server: RedisServer) -> None:
    shared = task_store_for(ServerConfig(store="memory://", checkpoints=redis_server.url))
    assert isinstance(shared, RedisTaskStore)
    assert not isinstance(task_store_for(ServerConfig()), RedisTaskStore)


async def test_a_task_started_on_one_worker_is_decided_on_the_other_once(
    workers: tuple[str, str], keys: dict[str, str]
) -> None:
    one, two = workers
    alice, bob = list(keys)
    async with a2a(one, alice) as on_one:
        task_id, _context_id, pending, session_id = await paused_payment(on_one)
    async with a2a(two, alice) as on_two:
        seen = await on_two.get_task(GetTaskRequest(id=task_id))
        assert seen.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        decision = new_data_part({"approval_id": pending["approval_id"], "decision": "approve"})
        stream = await events(on_two, user(decision, task_id=task_id))
        assert last_status(stream)["state"] == "TASK_STATE_COMPLETED"
        (result,) = [r for r in tool_events(stream, "tool_result") if r["name"] == "send_payment"]
        assert json.loads(result["content"])["status"] == "sent"
    async with a2a(one, alice) as on_one:
        done = await on_one.get_task(GetTaskRequest(id=task_id))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        with pytest.raises(UnsupportedOperationError, match="terminal"):
            await events(on_one, user(decision, task_id=task_id))
        listed = await on_one.list_tasks(ListTasksRequest())
        assert [t.id for t in listed.tasks] == [task_id]
    async with a2a(two, bob) as bob_on_two:
        with pytest.raises(TaskNotFoundError):
            await bob_on_two.get_task(GetTaskRequest(id=task_id))
        assert list((await bob_on_two.list_tasks(ListTasksRequest())).tasks) == []
    state = (await session_state(one, alice, session_id)).json()
    assert [w["tool"] for w in state["writes"].values()] == ["send_payment"]


async def test_a_reply_to_a_task_another_worker_works_on_is_refused_once(
    workers: tuple[str, str], keys: dict[str, str], redis_server: RedisServer
) -> None:
    """Found by the fleet property test: two replies at once on two workers.

    The first reply's worker moves the shared task to ``working``; the second
    worker then read it so and answered with a ``working`` status and ended its
    stream there (no final state). It now refuses with one JSON-RPC error, and
    the decision that waits is untouched.
    """
    from mainspring.server._a2a import _Caller
    from mainspring.server._auth import Principal

    one, two = workers
    alice = next(iter(keys))
    async with a2a(one, alice) as on_one:
        task_id, _context_id, pending, session_id = await paused_payment(on_one)
    store = RedisTaskStore(redis_server.url)
    owner = ServerCallContext(user=_Caller(Principal(keys[alice])))
    try:  # what the other worker's reply wrote when it began to work on its decision
        task = await store.get(task_id, owner)
        assert task is not None
        task.status.state = TaskState.TASK_STATE_WORKING
        await store.save(task, owner)
    finally:
        await store.aclose()
    decision = new_data_part({"approval_id": pending["approval_id"], "decision": "approve"})
    async with a2a(two, alice) as on_two:
        with pytest.raises(UnsupportedOperationError, match="not waiting for input: it is"):
            await events(on_two, user(decision, task_id=task_id))
    state = (await session_state(one, alice, session_id)).json()
    assert state["pending"] is not None and state["writes"] == {}


async def test_the_store_keeps_owners_apart_and_forgets_deleted_tasks(
    redis_server: RedisServer,
) -> None:
    from mainspring.server._a2a import _Caller  # the SDK user the routes build
    from mainspring.server._auth import Principal

    store = RedisTaskStore(redis_server.url)
    run = uuid.uuid4().hex[:8]
    mine = ServerCallContext(user=_Caller(Principal(f"me-{run}")))
    theirs = ServerCallContext(user=_Caller(Principal(f"them-{run}")))
    try:
        task = Task(
            id=f"t-{run}", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)
        )
        await store.save(task, mine)
        assert await store.get(task.id, mine) == task
        assert await store.get(task.id, theirs) is None
        await store.delete(task.id, theirs)  # not theirs to delete
        assert await store.get(task.id, mine) == task
        await store.delete(task.id, mine)
        assert await store.get(task.id, mine) is None
        assert list((await store.list(ListTasksRequest(), mine)).tasks) == []
    finally:
        await store.aclose()


async def test_text_first_then_decision_by_text_across_workers(
    workers: tuple[str, str], keys: dict[str, str]
) -> None:
    one, two = workers
    alice = next(iter(keys))
    async with a2a(one, alice) as on_one:
        task_id, _context_id, _pending, _ = await paused_payment(on_one)
    async with a2a(two, alice) as on_two:
        stream = await events(on_two, user(new_text_part("no"), task_id=task_id))
        assert last_status(stream)["state"] == "TASK_STATE_COMPLETED"
