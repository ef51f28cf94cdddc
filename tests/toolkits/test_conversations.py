"""Conversation memory: a principal's earlier sessions, searchable, never another's."""

from __future__ import annotations

from typing import Any

import pytest

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, Session, ToolResult
from mainspring.embeddings import HashingEmbedder
from mainspring.errors import ConfigError
from mainspring.memory import InMemoryMemoryStore
from mainspring.testing import collect
from mainspring.toolkits.conversations import ConversationMemory

pytestmark = pytest.mark.anyio


def calling(*calls: tuple[str, dict[str, Any]]) -> ScriptedModel:
    script: list[str | ScriptedResponse] = [
        ScriptedResponse(tool_calls=[ScriptedCall(name, args)]) for name, args in calls
    ]
    return ScriptedModel([*script, "Done."])


async def test_past_sessions_are_searchable_and_the_current_one_is_left_out() -> None:
    store = InMemoryMemoryStore(embedder=HashingEmbedder())
    ada = ConversationMemory(store, principal="ada")
    bob = ConversationMemory(store, principal="bob")

    first = Session(Agent(model=ScriptedModel(["Noted: your cat is called Pixel."])))
    await collect(first.send("My cat is called Pixel."))
    assert await ada.record(first.session_id, first.messages) == 2
    assert await ada.record(first.session_id, first.messages) == 0  # nothing new

    other = Session(Agent(model=ScriptedModel(["Fine."])))
    await collect(other.send("My cat is called Rex."))
    await bob.record(other.session_id, other.messages)

    agent = Agent(model=calling(("search_conversations", {"query": "cat name"})), tools=ada.tools())
    second = Session(agent)
    events = await collect(second.send("what is my cat called?"))
    await ada.record(second.session_id, second.messages)
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert f"(session {first.session_id}, user) My cat is called Pixel." in result.content
    assert "Rex" not in result.content  # bob's conversations are not ada's
    assert second.session_id not in result.content


async def test_bad_configuration_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="principal"):
        ConversationMemory(InMemoryMemoryStore(), principal="")
