"""A worker process of the fleet property test: the server app under uvicorn, with a kill switch.

``python -m tests.server.fleet_worker PORT``, configured as ``mainspring serve``
configures its workers (``$MAINSPRING_SERVER_CONFIG``). Every store operation
(each coroutine method of the session store, checkpoint store and run lock it
opens) passes the switch. ``SIGUSR1`` arms it: the worker reads a number N
from ``$FLEET_ARM_DIR/<pid>`` and SIGKILLs itself just before its Nth store
operation from then on (0 disarms).
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import signal
import sys
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import uvicorn

from mainspring.server.app import app_from_env
from mainspring.stores.urls import open_stores

_left = [0]
_patched: set[type] = set()


def _arm(signum: int, frame: object) -> None:
    try:
        _left[0] = int((Path(os.environ["FLEET_ARM_DIR"]) / str(os.getpid())).read_text())
    except (OSError, ValueError):
        _left[0] = 0


def _switched(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def run(*args: Any, **kwargs: Any) -> Any:
        if _left[0] > 0:
            _left[0] -= 1
            if _left[0] == 0:
                os.kill(os.getpid(), signal.SIGKILL)
        return await method(*args, **kwargs)

    return run


def _patch(cls: type) -> None:
    if cls in _patched:
        return
    _patched.add(cls)
    for name in dir(cls):
        if name.startswith("_") or name == "aclose":
            continue
        static = inspect.getattr_static(cls, name)
        if isinstance(static, types.FunctionType) and inspect.iscoroutinefunction(static):
            setattr(cls, name, _switched(static))


async def _patch_store_classes() -> None:
    fields = json.loads(os.environ["MAINSPRING_SERVER_CONFIG"])["config"]
    stores = await open_stores(
        fields.get("store"),
        sessions=fields.get("sessions"),
        checkpoints=fields.get("checkpoints"),
        locks=fields.get("locks"),
    )
    try:
        for store in (stores.sessions, stores.checkpoints, stores.locks):
            if store is not None:
                _patch(type(store))
    finally:
        await stores.aclose()


def main(port: int) -> None:
    anyio.run(_patch_store_classes)
    signal.signal(signal.SIGUSR1, _arm)
    config = uvicorn.Config(
        app_from_env(), host="127.0.0.1", port=port, log_level="warning", access_log=False
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main(int(sys.argv[1]))
