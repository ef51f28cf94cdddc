"""remember / recall / forget as model tools, driven through a session (the one dispatch path)."""

from __future__ import annotations

from typing import Any

import pytest

from mainspring import (
    Agent,
    Approve,
    PendingAction,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
)
from mainspring.embeddings import HashingEmbedder
from mainspring.memory import DEFAULT_SCOPE, InMemoryMemoryStore, MemoryWriter
from mainspring.principals import Caller, data_scope
from mainspring.testing import collect
from mainspring.toolkits import memory_tools
from tests.helpers import resume

pytestmark = pytest.mark.anyio


def calling(*calls: tuple[str, dict[str, Any]]) -> ScriptedModel:
    script: list[str | ScriptedResponse] = [
        ScriptedResponse(tool_calls=[ScriptedCall(name, args)]) for name, args in calls
    ]
    return ScriptedModel([*script, "Done."])


async def test_remember_then_recall_in_the_agents_scope() -> None:
    store = InMemoryMemoryStore(embedder=HashingEmbedder())
    writer = MemoryWriter(store)
    tools = memory_tools(store, writer=writer, scope=lambda ctx: f"agent:{ctx.agent_name}")
    agent = Agent(
        name="helper",
        model=calling(("remember", {"text": "The user prefers metric units"})),
        tools=tools,
    )
    events = await collect(Session(agent).send("remember this"))
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.content == "will remember that" and not result.is_error
    await writer.drain()
    (item,) = await store.recall("units", scope="agent:helper")
    assert item.meta["agent"] == "helper"

    agent = Agent(
        name="helper", model=calling(("recall", {"query": "metric", "k": 50})), tools=tools
    )
    events = await collect(Session(agent).send("what do you know?"))
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert f"[{item.id}] The user prefers metric units" in result.content


LOCAL = data_scope(Caller("local", kind="service"), "agent")
"""The default scope of a session run outside any server or engine (agent "agent")."""


async def test_recall_is_bounded() -> None:
    store = InMemoryMemoryStore()
    for i in range(30):
        await store.remember(f"note {i} " + "x" * 2000, scope=LOCAL)
    tools = memory_tools(store, max_results=3, max_item_chars=40)
    agent = Agent(model=calling(("recall", {"query": "note", "k": 100})), tools=tools)
    events = await collect(Session(agent).send("go"))
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    lines = result.content.splitlines()
    assert len(lines) == 3
    assert all(len(line) < 120 for line in lines)


async def test_remember_rejects_oversized_text_as_a_tool_error() -> None:
    store = InMemoryMemoryStore()
    agent = Agent(model=calling(("remember", {"text": "x" * 5000})), tools=memory_tools(store))
    events = await collect(Session(agent).send("go"))
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error and "at most 2000 characters" in result.content
    assert await store.recall("x", scope=LOCAL) == []


async def test_forget_pauses_for_approval_and_deletes_only_after_it() -> None:
    store = InMemoryMemoryStore()
    item = await store.remember("the door code is 1234", scope=LOCAL)
    agent = Agent(model=calling(("forget", {"memory_id": item.id})), tools=memory_tools(store))
    session = Session(agent)
    events = await collect(session.send("forget the door code"))
    (pending,) = [e for e in events if isinstance(e, PendingAction)]
    assert pending.name == "forget"
    assert len(await store.recall("door", scope=LOCAL)) == 1  # nothing ran before the decision
    events = await resume(session, pending.attempt_id, Approve())
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.content == f"forgot {item.id}"
    assert await store.recall("door", scope=LOCAL) == []


async def test_the_default_scope_is_the_callers_own_and_a_shared_one_is_explicit() -> None:
    store = InMemoryMemoryStore()
    await store.remember("an old shared fact about the door", scope=DEFAULT_SCOPE)
    own = Agent(model=calling(("recall", {"query": "door"})), tools=memory_tools(store))
    (result,) = [e for e in await collect(Session(own).send("go")) if isinstance(e, ToolResult)]
    assert result.content == "no memories match"  # the old shared scope is not read by default
    shared = Agent(
        model=calling(("recall", {"query": "door"})),
        tools=memory_tools(store, scope=DEFAULT_SCOPE),
    )
    (result,) = [e for e in await collect(Session(shared).send("go")) if isinstance(e, ToolResult)]
    assert "an old shared fact about the door" in result.content


async def test_forget_of_an_unknown_id_is_a_tool_error() -> None:
    store = InMemoryMemoryStore()
    agent = Agent(model=calling(("forget", {"memory_id": "nope"})), tools=memory_tools(store))
    session = Session(agent)
    events = await collect(session.send("go"))
    (pending,) = [e for e in events if isinstance(e, PendingAction)]
    events = await resume(session, pending.attempt_id, Approve())
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error and "no memory 'nope'" in result.content
