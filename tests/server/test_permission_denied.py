"""A call refused by policy reaches every server stream as what it is.

The API's SSE carries the ``permission_denied`` event itself (with the
authenticated principal); the AI SDK stream a transient ``data-permission-denied``
part, AG-UI a ``mainspring.permission_denied`` custom event; each then the
call's error result, as before.
"""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import CustomEvent

from mainspring import Agent, PermissionDenied, PermissionRules, ScriptedModel, tool
from mainspring.server._agui_events import AguiRun
from mainspring.server._aisdk import UIMessageStream
from mainspring.testing import ScriptedCall, ScriptedResponse
from tests.server.conftest import client_for, read_sse

pytestmark = pytest.mark.anyio

DENIED = PermissionDenied(
    tool_use_id="c1", name="wipe", reason="'wipe' is on the deny list", source="deny_list"
)


def _denying_agent(ran: list[str]) -> Agent:
    @tool
    def wipe(path: str) -> str:
        """Delete a folder."""
        ran.append(path)
        return "wiped"

    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("wipe", {"path": "/"})]), "I may not."]
    )
    return Agent(
        name="wiper", model=model, tools=[wipe], permissions=PermissionRules(deny=("wipe",))
    )


async def test_the_api_streams_permission_denied_with_the_principal_then_the_error_result(
    server_for: Any,
) -> None:
    ran: list[str] = []
    base = server_for(_denying_agent(ran))
    async with client_for(base) as client:
        created = await client.post("/v1/sessions", json={})
        sid = created.json()["session_id"]
        frames = await read_sse(
            client, "POST", f"/v1/sessions/{sid}/messages", json_body={"message": "clean up"}
        )
    kinds = [f.event for f in frames]
    at = kinds.index("permission_denied")
    denied, result = frames[at].data, frames[at + 1]
    assert denied["name"] == "wipe" and denied["source"] == "deny_list"
    assert denied["reason"] == "'wipe' is on the deny list"
    assert denied["principal"] == "alice"  # the authenticated caller who owns the session
    assert result.event == "tool_result" and result.data["tool_use_id"] == denied["tool_use_id"]
    assert result.data["is_error"] and result.data["content"].startswith("permission denied:")
    assert kinds[-1] == "turn_complete" and ran == []


def test_the_ai_sdk_stream_maps_it_to_a_transient_data_part() -> None:
    chunks = UIMessageStream(session_id="s").chunks(DENIED)
    part = chunks[-1]
    assert part["type"] == "data-permission-denied" and part["transient"] is True
    assert part["data"] == {
        "toolCallId": "c1",
        "toolName": "wipe",
        "reason": "'wipe' is on the deny list",
        "source": "deny_list",
    }


def test_ag_ui_maps_it_to_a_custom_event() -> None:
    (event,) = AguiRun(thread_id="t", run_id="r").events(DENIED)
    assert isinstance(event, CustomEvent) and event.name == "mainspring.permission_denied"
    assert event.value["toolName"] == "wipe" and event.value["source"] == "deny_list"
