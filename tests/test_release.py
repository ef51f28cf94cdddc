"""A finished conversation is freed when the host drops it, not at a garbage collection.

A server holding thousands of conversations frees each one's messages, context
compiler and run machinery as soon as it lets go of the session: nothing of a
run is left in a reference cycle that only Python's cyclic collector can free
(which runs late, and touches every live object when it does).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from mainspring import Agent, ScriptedModel, Session, tool
from mainspring.stores.urls import open_stores
from mainspring.testing import ScriptedCall, ScriptedResponse
from tests.helpers import send

pytestmark = pytest.mark.anyio


@tool(read_only=True)
async def balance() -> dict[str, int]:
    """Read the balance."""
    return {"cents": 1200}


def agent() -> Agent:
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=[ScriptedCall("balance", {})]),
            ScriptedResponse(text="You have $12."),
        ]
    )
    return Agent(model=model, name="wallet", tools=[balance])


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def mainspring_garbage() -> list[str]:
    """Objects of mainspring's own classes that only the cyclic collector would free."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = [
            type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("mainspring")
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return found


@pytest.mark.parametrize("stores", ["none", "memory", "sqlite"])
async def test_a_dropped_session_is_freed_at_once(
    stores: str, tmp_path: Path, no_collector: None
) -> None:
    kwargs = {}
    if stores != "none":
        opened = await open_stores(
            "memory://" if stores == "memory" else f"sqlite:///{tmp_path}/s.db"
        )
        kwargs = opened.session_kwargs()
    session = Session(agent(), **kwargs)
    events = await send(session, "What is my balance?")
    assert events[-1].type == "turn_complete"
    freed = weakref.ref(session)
    del session, events
    assert freed() is None  # by reference counting alone
    assert mainspring_garbage() == []  # and nothing of it waits in a cycle
