"""The kill switch of the fleet's processes: SIGKILL just before the Nth store operation.

A worker (:mod:`tests.server.fleet_worker`) or MCP server
(:mod:`tests.server.fleet_mcp`) process calls :func:`install` with the
stores it opened: every coroutine method of their classes then passes the
switch. The test arms it with :func:`arm`, writing ``<generation> <N>`` to
``$FLEET_ARM_DIR/<pid>`` (atomically, by a rename): at each store operation
the process reads that file, and from the first operation that sees a new
generation on, it SIGKILLs itself just before its Nth (0 disarms). The file
is read at every operation, so once :func:`arm` returns, the switch holds:
a disarmed process never dies on the next request.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import os
import signal
import types
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

_state = {"generation": -1, "left": 0}
_patched: set[type] = set()


def _trip() -> bool:
    """Count one store operation: whether it is the one to die before."""
    try:
        generation, left = map(int, (_folder() / str(os.getpid())).read_text().split())
    except (OSError, ValueError):
        return False
    if generation != _state["generation"]:
        _state.update(generation=generation, left=left)
    if _state["left"] <= 0:
        return False
    _state["left"] -= 1
    return _state["left"] == 0


def _folder() -> Path:
    return Path(os.environ["FLEET_ARM_DIR"])


def _switched(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def run(*args: Any, **kwargs: Any) -> Any:
        if _trip():
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


def install(stores: Iterable[object | None]) -> None:
    """Put the switch on every store operation of these stores' classes."""
    for store in stores:
        if store is not None:
            _patch(type(store))


_generations = itertools.count(1)


def arm(folder: Path, pid: int, operations: int) -> None:
    """Arm process ``pid`` (its switch reads ``folder``) to die before its Nth operation."""
    path = folder / str(pid)
    staged = folder / f"{pid}.next"
    staged.write_text(f"{next(_generations)} {operations}")
    staged.replace(path)
