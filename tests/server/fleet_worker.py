"""A worker process of the fleet property test: the server app under uvicorn, with a kill switch.

``python -m tests.server.fleet_worker PORT``, configured as ``mainspring serve``
configures its workers (``$MAINSPRING_SERVER_CONFIG``). Every store operation
(each coroutine method of the session store, checkpoint store and run lock it
opens) passes the switch of :mod:`tests.server.fleet_switch`.
"""

from __future__ import annotations

import json
import os
import sys

import anyio
import uvicorn

from mainspring.server.app import app_from_env
from mainspring.stores.urls import open_stores
from tests.server.fleet_switch import install


async def _switch_store_classes() -> None:
    fields = json.loads(os.environ["MAINSPRING_SERVER_CONFIG"])["config"]
    stores = await open_stores(
        fields.get("store"),
        sessions=fields.get("sessions"),
        checkpoints=fields.get("checkpoints"),
        locks=fields.get("locks"),
    )
    try:
        install((stores.sessions, stores.checkpoints, stores.locks))
    finally:
        await stores.aclose()


def main(port: int) -> None:
    anyio.run(_switch_store_classes)
    config = uvicorn.Config(
        app_from_env(), host="127.0.0.1", port=port, log_level="warning", access_log=False
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main(int(sys.argv[1]))
