"""One worker of a two-worker MCP server, for ``test_approval_workers``.

``python -m tests.mcp._approval_worker URL_OF_STORE EFFECTS KEY_HEX``: serves
``delete_account`` (confirm tier) over streamable HTTP on a free loopback
port, with the request-state key and the store every worker shares, and
prints ``port <n>`` once it listens. The tool appends ``deleted <account>``
to EFFECTS itself: the file says how often it ran, on any worker.
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.request_state import RequestStateSecurity

from mainspring import Agent, tool
from mainspring.mcp.server import build_mcp_server, serve_http
from mainspring.stores.records import shared_records
from mainspring.stores.urls import open_stores
from mainspring.testing import ScriptedModel


async def main(store: str, effects: str, key: str) -> None:
    @tool(permission="confirm")
    def delete_account(account: str) -> str:
        """Close an account for good."""
        with open(effects, "a", encoding="utf-8") as out:
            out.write(f"deleted {account}\n")
        return f"deleted {account}"

    agent = Agent(model=ScriptedModel([]), name="bank", tools=[delete_account])
    stores = await open_stores(store)
    try:
        server = build_mcp_server(
            agent,
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
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
