"""A2A on two worker processes over one SQLite file, or PostgreSQL without Redis.

Two ``mainspring serve`` processes (each on its own port, so the test picks
the worker a request reaches) share the one-machine store: a SQLite file, or
PostgreSQL sessions with SQLite checkpoints and locks. No Redis, so the A2A
task records live in the session store (``SharedTaskStore``). The ``pay``
tool logs its own effects; the log, not mainspring, says what ran.

- A task paused for a confirm-tier write on worker one is read, listed and
  decided by an A2A reply on worker two, where it completes; the write ran
  once, and a duplicate or conflicting reply sent to worker one afterwards
  runs nothing.
- A paused task cancelled on worker two rejects its action: no door can
  approve it afterwards.
- A running task cancelled on worker two stops on worker one, where it runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict

from tests.server.conftest import client_for, read_sse
from tests.server.test_a2a import a2a, data_parts, events, last_status, tool_events, user
from tests.server.test_workers import _as_url, start_serve_worker

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ALICE = "alice-key-a2a-workers-0001"
BOB = "bob-key-a2a-workers-000002"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK's client is asyncio code


@dataclass
class Workers:
    one: str
    two: str
    ledger: Path
    gate: Path

    def writes(self) -> list[str]:
        """The payments the tool itself logged."""
        return self.ledger.read_text().splitlines()

    def open_gate(self) -> None:
        """Let the model say its closing words after a payment (until then it waits)."""
        self.gate.touch()


def _stores(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    shared = f"sqlite:///{tmp_path / 'shared.db'}"
    if backend == "sqlite":
        return ["--store", shared]
    postgres = _as_url(request.getfixturevalue("postgres_url"))
    return ["--sessions", postgres, "--checkpoints", shared, "--locks", shared]


@pytest.fixture(params=["sqlite", "postgres"])
def workers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workers]:
    ledger, gate = tmp_path / "ledger.txt", tmp_path / "gate"
    ledger.touch()
    env = {
        **os.environ,
        "MAINSPRING_API_KEYS": f"alice={ALICE},bob={BOB}",
        "MAINSPRING_SIGNING_KEY": "ab" * 32,
        "MAINSPRING_TEST_LEDGER": str(ledger),
        "MAINSPRING_TEST_GATE": str(gate),
    }
    stores = _stores(request.param, request, tmp_path)
    processes: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    logs: list[Any] = []

    def start() -> None:
        args = [
            "tests.server.worker_agent:agent", *stores,
        ]  # fmt: skip
        urls.append(
            start_serve_worker(args, folder=tmp_path, env=env, processes=processes, logs=logs)
        )

    try:
        for _ in range(2):
            start()
        yield Workers(urls[0], urls[1], ledger, gate)
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        for log in logs:
            log.close()


async def test_a_task_paused_on_one_worker_is_decided_and_completed_on_the_other_once(
    workers: Workers,
) -> None:
    workers.open_gate()
    async with a2a(workers.one, ALICE) as on_one:
        stream = await events(on_one, user(new_text_part("please pay bo")))
        task_id = stream[0]["task"]["id"]
        status = last_status(stream)
        assert status["state"] == "TASK_STATE_INPUT_REQUIRED"
        (pending,) = data_parts(status)
        assert pending["type"] == "pending_action" and pending["name"] == "pay"
    assert workers.writes() == []  # confirm tier: nothing before the decision

    async with a2a(workers.two, ALICE) as on_two:
        seen = await on_two.get_task(GetTaskRequest(id=task_id))
        assert seen.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        listed = await on_two.list_tasks(ListTasksRequest())
        assert [t.id for t in listed.tasks] == [task_id]
        approve = new_data_part({"approval_id": pending["approval_id"], "decision": "approve"})
        done = await events(on_two, user(approve, task_id=task_id))
        assert last_status(done)["state"] == "TASK_STATE_COMPLETED"
        (result,) = tool_events(done, "tool_result")
        assert result["name"] == "pay" and result["content"] == "paid bo 5.0"
    assert workers.writes() == ["bo 5.0"]

    reject = new_data_part({"approval_id": pending["approval_id"], "decision": "reject"})
    async with a2a(workers.one, ALICE) as on_one:
        again = await on_one.get_task(GetTaskRequest(id=task_id))
        assert again.status.state == TaskState.TASK_STATE_COMPLETED
        for reply in (approve, reject, new_text_part("yes")):
            with pytest.raises(UnsupportedOperationError, match="terminal"):
                await events(on_one, user(reply, task_id=task_id))
        with pytest.raises(TaskNotCancelableError):
            await on_one.cancel_task(CancelTaskRequest(id=task_id))
        after = await on_one.get_task(GetTaskRequest(id=task_id))
        assert after.status.state == TaskState.TASK_STATE_COMPLETED  # nobody wrote over it
    assert workers.writes() == ["bo 5.0"]  # the write ran once

    async with a2a(workers.two, BOB) as bob:
        with pytest.raises(TaskNotFoundError):
            await bob.get_task(GetTaskRequest(id=task_id))
        with pytest.raises(TaskNotFoundError):
            await events(bob, user(approve, task_id=task_id))
        assert list((await bob.list_tasks(ListTasksRequest())).tasks) == []
    assert workers.writes() == ["bo 5.0"]


async def test_a_paused_task_cancelled_on_the_other_worker_never_runs_its_write(
    workers: Workers,
) -> None:
    workers.open_gate()
    async with a2a(workers.one, ALICE) as on_one:
        stream = await events(on_one, user(new_text_part("pay bo now")))
        task_id = stream[0]["task"]["id"]
        (pending,) = data_parts(last_status(stream))
    async with a2a(workers.two, ALICE) as on_two:
        cancelled = await on_two.cancel_task(CancelTaskRequest(id=task_id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    async with a2a(workers.one, ALICE) as on_one:
        seen = await on_one.get_task(GetTaskRequest(id=task_id))
        assert seen.status.state == TaskState.TASK_STATE_CANCELED
        approve = new_data_part({"approval_id": pending["approval_id"], "decision": "approve"})
        with pytest.raises(UnsupportedOperationError, match="terminal"):
            await events(on_one, user(approve, task_id=task_id))
    # The cancel rejected the action in the session too: no other door can approve it.
    session_id = stream[0]["task"]["metadata"]["mainspring"]["session_id"]
    async with httpx.AsyncClient(base_url=workers.one, timeout=30) as http:
        state = await http.get(
            f"/v1/sessions/{session_id}/state", headers={"Authorization": f"Bearer {ALICE}"}
        )
        assert state.status_code == 200 and state.json()["pending"] is None
        late = await http.post(
            f"/v1/sessions/{session_id}/decisions/{pending['approval_id']}",
            json={"decision": "approve"},
            headers={"Authorization": f"Bearer {ALICE}"},
        )
        assert late.status_code in (404, 409)
    assert workers.writes() == []


async def test_a_running_task_cancelled_on_the_other_worker_stops_where_it_runs(
    workers: Workers,
) -> None:
    async with a2a(workers.one, ALICE) as on_one:
        stream = await events(on_one, user(new_text_part("pay bo")))
        task_id = stream[0]["task"]["id"]
        session_id = stream[0]["task"]["metadata"]["mainspring"]["session_id"]
        (pending,) = data_parts(last_status(stream))
        approve = new_data_part({"approval_id": pending["approval_id"], "decision": "approve"})
        # Approved on worker one: the write runs, then the model waits at the gate.
        sent = on_one.send_message(user(approve, task_id=task_id))
        async with aclosing(cast(AsyncGenerator[StreamResponse, None], sent)) as replies:
            async for reply in replies:
                if tool_events([MessageToDict(reply)], "tool_result"):
                    break
    assert workers.writes() == ["bo 5.0"]
    async with a2a(workers.two, ALICE) as on_two:
        cancelled = await on_two.cancel_task(CancelTaskRequest(id=task_id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    # Worker one stops the turn (it finds the request in the shared run lock).
    async with client_for(workers.one, ALICE) as rest:
        frames = await read_sse(rest, "GET", f"/v1/sessions/{session_id}/stream")
    assert frames[-1].event == "turn_complete"
    assert frames[-1].data["stop_reason"] == "cancelled"
    async with a2a(workers.one, ALICE) as on_one:
        seen = await on_one.get_task(GetTaskRequest(id=task_id))
        assert seen.status.state == TaskState.TASK_STATE_CANCELED
    workers.open_gate()
    assert workers.writes() == ["bo 5.0"]
