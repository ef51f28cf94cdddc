"""Two replies at once to one paused A2A task: each reply's stream ends once.

Found by the fleet property test (A2A replies as a decision door). The A2A
SDK's request handler taps a message on a task whose execution is running
into that execution's event queue; so the second reply's client read the
first reply's events up to ``completed``, then its own refusal (the task is
terminal by then): two terminal events in one stream. The server now refuses
a message to a task a message is being handled for on this worker (one
JSON-RPC error) before the SDK taps its queue.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from a2a.server.request_handlers import DefaultRequestHandler

from mainspring.server import ServerConfig, create_app
from mainspring.server._a2a import _Handler
from mainspring.server._a2a_executor import session_id_of
from mainspring.server._auth import Principal
from tests.server.fleet import KEY, client
from tests.server.fleet_agent import agent
from tests.server.fleet_doors import Seen, decide_a2a, send_a2a
from tests.server.fleet_judge import runs_of
from tests.server.servers import serving

UNSUPPORTED_OPERATION = -32004
"""The JSON-RPC code of the SDK's ``UnsupportedOperationError``."""


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


@pytest.mark.anyio
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
    assert runs_of(effects, "s-0") == 1
    for seen in replies:
        assert seen.terminals == 1 and seen.last_is_terminal, seen.kinds
    # one reply is the task's; the other is refused, not handed the first one's events
    ends = sorted(seen.kinds[-1] for seen in replies)
    assert ends == ["TASK_STATE_COMPLETED", "error"], [seen.kinds for seen in replies]
    refused = next(seen for seen in replies if seen.kinds[-1] == "error")
    assert refused.kinds == ["error"] and refused.error_code == UNSUPPORTED_OPERATION
    assert "not waiting for input" in refused.last_data


@pytest.mark.anyio
async def test_a_reply_after_the_first_is_handled_gets_one_answer(base: str, effects: Path) -> None:
    context = uuid.uuid4().hex
    async with client() as http:
        plan = await send_a2a(http, base, context, "plan " + json.dumps([["sign", "s-1"]]))
        sid = session_id_of("fleet", Principal("alice"), context)
        pending = (await http.get(f"{base}/v1/sessions/{sid}/pending")).json()["pending"]
        first = await decide_a2a(http, base, context, plan.task_id, pending, "approve")
        again = await decide_a2a(http, base, context, plan.task_id, pending, "approve")
    assert first.kinds[-1] == "TASK_STATE_COMPLETED" and first.terminals == 1
    assert again.kinds == ["error"]  # the task is over: one refusal, no replay
    assert runs_of(effects, "s-1") == 1


def test_the_sdk_still_has_what_the_handler_overrides() -> None:
    """A renamed SDK method would silently drop the override: fail here instead."""
    for name in _Handler.OVERRIDES:
        assert callable(getattr(DefaultRequestHandler, name, None)), (
            f"a2a-sdk's DefaultRequestHandler has no {name!r}: review server._a2a._Handler"
        )
