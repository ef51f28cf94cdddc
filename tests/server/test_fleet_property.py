"""Many workers, many doors, crashes: the promises hold (a property, through real processes).

Two worker processes (:mod:`tests.server.fleet_worker`) serve
:mod:`tests.server.fleet_agent` from one deployment's stores: one SQLite
file, or PostgreSQL sessions with Redis checkpoints and locks. Hypothesis
draws what each door set does: conversations, calls, decisions posted at once
through random doors and workers (duplicates and conflicting ones among
them), cancellations, and a SIGKILL of a process just before a random store
operation (:mod:`tests.server.fleet_switch`). The tools write the effect log
themselves; :mod:`tests.server.fleet_judge` judges by it:

- no confirm-tier write runs before its decision (the test logs
  ``approve-sent`` before it posts an approval);
- every write runs at most once;
- the auto-approved spend of a session (or of a direct caller's account,
  across examples) never exceeds its cap;
- every stream a client read to its end ends with exactly one terminal event;
- whatever happened, the survivors continue: any live worker decides what
  waits, and an approved write then runs once;
- no request is answered with a 5xx (nor, over A2A, a JSON-RPC internal error).

A killed process is seen dead (its exit is waited on), then the test drops its
leases as a supervisor would; the survivors go on, and the next example starts
a replacement.

Three door sets, each on both backends:

- the session doors (:mod:`tests.server.fleet_set_sessions`): REST, AI SDK,
  AG-UI and A2A turns; decisions through those and as A2A replies;
- the engine's direct calls (:mod:`tests.server.fleet_set_engine`): the
  signed ``/v1/engine`` route with byte-for-byte replays to the other worker,
  and ``Engine.tool_call`` in this process as the same caller;
- the MCP server (:mod:`tests.server.fleet_set_mcp`): two server processes,
  retries replayed and conflicting.

Each runs its explicit examples, then draws ``FLEET_EXAMPLES`` per backend
(default: 2 for the session doors, 1 for the engine and MCP sets, whose
explicit examples already kill and cancel).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from tests.server.fleet import KEY, WORKERS, Fleet, McpServers
from tests.server.fleet_set_engine import engine_property
from tests.server.fleet_set_mcp import mcp_property
from tests.server.fleet_set_sessions import A2A_TASKS_SHARED_ON_SQLITE, session_property
from tests.server.test_workers import _as_url
from tests.stores.servers import RedisServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _run_fleet(
    tmp_path: Path, fields: dict[str, Any], locks_url: str, doors: str, *, a2a_shared: bool
) -> None:
    from mainspring.engine.signing import SigningKey, public_key_text

    key = SigningKey.generate("fleet-peer")
    fields = {
        **fields,
        "api_keys": {KEY: "alice"},
        "signing_key": "cd" * 32,
        "lock_ttl": 3600,
        "rate_per_minute": 0,  # (many requests of one principal: not what is judged here)
        "engine": "tests.server.fleet_agent:engine",
        "engine_keys": {key.key_id: public_key_text(key.public_key)},
    }
    fleet = Fleet(tmp_path, fields, locks_url, tmp_path / "effects.log")
    servers = McpServers(fleet, secrets.token_hex(32))
    try:
        if doors == "mcp":
            for _ in range(WORKERS):
                servers.start()
            mcp_property(servers)
            return
        for _ in range(WORKERS):
            fleet.start()
        if doors == "engine":
            with pytest.MonkeyPatch.context() as patch:  # the direct door's tools log here too
                patch.setenv("MAINSPRING_TEST_EFFECTS", str(fleet.effects))
                engine_property(fleet, key)
        else:
            session_property(fleet, a2a_shared=a2a_shared)
    finally:
        servers.stop()
        fleet.stop()


DOOR_SETS = ("sessions", "engine", "mcp")
"""The session doors (REST, AI SDK, AG-UI, A2A); the signed engine route with in-process
direct calls; the MCP server."""


@pytest.mark.parametrize("doors", DOOR_SETS)
def test_the_promises_hold_across_sqlite_workers(tmp_path: Path, doors: str) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    _run_fleet(tmp_path, {"store": url}, url, doors, a2a_shared=A2A_TASKS_SHARED_ON_SQLITE)


@pytest.mark.parametrize("doors", DOOR_SETS)
def test_the_promises_hold_across_redis_and_postgresql_workers(
    tmp_path: Path, redis_server: RedisServer, postgres_url: str, doors: str
) -> None:
    fields = {
        "store": None,
        "sessions": _as_url(postgres_url),
        "checkpoints": redis_server.url,
        "locks": redis_server.url,
    }
    _run_fleet(tmp_path, fields, redis_server.url, doors, a2a_shared=True)
