"""One worker never starts two runs of one session at once.

Every run of a worker holds the session's lock under the worker's name, so the
lock cannot tell two of them apart: two requests of one session that reach one
worker together (a decision posted twice, through two doors) both took it, and
when the one refused ended it released the lock under the other, whose write
then stopped with ``lease_lost`` although it was approved. The fleet property
(``test_fleet_property.py``, Redis + PostgreSQL) found it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import anyio
import pytest

from mainspring import Agent, ScriptedModel
from mainspring.errors import SessionBusy
from mainspring.events import Event, StreamStarted
from mainspring.server import ServerConfig
from mainspring.server._auth import Principal
from mainspring.server._host import SessionHost
from mainspring.server._signing import ApprovalSigner
from mainspring.stores import open_stores

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_run_starting_makes_a_second_start_of_its_session_busy() -> None:
    stores = await open_stores("memory://")
    gate = anyio.Event()
    second_ran: list[bool] = []

    async def first(session_id: str) -> AsyncGenerator[Event, None]:
        await gate.wait()  # the first event is still to come: the run is starting
        yield StreamStarted(stream_id="s1", session_id=session_id)

    async def second(session_id: str) -> AsyncGenerator[Event, None]:
        second_ran.append(True)
        yield StreamStarted(stream_id="s2", session_id=session_id)

    try:
        async with anyio.create_task_group() as tg:
            agent = Agent(model=ScriptedModel(["hi"]))
            config = ServerConfig(api_keys={"a-key-of-sixteen-chars": "alice"})
            host = SessionHost(agent, config, stores, ApprovalSigner(b"k" * 32), tg)
            session = await host.create(Principal("alice"))
            sid = session.session_id
            tg.start_soon(host.start, session, first(sid))
            await anyio.wait_all_tasks_blocked()  # the first start waits for its first event
            with pytest.raises(SessionBusy, match="already has an active run"):
                await host.start(session, second(sid))
            gate.set()
            await anyio.wait_all_tasks_blocked()
            assert host.runs.stream("s1") is not None  # the first run went on
            assert host.runs.stream("s2") is None
            tg.cancel_scope.cancel()
    finally:
        await stores.aclose()
    assert second_ran == []
