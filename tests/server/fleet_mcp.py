"""An MCP server worker of the fleet property test: the fleet's agent over streamable HTTP.

``python -m tests.server.fleet_mcp FIELDS_JSON KEY_HEX`` serves
:func:`tests.server.fleet_agent.agent`'s tools (confirm tier exposed) on a
free loopback port, as every worker behind one MCP URL must: the
request-state key they all share (``KEY_HEX``), approval nonces claimed in
the deployment's store and the auto-spend ledger in its session store
(``FIELDS_JSON``: the ``store``/``sessions``/``checkpoints``/``locks`` URLs
of the fleet). It prints ``port <n>`` once it listens. The tools write the
effect log (``$MAINSPRING_TEST_EFFECTS``) themselves. Its store operations pass
the kill switch of :mod:`tests.server.fleet_switch`, as a worker's do.
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp.server.request_state import RequestStateSecurity

from mainspring.mcp.server import build_mcp_server, serve_http
from mainspring.stores.records import shared_records
from mainspring.stores.urls import open_stores
from tests.server.fleet_agent import agent
from tests.server.fleet_switch import install


async def main(fields_json: str, key: str) -> None:
    fields = json.loads(fields_json)
    stores = await open_stores(
        fields.get("store"),
        sessions=fields.get("sessions"),
        checkpoints=fields.get("checkpoints"),
        locks=fields.get("locks"),
    )
    install((stores.sessions, stores.checkpoints, stores.locks))
    try:
        server = build_mcp_server(
            agent(),
            expose_confirm=True,
            request_state_security=RequestStateSecurity(keys=[bytes.fromhex(key)]),
            store=shared_records(stores.sessions, stores.locks),
        )
        async with anyio.create_task_group() as tg:
            port = await tg.start(
                lambda task_status: serve_http(server, port=0, task_status=task_status)
            )
            sys.stdout.write(f"port {port}\n")
            sys.stdout.flush()
    finally:
        await stores.aclose()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
