"""The principal flows to the tools: two principals through a real server keep apart.

Alice and Bob (two API keys) talk to one agent whose tools keep data: memory,
notes, artifacts, shell sessions and a todo list. Every turn runs as the
request's principal (``ctx.caller``), so Bob's turns never recall, list, read
or stop what Alice's keep — and each per-principal limit (live runs, queued
steering) answers with a clear 429 and leaves what was going on untouched.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mainspring.agent import Agent
from mainspring.memory import InMemoryMemoryStore, MemoryItem
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.principals import Caller, data_scope
from mainspring.stores.artifacts import ArtifactStore
from mainspring.testing import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.toolkits import SandboxPolicy, Shell, shell_tools
from mainspring.toolkits.artifacts import artifact_result, artifact_tools
from mainspring.toolkits.data import InMemoryToolDataStore
from mainspring.toolkits.memory import memory_tools
from mainspring.toolkits.notes import notes_tools
from mainspring.toolkits.todo import todo_tools
from mainspring.tools import tool
from mainspring.tools.context import ToolContext
from mainspring.tools.define import ToolOutput
from tests.server.agents import Gate, gated_agent
from tests.server.conftest import ALICE, BOB, client_for, config, read_sse

pytestmark = pytest.mark.anyio


class SignalledMemory(InMemoryMemoryStore):
    """A memory store that says when a background ``remember`` has landed."""

    def __init__(self) -> None:
        super().__init__()
        self.saved = threading.Event()

    async def remember(self, text: str, **kwargs: Any) -> MemoryItem:
        item = await super().remember(text, **kwargs)
        self.saved.set()
        return item


def _plan_model() -> ScriptedModel:
    """Each user message is ``{"tool": name, "args": {...}}``: call it, then say its result."""

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        last = messages[-1]
        if last.role == "tool":
            return ScriptedResponse(text=f"result: {last.text}")
        plan = json.loads(last.text)
        return ScriptedResponse(tool_calls=[ScriptedCall(plan["tool"], plan.get("args", {}))])

    return ScriptedModel(script)


class Keeper:
    """The agent under test and the stores its tools keep data in."""

    def __init__(self, workspace: Path, name: str = "keeper") -> None:
        self.memory = SignalledMemory()
        self.data = InMemoryToolDataStore()
        self.artifacts = ArtifactStore.memory()
        self.shell = Shell(workspace, sandbox=SandboxPolicy.unsandboxed())
        self.seen: list[str] = []
        artifacts = self.artifacts
        seen = self.seen

        @tool(read_only=True)
        def whoami(ctx: ToolContext) -> str:
            """Who is calling."""
            seen.append(ctx.caller.key)
            return ctx.caller.key

        @tool
        async def report(text: str, ctx: ToolContext) -> ToolOutput:
            """Store a report as an artifact."""
            return await artifact_result(artifacts, ctx, text.encode(), summary="a report")

        self.agent = Agent(
            name=name,
            model=_plan_model(),
            tools=[
                whoami,
                report,
                *memory_tools(self.memory),
                *notes_tools(self.data),
                *artifact_tools(self.artifacts),
                *todo_tools(self.data),
                *shell_tools(self.shell, permission="auto"),
            ],
        )


async def _call(client: httpx.AsyncClient, sid: str, name: str, **args: Any) -> str:
    """One turn that calls tool ``name``: the tool result's content."""
    body = {"message": json.dumps({"tool": name, "args": args})}
    frames = await read_sse(client, "POST", f"/v1/sessions/{sid}/messages", json_body=body)
    (result,) = [f.data for f in frames if f.event == "tool_result"]
    content: str = result["content"]
    return content


async def _session(client: httpx.AsyncClient) -> str:
    response = await client.post("/v1/sessions")
    assert response.status_code == 201, response.text
    sid: str = response.json()["session_id"]
    return sid


@pytest.fixture
def keeper(tmp_path: Path) -> Keeper:
    return Keeper(tmp_path)


