"""Two replies at once to one paused A2A task: each reply's stream ends once.

Found by the fleet property test (A2A replies as a decision door). The A2A
SDK's request handler taps a message on a task whose execution is running
into that execution's event queue; so the second reply's client reads the
first reply's events up to ``completed``, then its own refusal (the task is
terminal by then): two terminal events in one stream. The write still runs
once. Strict xfail until the server refuses (or serializes) a reply to a
task whose execution is running before the SDK taps its queue; then drop the
mark and raise ``A2A_REPLIES_AT_ONCE_PER_WORKER`` in
``tests/server/fleet_set_sessions.py``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mainspring.server import ServerConfig, create_app
from mainspring.server._a2a_executor import session_id_of
from mainspring.server._auth import Principal
from tests.server.fleet import KEY, client
from tests.server.fleet_agent import agent
from tests.server.fleet_doors import Seen, decide_a2a, send_a2a
from tests.server.fleet_judge import runs_of
from tests.server.servers import serving

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "effects.log"
    monkeypatch.setenv("MAINSPRING_TEST_EFFECTS", str(path))
    return path


@pytest.fixture
def base(effects: Path) -> Iterator[str]:
    config = ServerConfig(
        store="memory://", api_keys={KEY: "alice"}, signing_key=b"s" * 32, rate_per_minute=0
    )
    with serving(create_app(agent(), config)) as url:
        yield url


@pytest.mark.xfail(strict=True, reason="the A2A SDK taps a second reply into the running task")
async def test_two_replies_at_once_to_one_task_each_end_with_one_terminal_event(
    base: str, effects: Path
) -> None:
    context = uuid.uuid4().hex
    async with client() as http:
        await send_a2a(http, base, context, "hello")
        plan = await send_a2a(http, base, context, "plan " + json.dumps([["sign", "s-0"]]))
        assert plan.kinds[-1] == "TASK_STATE_INPUT_REQUIRED"
        sid = session_id_of("fleet", Principal("alice"), context)
        pending = (await http.get(f"{base}/v1/sessions/{sid}/pending")).json()["pending"]
        replies: list[Seen] = []

        async def reply() -> None:
            replies.append(await decide_a2a(http, base, context, plan.task_id, pending, "approve"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(reply)
            tg.start_soon(reply)
    assert runs_of(effects, "s-0") == 1  # (holds today: the write runs once)
    for seen in replies:
        assert seen.terminals == 1 and seen.last_is_terminal, seen.kinds
