"""A2A 1.0 against a real server, with the ``a2a-sdk`` client.

A uvicorn server on loopback serves the demo wallet agent; the SDK's own
client resolves the card, authenticates from the card's bearer scheme,
streams tasks and decides the pending payment as the task's next message.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import (
    A2ACardResolver,
    AuthInterceptor,
    Client,
    ClientCallContext,
    ClientCallInterceptor,
    ClientConfig,
    ClientFactory,
    CredentialService,
)
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import (
    A2AError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import JsonValue

from mainspring.decisions import recorded_kind
from mainspring.demo import demo_agent
from mainspring.server import ServerConfig, create_app
from tests.server.agents import Gate, gated_agent
from tests.server.servers import serving
from tests.strategies import json_values
from tests.strategies import texts as any_text

ALICE = "alice-key-a2a-000000001"
BOB = "bob-key-a2a-00000000002"
FUZZ = "fuzz-key-a2a-0000000003"  # a principal of its own, so its rate is its own

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK's client and request handler are asyncio code


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    app = create_app(
        demo_agent(balance_usd=1_000_000),
        ServerConfig(api_keys={ALICE: "alice", BOB: "bob", FUZZ: "fuzz"}),
    )
    with serving(app) as url:
        yield url


class Key(CredentialService):
    """Hands the SDK's auth interceptor one key for the card's bearer scheme."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.asked: list[str] = []

    async def get_credentials(self, security_scheme_name: str, context: Any) -> str | None:
        self.asked.append(security_scheme_name)
        return self.key


@asynccontextmanager
async def a2a(base: str, key: str | None, *, streaming: bool = True) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=30) as http:
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming))
        interceptors: list[ClientCallInterceptor] = [AuthInterceptor(Key(key))] if key else []
        yield await factory.create_from_url(base, interceptors=interceptors)


def user(*parts: Part, task_id: str = "", context_id: str = "") -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        message_id=f"m-{id(parts)}-{len(parts)}",
        parts=list(parts),
        task_id=task_id,
        context_id=context_id,
    )
    return SendMessageRequest(message=message)


async def events(client: Client, request: SendMessageRequest) -> list[dict[str, Any]]:
    return [MessageToDict(event) async for event in client.send_message(request)]


def last_status(stream: list[dict[str, Any]]) -> dict[str, Any]:
    statuses = [e["statusUpdate"]["status"] for e in stream if "statusUpdate" in e]
    if not statuses:  # a non-streaming reply: the task itself
        return dict(stream[-1]["task"]["status"])
    return dict(statuses[-1])


def data_parts(status: dict[str, Any]) -> list[dict[str, Any]]:
    return [p["data"] for p in status.get("message", {}).get("parts", []) if "data" in p]


def texts(status: dict[str, Any]) -> str:
    return " ".join(p["text"] for p in status.get("message", {}).get("parts", []) if "text" in p)


def step_texts(stream: list[dict[str, Any]]) -> list[str]:
    """The ``response`` artifact's last chunk: the text of each model step, in order."""
    updates = [e["artifactUpdate"] for e in stream if "artifactUpdate" in e]
    chunks = [u["artifact"]["parts"] for u in updates if not u.get("lastChunk")]
    assert all(len(parts) == 1 for parts in chunks)  # one delta a chunk
    (last,) = [u for u in updates if u.get("lastChunk")]
    assert not last.get("append")  # the whole replaces the chunks
    steps = [p["text"] for p in last["artifact"]["parts"]]
    assert "".join(steps) == "".join(parts[0]["text"] for parts in chunks)  # nothing lost
    return steps


def response_text(stream: list[dict[str, Any]]) -> str:
    return "".join(step_texts(stream))