async def test_bob_never_reaches_alices_memories_notes_artifacts_or_todo(
    server_for: Any, keeper: Keeper
) -> None:
    base = server_for(keeper.agent, config())
    async with client_for(base, ALICE) as alice, client_for(base, BOB) as bob:
        a, b = await _session(alice), await _session(bob)
        assert await _call(alice, a, "whoami") == "user:alice"
        assert await _call(bob, b, "whoami") == "user:bob"

        assert await _call(alice, a, "remember", text="my bank PIN is 4921") == "will remember that"
        await anyio.to_thread.run_sync(keeper.memory.saved.wait, 30)
        assert "4921" in await _call(alice, a, "recall", query="bank PIN")
        assert await _call(bob, b, "recall", query="bank PIN") == "no memories match"
        assert "PIN" not in await _call(bob, b, "recall", query="PIN 4921 bank")

        saved = await _call(alice, a, "notes_add", text="the safe code is 77-12", title="safe")
        assert saved == "saved note 1"
        assert (await _call(bob, b, "notes_list")).startswith("0 notes")
        assert "no note 1" in await _call(bob, b, "notes_read", note_id=1)
        assert await _call(bob, b, "notes_search", query="safe") == "no notes contain 'safe'"
        assert "77-12" in await _call(alice, a, "notes_read", note_id=1)

        reference = await _call(alice, a, "report", text="Q3 salaries: ...")
        uri = reference.split("[artifact: ")[1].split(" ·")[0]
        assert await _call(bob, b, "artifact_list") == "no artifacts"
        assert "not one of yours" in await _call(bob, b, "artifact_read", uri=uri)
        assert uri in await _call(alice, a, "artifact_list")
        assert "Q3 salaries" in await _call(alice, a, "artifact_read", uri=uri)

        items = [{"id": "t1", "content": "wire the money"}]
        assert "wire the money" in await _call(alice, a, "todo_write", add=items)
        assert await _call(bob, b, "todo_read") == "the todo list is empty"

    # Where it all went: under Alice's own data scope with this agent.
    mine = data_scope(Caller("alice"), "keeper")
    assert [i.text for i in await keeper.memory.recall("PIN", scope=mine)] == [
        "my bank PIN is 4921"
    ]
    assert await keeper.memory.recall("PIN", scope="default") == []
    assert await keeper.data.count(f"notes/{mine}") == 1
    assert await keeper.data.count("notes:keeper") == 0


async def test_bob_cannot_list_read_write_or_stop_alices_shell_session(
    server_for: Any, keeper: Keeper
) -> None:
    base = server_for(keeper.agent, config())
    try:
        async with client_for(base, ALICE) as alice, client_for(base, BOB) as bob:
            a, a2, b = await _session(alice), await _session(alice), await _session(bob)
            started = await _call(alice, a, "shell_session", action="start", command="cat", wait=0)
            sid = started.split()[1].rstrip(":")
            assert sid.startswith("sh_") and "running" in started
            assert await _call(bob, b, "shell_session", action="list") == "no shell sessions"
            for action in ("poll", "log", "stop", "close_stdin"):
                refused = await _call(bob, b, "shell_session", action=action, session_id=sid)
                assert f"no shell session {sid!r}" in refused, (action, refused)
            refused = await _call(
                bob, b, "shell_session", action="write", session_id=sid, input="x\n"
            )
            assert f"no shell session {sid!r}" in refused
            # Alice's other conversation does not see it either: sessions are per conversation.
            assert await _call(alice, a2, "shell_session", action="list") == "no shell sessions"
            # Still Alice's, still running, and hers to use.
            assert sid in await _call(alice, a, "shell_session", action="list")
            wrote = await _call(
                alice, a, "shell_session", action="write", session_id=sid, input="hello\n"
            )
            assert wrote == f"session {sid}: wrote 6 bytes"
            stopped = await _call(alice, a, "shell_session", action="stop", session_id=sid)
            assert stopped.startswith(f"session {sid}:")
    finally:
        keeper.shell.close()


