"""A worker keeps of a finished run only what reconnects need, and only ``keep_finished``.

A busy server used to keep every finished run whole (its session, messages,
model request, pump machinery: about 120 objects a conversation) until some
later lookup swept it, so each full garbage collection walked every recent
conversation. Now a run that ends leaves a :class:`FinishedRun` (its events,
whose they are), and finished runs expire oldest first as new runs arrive.
"""

from __future__ import annotations

import gc
import weakref

import anyio
import pytest

from mainspring import Agent, ScriptedModel
from mainspring.events import TurnComplete
from mainspring.server import ServerConfig
from mainspring.server._auth import Principal
from mainspring.server._host import NotFound, SessionHost
from mainspring.server._runs import FinishedRun, LiveRun, Runs
from mainspring.server._signing import ApprovalSigner
from mainspring.stores import open_stores

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_finished_run_leaves_its_events_and_lets_the_rest_go() -> None:
    stores = await open_stores("memory://")
    clock = Clock()
    try:
        async with anyio.create_task_group() as tg:
            agent = Agent(model=ScriptedModel(["hello there", "again"]))
            config = ServerConfig(api_keys={"a-key-of-sixteen-chars": "alice"})
            host = SessionHost(agent, config, stores, ApprovalSigner(b"k" * 32), tg)
            # the expiry below is the clock's, never a sleep
            host.runs = Runs(keep_finished=config.keep_finished, clock=clock)
            session = await host.create(Principal("alice"))
            run = await host.send(session, "hi")
            await run.wait_done()
            streamed = list(run.events)
            stream_id = run.stream_id
            assert stream_id is not None and isinstance(streamed[-1], TurnComplete)
            assert host.runs.active(session.session_id) is None
            kept = host.runs.stream(stream_id)
            assert isinstance(kept, FinishedRun)
            assert kept.principal == "alice" and kept.session_id == session.session_id
            # a reconnect after the end reads every event after the one it names
            followed = [e async for _, e in kept.follow(1)]
            assert followed == streamed[2:]
            replayed = host.follow(Principal("alice"), session.session_id, stream_id, 1)
            assert [e async for _, e in await replayed] == streamed[2:]
            with pytest.raises(NotFound):  # whose it is travels with it
                await host.follow(Principal("bob"), session.session_id, stream_id, -1)
            # nothing of the worker holds the live run any more
            gone = weakref.ref(run)
            del run
            gc.collect()
            assert gone() is None
            # the next run sweeps what ended more than keep_finished ago, with no lookup
            clock.now += config.keep_finished + 1.0
            second = await host.send(session, "and again")
            await second.wait_done()
            assert stream_id not in host.runs._by_stream
            assert second.stream_id is not None
            assert isinstance(host.runs.stream(second.stream_id), FinishedRun)
            tg.cancel_scope.cancel()
    finally:
        await stores.aclose()


async def test_a_run_that_ended_before_it_was_tracked_is_kept_finished() -> None:
    stores = await open_stores("memory://")
    try:
        async with anyio.create_task_group() as tg:
            agent = Agent(model=ScriptedModel(["hi"]))
            config = ServerConfig(api_keys={"a-key-of-sixteen-chars": "alice"})
            host = SessionHost(agent, config, stores, ApprovalSigner(b"k" * 32), tg)
            session = await host.create(Principal("alice"))
            run = LiveRun(session, session.send("hi"))
            await run.pump()  # it ends before the worker tracks it
            host.runs.add(run)
            assert run.stream_id is not None
            assert host.runs.active(session.session_id) is None
            kept = host.runs.stream(run.stream_id)
            assert isinstance(kept, FinishedRun) and kept.events == tuple(run.events)
            tg.cancel_scope.cancel()
    finally:
        await stores.aclose()


@pytest.mark.parametrize("freeze", [True, False], ids=["frozen", "default"])
def test_a_server_freezes_what_start_up_built_only_when_told(freeze: bool) -> None:
    from mainspring.server import create_app
    from tests.server.servers import serving

    gc.unfreeze()
    config = ServerConfig(api_keys={"a-key-of-sixteen-chars": "alice"}, gc_freeze=freeze)
    app = create_app(Agent(model=ScriptedModel(["hi"])), config)
    try:
        with serving(app):
            frozen = gc.get_freeze_count()
    finally:
        gc.unfreeze()  # the rest of this test process collects as before
    assert (frozen > 0) is freeze
