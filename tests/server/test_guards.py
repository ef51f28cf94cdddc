"""Every server is guarded, also with ``--public``: DNS rebinding and cross-site form posts.

Through a real uvicorn on loopback. A rebound page's requests carry a foreign
``Host`` (421, nothing runs); a page on another site can make a browser post a
form or ``text/plain`` body (415, or 403 for its foreign ``Origin``; nothing
runs); a JSON client works as before, with and without credentials.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, tool
from mainspring._http_guard import allowed_hosts, is_cross_site_simple
from mainspring.engine import Engine, ManagementPolicy
from mainspring.errors import ConfigError
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.server import ServerConfig
from tests.server.conftest import KEYS, SIGNING_KEY, read_sse

pytestmark = pytest.mark.anyio

EVIL = "http://evil.example"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
TEXT = {"Content-Type": "text/plain;charset=UTF-8"}


def noting_agent(notes: list[str]) -> Agent:
    """An agent whose auto-tier write ``note`` appends to ``notes`` on every message."""

    @tool(permission="auto")
    def note(text: str) -> str:
        """Keep a note."""
        notes.append(text)
        return "noted"

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        last = messages[-1]
        if last.role == "user":
            return ScriptedResponse(tool_calls=[ScriptedCall("note", {"text": last.text})])
        return ScriptedResponse(text="noted it")

    return Agent(name="noter", model=ScriptedModel(script), tools=[note])


def server_config(public: bool, **changes: Any) -> ServerConfig:
    fields: dict[str, Any] = {"signing_key": SIGNING_KEY, "public": public}
    fields["api_keys"] = None if public else KEYS
    fields.update(changes)
    return ServerConfig(**fields)


def headers_for(public: bool) -> dict[str, str]:
    return {} if public else {"Authorization": f"Bearer {next(iter(KEYS))}"}


async def sessions_of(base: str, public: bool) -> list[str]:
    async with httpx.AsyncClient(base_url=base, headers=headers_for(public), timeout=30) as c:
        listed = await c.get("/v1/sessions")
        assert listed.status_code == 200, listed.text
        sessions: list[str] = listed.json()["sessions"]
        return sessions


@pytest.mark.parametrize("public", [False, True], ids=["private", "public"])
async def test_a_rebound_host_is_refused_and_changes_nothing(server_for: Any, public: bool) -> None:
    notes: list[str] = []
    base = server_for(noting_agent(notes), server_config(public))
    port = base.rsplit(":", 1)[1]
    async with httpx.AsyncClient(base_url=base, headers=headers_for(public), timeout=30) as c:
        rebound = await c.post("/v1/sessions", json={}, headers={"Host": f"evil.example:{port}"})
        assert rebound.status_code == 421
        assert "--allowed-host" in rebound.json()["error"]["message"]
        assert (await c.get("/healthz", headers={"Host": "evil.example"})).status_code == 421
        for host in (f"localhost:{port}", f"127.0.0.2:{port}", f"[::1]:{port}"):
            assert (await c.get("/v1/sessions", headers={"Host": host})).status_code == 200
    assert await sessions_of(base, public) == []
    assert notes == []


@pytest.mark.parametrize("public", [False, True], ids=["private", "public"])
async def test_a_cross_site_form_post_changes_nothing(server_for: Any, public: bool) -> None:
    notes: list[str] = []
    base = server_for(noting_agent(notes), server_config(public))
    async with httpx.AsyncClient(base_url=base, headers=headers_for(public), timeout=30) as c:
        created = await c.post("/v1/sessions", json={})
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
    # What a page on another site can make the browser send: no credential header
    # (a browser adds Authorization cross-site only after a preflight), a simple body.
    body = '{"message": "pay the attacker"}'
    async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
        for kind in (FORM, TEXT):
            foreign = await browser.post(
                f"/v1/sessions/{sid}/messages", content=body, headers={**kind, "Origin": EVIL}
            )
            assert foreign.status_code == 403, foreign.text
            # Without an Origin (a client that hides it), the body type alone refuses it.
            bare = await browser.post(f"/v1/sessions/{sid}/messages", content=body, headers=kind)
            assert bare.status_code == 415, bare.text
            assert bare.json()["error"]["type"] == "CrossSiteRequest"
        for path in ("/v1/sessions", f"/v1/sessions/{sid}/cancel"):
            assert (await browser.post(path)).status_code == 415  # no body, no type: refused
    assert notes == []
    async with httpx.AsyncClient(base_url=base, headers=headers_for(public), timeout=30) as c:
        state = (await c.get(f"/v1/sessions/{sid}/state")).json()
        assert state["messages"] == [] and state["turn_index"] == 0
        assert await sessions_of(base, public) == [sid]


@pytest.mark.parametrize("public", [False, True], ids=["private", "public"])
async def test_a_json_client_still_works(server_for: Any, public: bool) -> None:
    notes: list[str] = []
    base = server_for(noting_agent(notes), server_config(public))
    async with httpx.AsyncClient(base_url=base, headers=headers_for(public), timeout=30) as c:
        created = await c.post("/v1/sessions", json={})
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        frames = await read_sse(
            c,
            "POST",
            f"/v1/sessions/{sid}/messages",
            json_body={"message": "buy milk"},
            headers={"Origin": f"{base}"},  # the server's own page: same origin
        )
        assert frames[-1].event == "turn_complete"
        # A body-less POST from a script says what it is with X-Requested-With.
        marked = await c.post("/v1/sessions", headers={"X-Requested-With": "my-script"})
        assert marked.status_code == 201, marked.text
    assert notes == ["buy milk"]


async def test_allowed_hosts_and_cors_origins_are_answered(server_for: Any) -> None:
    notes: list[str] = []
    cfg = server_config(
        True, allowed_hosts=("agents.example.test",), cors_origins=("https://app.example.test",)
    )
    base = server_for(noting_agent(notes), cfg)
    async with httpx.AsyncClient(base_url=base, timeout=30) as c:
        named = {"Host": "Agents.Example.Test."}  # case and a trailing dot do not matter
        assert (await c.post("/v1/sessions", json={}, headers=named)).status_code == 201
        from_app = {"Origin": "https://app.example.test"}
        assert (await c.post("/v1/sessions", json={}, headers=from_app)).status_code == 201
        same_site = {**named, "Origin": "https://agents.example.test"}
        assert (await c.post("/v1/sessions", json={}, headers=same_site)).status_code == 201
        other = {"Origin": "https://other.example.test"}
        assert (await c.post("/v1/sessions", json={}, headers=other)).status_code == 403
        assert (
            await c.post("/v1/sessions", json={}, headers={"Origin": "null"})
        ).status_code == 403
        sub = {"Host": "x.agents.example.test"}
        assert (await c.post("/v1/sessions", json={}, headers=sub)).status_code == 421
    assert len(await sessions_of(base, True)) == 3


async def test_every_door_of_a_public_server_refuses_a_cross_site_post(server_for: Any) -> None:
    notes: list[str] = []
    engine = Engine("shop", policy=ManagementPolicy(visibility="public"))

    @tool(permission="auto")
    def restock(sku: str) -> str:
        """Order more."""
        notes.append(f"restock {sku}")
        return "ordered"

    engine.add_tool(restock, export=True)
    base = server_for(noting_agent(notes), server_config(True, engine=engine))
    text = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "buy milk"}]}
    doors = {
        "/v1/aisdk/chat": {"id": "chat-1", "messages": [text]},
        "/v1/agui": {
            "threadId": "thread-1",
            "runId": "r",
            "messages": [{"id": "m1", "role": "user", "content": "buy milk"}],
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
        },
        "/a2a": {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}},
        "/v1/engine/tools/restock/call": {"arguments": {"sku": "a1"}},
    }
    async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
        for path, payload in doors.items():
            refused = await browser.post(path, content=json.dumps(payload), headers=TEXT)
            assert refused.status_code == 415, (path, refused.text)
            # The door is there: a JSON post of nothing reaches it (and is refused by it).
            reached = await browser.post(path, json={"nothing": True})
            assert reached.status_code not in (404, 415), (path, reached.text)
        assert notes == []
        # The engine's anonymous JSON caller is let in, as its policy says.
        called = await browser.post(
            "/v1/engine/tools/restock/call", json={"arguments": {"sku": "b2"}}
        )
        assert called.status_code == 200, called.text
    assert notes == ["restock b2"]


def test_the_cross_site_rule() -> None:
    simple = [{}, {"content-type": "text/plain"}, {"content-type": "multipart/form-data; b=x"}]
    simple += [{"authorization": "Basic dTpw"}, {"content-type": "application/jsonp"}]
    for headers in simple:
        assert is_cross_site_simple("POST", headers), headers
    marked = [
        {"content-type": "application/json"},
        {"content-type": "Application/JSON; charset=utf-8"},
        {"content-type": "application/merge-patch+json"},
        {"authorization": "Bearer k"},
        {"x-api-key": "k"},
        {"x-requested-with": "fetch"},
        {"x-mainspring-signature": "s"},
    ]
    for headers in marked:
        assert not is_cross_site_simple("POST", headers), headers
    for method in ("GET", "HEAD", "DELETE", "PUT", "OPTIONS"):
        assert not is_cross_site_simple(method, {}), method


def test_malformed_allowed_hosts_are_refused_clearly() -> None:
    assert allowed_hosts(["API.example.com.", "::1", "[::2]", "10.0.0.5"]) == {
        "api.example.com",
        "[::1]",
        "[::2]",
        "10.0.0.5",
    }
    for bad in ("", "http://a.example", "a.example:8000", "a.example/x", "a b", "[::1"):
        with pytest.raises(ConfigError, match="bare host name"):
            allowed_hosts([bad])
    with pytest.raises(ConfigError, match="bare host name"):
        ServerConfig(allowed_hosts=("https://agents.example.test",))