@pytest.mark.parametrize("names", [("team x", "team/x", "team_x")])
async def test_agents_with_similar_names_have_distinct_artifact_namespaces(
    server_for: Any, names: tuple[str, ...]
) -> None:
    """One store, three agents whose names the old mangling made one (``agent/team_x``)."""
    shared = ArtifactStore.memory()
    uris: dict[str, str] = {}
    for name in names:

        @tool
        async def report(text: str, ctx: ToolContext) -> ToolOutput:
            """Store a report as an artifact."""
            return await artifact_result(shared, ctx, text.encode(), summary="a report")

        agent = Agent(name=name, model=_plan_model(), tools=[report, *artifact_tools(shared)])
        base = server_for(agent, config())
        async with client_for(base, ALICE) as alice:
            sid = await _session(alice)
            reference = await _call(alice, sid, "report", text=f"written by {name}")
            uris[name] = reference.split("[artifact: ")[1].split(" ·")[0]
            for other, uri in uris.items():
                listed = await _call(alice, sid, "artifact_list")
                read = await _call(alice, sid, "artifact_read", uri=uri)
                if other == name:
                    assert uri in listed and f"written by {name}" in read
                else:
                    assert uri not in listed and "not one of yours" in read
    assert len({uri.rsplit("/", 1)[0] for uri in uris.values()}) == len(names)


# ------------------------------------------------------------------ limits


async def test_a_principal_past_its_live_runs_gets_429_and_its_runs_go_on(
    server_for: Any,
) -> None:
    gate = Gate()
    base = server_for(gated_agent(gate), config(max_runs_per_principal=1))
    async with client_for(base, ALICE) as alice, client_for(base, BOB) as bob:
        first, second = await _session(alice), await _session(alice)
        async with anyio.create_task_group() as tg:
            frames: list[Any] = []

            async def run_first() -> None:
                frames.extend(
                    await read_sse(
                        alice, "POST", f"/v1/sessions/{first}/messages", json_body={"message": "go"}
                    )
                )

            tg.start_soon(run_first)
            await anyio.to_thread.run_sync(gate.reached.wait, 30)
            refused = await alice.post(f"/v1/sessions/{second}/messages", json={"message": "go"})
            assert refused.status_code == 429, refused.text
            assert refused.json()["error"]["type"] == "TooManyRuns"
            assert "at most 1 per principal" in refused.json()["error"]["message"]
            state = (await alice.get(f"/v1/sessions/{second}/state")).json()
            assert state["messages"] == []  # the refused turn left nothing behind
            # Bob's limit is his own.
            other = await _session(bob)
            steer = await bob.post(f"/v1/sessions/{other}/steer", json={"message": "hm"})
            assert steer.status_code == 409  # not running: not a limit, the usual answer
            gate.opened.set()
        assert frames[-1].event == "turn_complete"
        assert frames[-1].data["stop_reason"] == "end_turn"
        done = await read_sse(
            alice, "POST", f"/v1/sessions/{second}/messages", json_body={"message": "go"}
        )
        assert done[-1].data["stop_reason"] == "end_turn"  # room again once the first ended


async def test_queued_steering_past_the_principals_limit_is_429_and_the_queue_is_kept(
    server_for: Any,
) -> None:
    gate = Gate()
    base = server_for(gated_agent(gate), config(max_steering_per_principal=2))
    async with client_for(base, ALICE) as alice:
        sid = await _session(alice)
        async with anyio.create_task_group() as tg:
            frames: list[Any] = []

            async def run() -> None:
                frames.extend(
                    await read_sse(
                        alice, "POST", f"/v1/sessions/{sid}/messages", json_body={"message": "go"}
                    )
                )

            tg.start_soon(run)
            await anyio.to_thread.run_sync(gate.reached.wait, 30)
            ids = []
            for text in ("one", "two"):
                r = await alice.post(
                    f"/v1/sessions/{sid}/steer", json={"message": text, "mode": "follow_up"}
                )
                assert r.status_code == 202, r.text
                ids.append(r.json()["steering_id"])
            refused = await alice.post(
                f"/v1/sessions/{sid}/steer", json={"message": "three", "mode": "follow_up"}
            )
            assert refused.status_code == 429, refused.text
            assert "at most 2 per principal" in refused.json()["error"]["message"]
            gate.opened.set()
        taken = [f.data["steering_id"] for f in frames if f.event == "steering_taken"]
        assert taken == ids  # the two queued before the refusal were kept and taken
    assert frames[-1].event == "turn_complete"


