"""Notes (per agent, persistent) and todo lists (per session, surviving a reload)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

from mainspring import (
    Agent,
    Message,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
)
from mainspring.models.base import ToolSpec
from mainspring.stores import SQLiteSessionStore
from mainspring.testing import collect
from mainspring.toolkits import (
    InMemoryToolDataStore,
    SQLiteToolDataStore,
    ToolDataStore,
    notes_tools,
    todo_tools,
)

pytestmark = pytest.mark.anyio


def calling(*calls: tuple[str, dict[str, Any]]) -> ScriptedModel:
    """A model that makes the given calls, one step each, then says it is done."""
    script: list[str | ScriptedResponse] = [
        ScriptedResponse(tool_calls=[ScriptedCall(name, args)]) for name, args in calls
    ]
    return ScriptedModel([*script, "Done."])


async def results(agent: Agent, session: Session | None = None) -> list[ToolResult]:
    events = await collect((session or Session(agent)).send("go"))
    return [e for e in events if isinstance(e, ToolResult)]


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ToolDataStore:
    if request.param == "memory":
        return InMemoryToolDataStore()
    return SQLiteToolDataStore(tmp_path / "data.db")


async def test_store_contract(store: ToolDataStore) -> None:
    assert await store.get("ns", "k") is None
    await store.put("ns", "k", {"a": [1, 2]})
    assert await store.get("ns", "k") == {"a": [1, 2]}
    assert await store.append("seq", "one") == "00000001"
    assert await store.append("seq", "two") == "00000002"
    assert await store.items("seq", after="00000001") == [("00000002", "two")]
    assert await store.count("seq") == 2
    assert await store.count("other") == 0


async def test_notes_add_list_read_search(store: ToolDataStore) -> None:
    tools = notes_tools(store)
    adds = [("notes_add", {"text": f"fact {i}\ndetail", "title": ""}) for i in range(25)]
    agent = Agent(name="scribe", model=calling(*adds), tools=tools)
    assert [r.content for r in await results(agent)][:2] == ["saved note 1", "saved note 2"]
    reads = calling(
        ("notes_list", {"page": 2}),
        ("notes_read", {"note_id": 3}),
        ("notes_search", {"query": "FACT 2"}),
        ("notes_read", {"note_id": 99}),
    )
    listed, read, found, missing = await results(Agent(name="scribe", model=reads, tools=tools))
    assert listed.content.splitlines()[0] == "25 notes, page 2 of 2"
    assert listed.content.splitlines()[1].startswith("21: fact 20 (")
    assert read.content.endswith("\nfact 2\ndetail")
    assert [line.split(":")[0] for line in found.content.splitlines()] == [
        "3",
        *[str(i + 1) for i in range(20, 25)],
    ]
    assert missing.is_error and "no note 99" in missing.content


async def test_notes_belong_to_their_agent(store: ToolDataStore) -> None:
    tools = notes_tools(store)
    await results(Agent(name="a", model=calling(("notes_add", {"text": "mine"})), tools=tools))
    other = await results(Agent(name="b", model=calling(("notes_list", {})), tools=tools))
    assert other[0].content == "0 notes, page 1 of 1"


async def test_todo_is_validated_and_incremental(store: ToolDataStore) -> None:
    tools = todo_tools(store)
    model = calling(
        ("todo_write", {"add": [{"id": "a", "content": "read"}, {"id": "b", "content": "fix"}]}),
        ("todo_write", {"update": [{"id": "a", "status": "in_progress"}]}),
        ("todo_write", {"update": [{"id": "b", "status": "in_progress"}]}),
        ("todo_write", {"update": [{"id": "a", "status": "done"}], "remove": ["b"]}),
        ("todo_write", {"add": [{"id": "a", "content": "again"}]}),
        ("todo_read", {}),
    )
    out = await results(Agent(model=model, tools=tools))
    assert out[0].content == "0/2 done\n[ ] a: read\n[ ] b: fix"
    assert out[1].content == "0/2 done\n[>] a: read\n[ ] b: fix"
    assert out[2].is_error and "at most one item may be in_progress" in out[2].content
    assert out[3].content == "1/1 done\n[x] a: read"
    assert out[4].is_error and "unique" in out[4].content
    assert out[5].content == "1/1 done\n[x] a: read"


async def test_todo_lists_are_per_session(store: ToolDataStore) -> None:
    tools = todo_tools(store)
    write = ("todo_write", {"add": [{"id": "x", "content": "one"}]})
    await results(Agent(model=calling(write), tools=tools))
    other = await results(Agent(model=calling(("todo_read", {})), tools=tools))
    assert other[0].content == "the todo list is empty"


async def test_todo_survives_a_reload_from_the_session_store(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"

    def script(messages: Sequence[Message], specs: Sequence[ToolSpec]) -> ScriptedResponse | str:
        last = messages[-1]
        if last.role == "tool":
            return "ok"
        if "plan" in last.text:
            add: dict[str, JsonValue] = {"add": [{"id": "t1", "content": "write tests"}]}
            return ScriptedResponse(tool_calls=[ScriptedCall("todo_write", add)])
        return ScriptedResponse(tool_calls=[ScriptedCall("todo_read", {})])

    def agent(data: ToolDataStore) -> Agent:
        return Agent(model=ScriptedModel(script), tools=todo_tools(data))

    sessions = await SQLiteSessionStore.open(db)
    data = SQLiteToolDataStore(db)  # the same file, its own table
    first = Session(agent(data), session_store=sessions)
    await collect(first.send("plan"))
    session_id = first.session_id
    await sessions.aclose()
    data.close()

    sessions = await SQLiteSessionStore.open(db)
    data = SQLiteToolDataStore(db)
    later = await Session.load(agent(data), sessions, session_id)
    events = await collect(later.send("what is left?"))
    read = next(e for e in events if isinstance(e, ToolResult))
    assert read.content == "0/1 done\n[ ] t1: write tests"
    await sessions.aclose()
    data.close()