def tool_events(stream: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for e in stream:
        if "statusUpdate" in e:
            found.extend(d for d in data_parts(e["statusUpdate"]["status"]) if d["type"] == kind)
    return found


async def paused_payment(client: Client) -> tuple[str, str, dict[str, Any], str]:
    """Stream "pay Alice $120" to its pause: (task id, context id, pending data, session id)."""
    stream = await events(client, user(new_text_part("Please pay Alice $120 for the tickets")))
    task = stream[0]["task"]
    status = last_status(stream)
    assert status["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert response_text(stream).endswith("Sending $120.00.")  # whole before the pause
    (pending,) = data_parts(status)
    return task["id"], task["contextId"], pending, task["metadata"]["mainspring"]["session_id"]


def kinds(state: dict[str, Any]) -> list[str]:
    return [recorded_kind(record) for record in state["decided"].values()]


async def session_state(base: str, key: str, session_id: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.get(
            f"{base}/v1/sessions/{session_id}/state", headers={"Authorization": f"Bearer {key}"}
        )


# ---------------------------------------------------------------- the card


async def test_the_card_names_the_tools_and_the_bearer_credential(base: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
    assert card.name == "wallet"
    assert [s.id for s in card.skills] == ["get_balance", "lookup_contact", "send_payment"]
    assert {s.id: list(s.tags) for s in card.skills}["send_payment"] == ["tool", "write"]
    (interface,) = card.supported_interfaces
    assert interface.url == f"{base}/a2a"
    assert interface.protocol_binding == "JSONRPC"
    assert interface.protocol_version == "1.0"
    assert card.capabilities.streaming
    scheme = card.security_schemes["bearer"]
    assert scheme.http_auth_security_scheme.scheme == "bearer"
    assert [list(r.schemes) for r in card.security_requirements] == [["bearer"]]
    assert "careful wallet assistant" not in card.description  # the instructions stay private


async def test_the_card_says_no_word_the_a2a_test_kit_reads_as_a_secret(base: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        card = (await http.get(f"{base}/.well-known/agent-card.json")).json()
    scheme = card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]
    assert scheme["description"].startswith("Authorization: Bearer <")
    # The kit's pattern, over the whole card (the tools' own descriptions included).
    leaks = re.findall(r"(?i)(api[_-]?key|secret|token|password|credential)", str(card))
    assert leaks == []


async def test_the_card_is_also_under_the_endpoint_for_a_client_given_its_url(base: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        at_root = (await http.get(f"{base}/.well-known/agent-card.json")).json()
        under = await http.get(f"{base}/a2a/.well-known/agent-card.json")  # no credential
        assert under.status_code == 200
        assert under.json() == at_root
        (interface,) = under.json()["supportedInterfaces"]
        assert interface["url"] == f"{base}/a2a"  # the URL the client was given
        card = await A2ACardResolver(http, f"{base}/a2a").get_agent_card()
    assert card.supported_interfaces[0].url == f"{base}/a2a"
    async with a2a(f"{base}/a2a", ALICE) as client:  # a client built from that URL works
        stream = await events(client, user(new_text_part("What is my balance?")))
    assert last_status(stream)["state"] == "TASK_STATE_COMPLETED"


async def test_each_model_step_is_its_own_text_in_the_response(base: str) -> None:
    async with a2a(base, ALICE) as client:
        stream = await events(client, user(new_text_part("Please pay Alice $3")))
        assert last_status(stream)["state"] == "TASK_STATE_COMPLETED"  # under the limit
        steps = step_texts(stream)
        assert steps[0] == "Let me check your balance and look up Alice."
        assert steps[1] == " Sending $3.00."
        assert steps[2].startswith("Done: $3.00 is on its way.")
        assert len(steps) == 3  # never "…Sending $3.00.Done: …"
        task = await client.get_task(GetTaskRequest(id=stream[0]["task"]["id"]))
    (artifact,) = task.artifacts  # the stored task keeps the same parts
    assert [p.text for p in artifact.parts] == steps


# ------------------------------------------------------- pause and decide


async def test_a_payment_pauses_as_input_required_and_approval_completes_it_once(
    base: str,
) -> None:
    async with a2a(base, ALICE) as client:
        task_id, context_id, pending, session_id = await paused_payment(client)
        assert pending["type"] == "pending_action"
        assert pending["name"] == "send_payment"
        assert pending["input"]["to_account"] == "acct_alice_01"
        assert pending["input"]["amount_usd"] == 120
        assert "auto-approve limit" in pending["reason"]
        assert pending["modifiable_fields"] == ["amount_usd", "memo"]
        assert pending["approval_id"] != pending["attempt_id"]  # the signed token

        seen = await client.get_task(GetTaskRequest(id=task_id))
        assert seen.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

        decision = new_data_part({"approval_id": pending["approval_id"], "decision": "approve"})
        stream = await events(client, user(decision, task_id=task_id, context_id=context_id))
        assert last_status(stream)["state"] == "TASK_STATE_COMPLETED"
        (result,) = [r for r in tool_events(stream, "tool_result") if r["name"] == "send_payment"]
        assert json.loads(result["content"])["status"] == "sent"
        assert "Done: $120.00 is on its way" in response_text(stream)

        with pytest.raises(UnsupportedOperationError, match="terminal"):
            await events(client, user(decision, task_id=task_id, context_id=context_id))

        done = await client.get_task(GetTaskRequest(id=task_id))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert [a.name for a in done.artifacts] == ["response", "response"]
        assert [len(a.parts) for a in done.artifacts] == [2, 1]  # the text of each step
        assert done.artifacts[1].parts[0].text.startswith("Done: $120.00")

    state = (await session_state(base, ALICE, session_id)).json()
    assert [w["tool"] for w in state["writes"].values()] == ["send_payment"]  # ran once
    assert kinds(state) == ["approved"]


async def test_yes_approves_the_action_shown_and_edits_change_modifiable_fields(
    base: str,
) -> None:
    async with a2a(base, ALICE) as client:
        task_id, context_id, _pending, _ = await paused_payment(client)
        stream = await events(client, user(new_text_part("Yes!"), task_id=task_id))
        assert last_status(stream)["state"] == "TASK_STATE_COMPLETED", texts(last_status(stream))
        (result,) = [r for r in tool_events(stream, "tool_result") if r["name"] == "send_payment"]
        assert json.loads(result["content"])["amount_usd"] == 120

        task_id, context_id, pending, _ = await paused_payment(client)
        edited = new_data_part(
            {
                "approval_id": pending["approval_id"],
                "decision": "approve",
                "edits": {"amount_usd": 15},
            }
        )
        stream = await events(client, user(edited, task_id=task_id, context_id=context_id))
        (result,) = [r for r in tool_events(stream, "tool_result") if r["name"] == "send_payment"]
        note, _, output = result["content"].partition("]\n\n")  # what ran, then the output
        assert note.startswith("[the approver edited the arguments")
        assert json.loads(output)["amount_usd"] == 15


@pytest.mark.parametrize(
    "reply",
    [
        new_text_part("no"),
        new_data_part({"decision": "reject", "reason": "not today"}),
    ],
    ids=["text", "data"],
)
async def test_a_rejection_completes_the_task_without_paying(base: str, reply: Part) -> None:
    async with a2a(base, ALICE) as client:
        task_id, _context_id, _pending, session_id = await paused_payment(client)
        stream = await events(client, user(reply, task_id=task_id))
        assert last_status(stream)["state"] == "TASK_STATE_COMPLETED"
        assert "did not go through" in response_text(stream)
    state = (await session_state(base, ALICE, session_id)).json()
    assert state["writes"] == {}
    assert kinds(state) == ["rejected"]


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (new_text_part("maybe later"), "reply 'yes' or 'no'"),
        (
            new_data_part({"decision": "approve", "edits": {"to_account": "acct_x"}}),
            "not modifiable",
        ),
        (new_data_part({"decision": "approve", "approval_id": "forged.id.sig"}), "approval"),
        (new_data_part({"decision": "approve", "edits": [1, 2]}), '"edits" is an object'),
        (new_data_part({"decision": "pay-twice"}), '"decision" is'),
        (new_data_part({"decision": "reject", "reason": 7}), '"reason" is a string'),
        (new_data_part({"decision": "approve", "extra": 1}), "no fields ['extra']"),
    ],
    ids=["chatter", "unmodifiable", "forged", "edits", "kind", "reason", "unknown"],
)
async def test_a_reply_that_is_not_a_valid_decision_keeps_the_task_waiting(
    base: str, reply: Part, why: str
) -> None:
    async with a2a(base, ALICE) as client:
        task_id, _context_id, pending, session_id = await paused_payment(client)
        stream = await events(client, user(reply, task_id=task_id))
        status = last_status(stream)
        assert status["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert why in texts(status)
        (again,) = data_parts(status)
        assert again["attempt_id"] == pending["attempt_id"]
        state = (await session_state(base, ALICE, session_id)).json()
        assert state["writes"] == {} and state["decided"] == {}

        stream = await events(client, user(new_text_part("yes"), task_id=task_id))
        assert last_status(stream)["state"] == "TASK_STATE_COMPLETED"


async def test_send_message_returns_the_paused_task_and_cancel_rejects_the_action(
    base: str,
) -> None:
    async with a2a(base, ALICE, streaming=False) as client:
        (reply,) = await events(client, user(new_text_part("pay Alice $50")))
        task = reply["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        cancelled = await client.cancel_task(CancelTaskRequest(id=task["id"]))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task["id"]))

        session_id = task["metadata"]["mainspring"]["session_id"]
        state = (await session_state(base, ALICE, session_id)).json()
        assert state["writes"] == {} and kinds(state) == ["rejected"]

        # The context is free again: a small payment runs without a pause.
        (reply,) = await events(
            client, user(new_text_part("pay Bob $5"), context_id=task["contextId"])
        )
        assert reply["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert reply["task"]["metadata"]["mainspring"]["session_id"] == session_id


async def test_a_context_waiting_on_a_decision_refuses_a_new_task(base: str) -> None:
    async with a2a(base, ALICE) as client:
        task_id, context_id, _pending, _ = await paused_payment(client)
        stream = await events(client, user(new_text_part("pay Bob $3"), context_id=context_id))
        status = last_status(stream)
        assert status["state"] == "TASK_STATE_REJECTED"
        assert "waits for a decision on send_payment" in texts(status)
        waiting = await client.get_task(GetTaskRequest(id=task_id))
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


async def test_cancelling_a_running_task_stops_its_turn() -> None:
    gate = Gate()
    app = create_app(gated_agent(gate), ServerConfig(api_keys={ALICE: "alice"}))
    with serving(app) as url:
        async with a2a(url, ALICE) as client:
            seen: list[dict[str, Any]] = []

            async def stream() -> None:
                seen.extend(await events(client, user(new_text_part("talk"))))

            async with anyio.create_task_group() as tg:
                tg.start_soon(stream)
                while not gate.reached.is_set():  # noqa: ASYNC110 - a thread sets it
                    await anyio.sleep(0.01)
                async with a2a(url, ALICE) as other:
                    listed = await other.list_tasks(ListTasksRequest())
                    (task,) = listed.tasks
                    cancelled = await other.cancel_task(CancelTaskRequest(id=task.id))
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
            assert seen[0]["task"]["id"] == task.id  # the stream ended with the task
            after = await client.get_task(GetTaskRequest(id=task.id))
            assert after.status.state == TaskState.TASK_STATE_CANCELED

            gate.opened.set()  # the context takes a new task
            stream_two = await events(
                client, user(new_text_part("again"), context_id=task.context_id)
            )
            assert last_status(stream_two)["state"] == "TASK_STATE_COMPLETED"


async def test_a_second_client_subscribes_to_a_running_task() -> None:
    gate = Gate()
    app = create_app(gated_agent(gate), ServerConfig(api_keys={ALICE: "alice", BOB: "bob"}))
    with serving(app) as url:
        async with a2a(url, ALICE) as first, a2a(url, ALICE) as second, a2a(url, BOB) as bob:
            streamed: list[dict[str, Any]] = []
            followed: list[dict[str, Any]] = []

            async def stream() -> None:
                streamed.extend(await events(first, user(new_text_part("talk"))))

            async with anyio.create_task_group() as tg:
                tg.start_soon(stream)
                while not gate.reached.is_set():  # noqa: ASYNC110 - a thread sets it
                    await anyio.sleep(0.01)
                (task,) = (await second.list_tasks(ListTasksRequest())).tasks
                with pytest.raises(TaskNotFoundError):
                    async for _ in bob.subscribe(SubscribeToTaskRequest(id=task.id)):
                        pass

                attached = anyio.Event()

                async def follow() -> None:
                    async for event in second.subscribe(SubscribeToTaskRequest(id=task.id)):
                        followed.append(MessageToDict(event))
                        attached.set()  # it starts with the task as it stands

                tg.start_soon(follow)
                await attached.wait()
                assert followed[0]["task"]["status"]["state"] == "TASK_STATE_WORKING"
                gate.opened.set()
        assert last_status(streamed)["state"] == "TASK_STATE_COMPLETED"
        assert last_status(followed)["state"] == "TASK_STATE_COMPLETED"
        assert response_text(followed).endswith("w39")


async def test_a_task_must_start_with_text(base: str) -> None:
    async with a2a(base, ALICE) as client:
        stream = await events(client, user(new_data_part({"decision": "approve"})))
        status = last_status(stream)
        assert status["state"] == "TASK_STATE_REJECTED"
        assert "starts with a text message" in texts(status)


# ---------------------------------------------------------------- security


async def test_no_credential_is_401(base: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        for headers in ({}, {"Authorization": "Bearer not-a-key-we-know-000"}):
            response = await http.post(
                f"{base}/a2a",
                json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
                headers=headers,
            )
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == "Bearer"
    async with a2a(base, None) as client:
        with pytest.raises(Exception, match="401"):
            await events(client, user(new_text_part("pay Alice $120")))


async def test_a_public_server_offers_the_scheme_without_requiring_it() -> None:
    app = create_app(demo_agent(), ServerConfig(public=True))
    with serving(app) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
        assert list(card.security_schemes) == ["bearer"]
        assert list(card.security_requirements) == []
        async with a2a(url, None) as anonymous:
            stream = await events(anonymous, user(new_text_part("pay Bob $2")))
            assert last_status(stream)["state"] == "TASK_STATE_COMPLETED"


async def test_another_principals_task_does_not_exist_for_them(base: str) -> None:
    async with a2a(base, ALICE) as alice:
        task_id, context_id, pending, session_id = await paused_payment(alice)
    async with a2a(base, BOB) as bob:
        with pytest.raises(TaskNotFoundError):
            await bob.get_task(GetTaskRequest(id=task_id))
        with pytest.raises(TaskNotFoundError):
            await bob.cancel_task(CancelTaskRequest(id=task_id))
        decision = new_data_part({"approval_id": pending["approval_id"], "decision": "approve"})
        with pytest.raises(TaskNotFoundError):
            await events(bob, user(decision, task_id=task_id, context_id=context_id))
        # Bob naming Alice's context gets a session of his own.
        stream = await events(bob, user(new_text_part("hello"), context_id=context_id))
        assert stream[0]["task"]["metadata"]["mainspring"]["session_id"] != session_id
    assert (await session_state(base, BOB, session_id)).status_code == 404
    state = (await session_state(base, ALICE, session_id)).json()
    assert state["writes"] == {} and state["decided"] == {}  # Alice's action still waits


# ------------------------------------------------------------- bad input


def rpc(method: str, params: object, id: object = 1) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        (b"[]", -32600),
        (json.dumps([rpc("GetTask", {"id": "x"})]).encode(), -32600),
        (json.dumps({"id": 1, "method": "GetTask"}).encode(), -32600),
        (json.dumps({"jsonrpc": "1.0", "id": 1, "method": "GetTask"}).encode(), -32600),
        (json.dumps(rpc("NoSuchMethod", {})).encode(), -32601),
        (json.dumps(rpc("SendMessage", {"message": "hi"})).encode(), -32602),
        (json.dumps(rpc("SendMessage", {"message": {"role": 99}})).encode(), -32602),
        (json.dumps(rpc("GetTask", {"id": "no-such-task"})).encode(), -32001),
        (json.dumps(rpc("CancelTask", {"id": "no-such-task"})).encode(), -32001),
        (json.dumps(rpc("GetTask", {"id": "x", "historyLength": -5})).encode(), -32602),
    ],
    ids=[
        "not-json",
        "empty-batch",
        "batch",
        "no-version",
        "wrong-version",
        "method",
        "message-not-object",
        "bad-enum",
        "unknown-task",
        "cancel-unknown",
        "history",
    ],
)
async def test_bad_jsonrpc_gets_a_jsonrpc_error_never_a_500(
    base: str, body: bytes, code: int
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            f"{base}/a2a",
            content=body,
            headers={
                "Authorization": f"Bearer {ALICE}",
                "Content-Type": "application/json",
                "A2A-Version": "1.0",
            },
        )
    assert response.status_code == 200
    error = response.json()["error"]
    assert error["code"] == code, error
    assert error["message"]


METHODS = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "message/send",
    "tasks/get",
    "tasks/cancel",
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    method=st.one_of(st.sampled_from(METHODS), any_text),
    params=json_values,
    id=st.one_of(st.none(), st.integers(), any_text, st.booleans()),
    version=st.sampled_from(["1.0", "0.3", "", "9"]),
)
def test_hostile_jsonrpc_is_never_a_500(
    base: str, method: str, params: JsonValue, id: object, version: str
) -> None:
    headers = {"Authorization": f"Bearer {FUZZ}", "A2A-Version": version}
    body = {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
    with httpx.Client(timeout=30) as http:
        response = http.post(f"{base}/a2a", json=body, headers=headers)
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("application/json"):
        reply = response.json()
        assert "error" in reply or "result" in reply
        if "error" in reply:
            assert reply["error"]["code"] != -32603 or "version" in reply["error"]["message"]


async def test_an_oversized_body_is_413(base: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            f"{base}/a2a",
            json=rpc("SendMessage", {"message": {"parts": [{"text": "x" * 1_100_000}]}}),
            headers={"Authorization": f"Bearer {ALICE}"},
        )
    assert response.status_code == 413


async def test_the_v0_3_method_names_reach_the_same_tasks(base: str) -> None:
    async with a2a(base, ALICE) as client:
        task_id, _context_id, _pending, _ = await paused_payment(client)
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            f"{base}/a2a",
            json=rpc("tasks/get", {"id": task_id}),
            headers={"Authorization": f"Bearer {ALICE}"},
        )
        assert response.json()["result"]["status"]["state"] == "input-required"
        response = await http.post(
            f"{base}/a2a",
            json=rpc("tasks/get", {"id": task_id}),
            headers={"Authorization": f"Bearer {BOB}"},
        )
        assert response.json()["error"]["code"] == -32001


async def test_sdk_errors_are_a2a_errors(base: str) -> None:
    async with a2a(base, ALICE) as client:
        with pytest.raises(A2AError):
            await client.get_task(GetTaskRequest(id="nope"))
    assert ClientCallContext().state == {}