# ------------------------------------------------------------------ doors


def _whoami_plan() -> str:
    return json.dumps({"tool": "whoami"})


async def test_every_http_door_runs_the_tools_as_the_requests_principal(
    server_for: Any, keeper: Keeper
) -> None:
    from ag_ui.core import RunAgentInput

    from tests.server.test_a2a import Key, user
    from tests.server.uiservers import new_id

    base = server_for(keeper.agent, config())
    async with client_for(base, ALICE) as alice, client_for(base, BOB) as bob:
        chat = {
            "id": new_id(),
            "trigger": "submit-message",
            "messages": [
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": _whoami_plan()}]}
            ],
        }
        assert (await alice.post("/v1/aisdk/chat", json=chat)).status_code == 200
        run = RunAgentInput(
            thread_id=new_id(),
            run_id=new_id(),
            messages=[{"id": new_id(), "role": "user", "content": _whoami_plan()}],  # type: ignore[list-item]  # ag-ui's pydantic model validates the plain dict into a message
            state=None,
            tools=[],
            context=[],
            forwarded_props=None,
        ).model_dump(mode="json", by_alias=True)
        assert (await bob.post("/v1/agui", json=run)).status_code == 200
    assert keeper.seen == ["user:alice", "user:bob"]

    from a2a.client import AuthInterceptor, ClientConfig, ClientFactory
    from a2a.helpers.proto_helpers import new_text_part

    async with httpx.AsyncClient(timeout=30) as http:
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=True))
        client = await factory.create_from_url(base, interceptors=[AuthInterceptor(Key(BOB))])
        _ = [e async for e in client.send_message(user(new_text_part(_whoami_plan())))]
    assert keeper.seen == ["user:alice", "user:bob", "user:bob"]


async def test_the_signed_engine_route_runs_tools_as_the_calling_engine_and_bounds_its_scopes(
    server_for: Any,
) -> None:
    from mainspring.engine import Engine, ManagementPolicy
    from mainspring.engine.remote import RemoteEngine
    from mainspring.engine.signing import SigningKey, public_key_text
    from mainspring.errors import RemoteEngineError

    @tool(read_only=True)
    def whoami(ctx: ToolContext) -> str:
        """Who is calling."""
        return ctx.caller.key

    key = SigningKey.generate("engine-a")
    served = Engine("shop", policy=ManagementPolicy(visibility="public"), max_scopes_per_caller=2)
    served.add_tool(whoami, export=True)
    base = server_for(
        None, config(engine=served, engine_keys={key.key_id: public_key_text(key.public_key)})
    )
    remote = RemoteEngine("shop", f"{base}/v1/engine", key)
    assert (await remote.call_tool("whoami", {}))["content"] == "engine:engine-a"
    first = (await remote._request("POST", "/scopes", {}))["scope"]
    second = (await remote._request("POST", "/scopes", {}))["scope"]
    with pytest.raises(RemoteEngineError) as refused:
        await remote._request("POST", "/scopes", {})
    assert refused.value.status == 409
    assert "holds 2 open scopes" in str(refused.value)
    caller = Caller("engine-a", kind="engine")
    assert await served.scopes(caller) == tuple(sorted((first, second)))  # intact
    await remote._request("DELETE", f"/scopes/{first}")
    assert (await remote._request("POST", "/scopes", {}))["scope"] not in (first, second)


@pytest.mark.parametrize("field", ["max_runs_per_principal", "max_steering_per_principal"])
def test_a_negative_limit_is_a_config_error(field: str) -> None:
    from mainspring.errors import ConfigError

    with pytest.raises(ConfigError, match=field):
        config(**{field: -1})
    assert getattr(config(**{field: 0}), field) == 0  # 0: no limit


def test_an_engine_needs_room_for_one_scope() -> None:
    from mainspring.engine import Engine
    from mainspring.errors import ConfigError

    with pytest.raises(ConfigError, match="max_scopes_per_caller"):
        Engine("e", max_scopes_per_caller=0)
