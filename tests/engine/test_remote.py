"""Two engines in two processes over loopback: signed remote calls, approvals across engines."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.decisions import Approve, Reject
from mainspring.engine import AgentRun, Caller, Engine, ManagementPolicy, ToolCallResult
from mainspring.engine.signing import SigningKey, public_key_text
from mainspring.errors import RemoteEngineError
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from tests.stores.servers import free_port, stop_process

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ALICE = Caller("alice")


@dataclass(frozen=True, slots=True)
class Remote:
    url: str
    key: SigningKey


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/b/info", timeout=1).status_code in (200, 401, 403)
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    key = SigningKey.generate("engine-a")
    log = tmp_path_factory.mktemp("engine-b") / "server.log"
    for _ in range(5):  # another process may take the free port first
        port = free_port()
        with log.open("ab") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.engine._engine_server", str(port), key.key_id,
                 public_key_text(key.public_key)],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while process.poll() is None and time.monotonic() < deadline and not _answers(url):
            time.sleep(0.05)
        if process.poll() is None and _answers(url):
            try:
                yield Remote(url, key)
            finally:
                stop_process(process)
            return
        stop_process(process)
    raise RuntimeError(f"the engine server did not start; its log:\n{log.read_text()}")


def local_engine() -> Engine:
    return Engine("a", policy=ManagementPolicy(controller=ALICE))


def signed(
    remote: Remote, method: str, route: str, body: bytes = b"", **sign: float
) -> dict[str, str]:
    return remote.key.sign(method, route, body, **sign)


async def test_a_remote_tool_call(remote: Remote) -> None:
    engine = local_engine()
    names = await engine.register_remote("b", remote.url + "/b", remote.key)
    assert set(names) == {"RT_b_lookup", "RT_b_order", "RA_b_clerk"}  # not the unexported one
    result = await engine.tool_call(ALICE, "RT_b_lookup", {"sku": "A1"})
    assert result.content == "A1: 3 in stock (asked by engine:engine-a)" and not result.is_error
    bad = await engine.tool_call(ALICE, "RT_b_lookup", {"sku": 3})
    assert bad.is_error and not bad.ran  # the remote's schema is checked here first


async def test_a_remote_confirm_tool_pauses_here_and_runs_there_once_approved(
    remote: Remote,
) -> None:
    engine = local_engine()
    await engine.register_remote("b", remote.url + "/b", remote.key)
    first = await engine.tool_call(ALICE, "RT_b_order", {"sku": "Z9", "qty": 1})
    assert first.pending is not None and first.pending.nested is not None
    assert first.pending.nested.name == "order" and first.pending.modifiable_fields == ("qty",)
    done = await engine.decide(ALICE, first.pending.attempt_id, Approve(edits={"qty": 2}))
    assert isinstance(done, ToolCallResult) and "ordered 2 of Z9" in done.content
    again = await engine.tool_call(ALICE, "RT_b_order", {"sku": "Z8", "qty": 1})
    assert again.pending is not None
    rejected = await engine.decide(ALICE, again.pending.attempt_id, Reject("no"))
    assert (
        isinstance(rejected, ToolCallResult) and rejected.is_error and "Z8" not in rejected.content
    )


async def test_a_remote_agent_run_with_an_approval_across_engines(remote: Remote) -> None:
    def host(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        last = messages[-1]
        if last.role == "tool":
            return ScriptedResponse(text=f"host: {last.tool_results_parts[0].content}")
        return ScriptedResponse(tool_calls=[ScriptedCall("RA_b_clerk", {"input": "order A1"})])

    engine = local_engine()
    await engine.register_remote("b", remote.url + "/b", remote.key)
    engine.add_agent(Agent(model=ScriptedModel(host), name="buyer"), uses=["RA_b_clerk"])
    run = await engine.agent_run(ALICE, "buy some A1")
    assert run.pending is not None and run.pending.name == "RA_b_clerk"
    nested = run.pending.nested
    assert nested is not None and nested.name == "order" and nested.input == {"sku": "A1", "qty": 4}
    done = await engine.decide(ALICE, run.pending.attempt_id, Approve())
    assert isinstance(done, AgentRun) and done.pending is None
    assert done.text.startswith("host: clerk: ordered 4 of A1")


async def test_each_tampering_is_refused(remote: Remote) -> None:
    route = "/b/tools/lookup/call"
    body = json.dumps({"arguments": {"sku": "A1"}}).encode()
    url = remote.url + route
    stranger = SigningKey.generate("engine-x")
    cases = {
        "bad_signature (body)": (signed(remote, "POST", route, body), body.replace(b"A1", b"B2")),
        "bad_signature (path)": (signed(remote, "POST", "/b/tools/order/call", body), body),
        "bad_signature (method)": (signed(remote, "PUT", route, body), body),
        "unknown_key": (stranger.sign("POST", route, body), body),
        "stale": (signed(remote, "POST", route, body, now=time.time() - 3600), body),
        "malformed": ({**signed(remote, "POST", route, body), "x-mainspring-nonce": "short"}, body),
    }
    async with httpx.AsyncClient() as client:
        for case, (headers, content) in cases.items():
            response = await client.post(url, content=content, headers=headers)
            assert response.status_code == 401, case
            assert response.json()["reason"] == case.split(" ")[0], case
        headers = signed(remote, "POST", route, body)
        first = await client.post(url, content=body, headers=headers)
        replay = await client.post(url, content=body, headers=headers)
        assert first.status_code == 200 and "engine:engine-a" in first.json()["content"]
        assert replay.status_code == 401 and replay.json()["reason"] == "replayed"
        denied = await client.post(
            remote.url + "/b/tools/secret/call",
            content=b"{}",
            headers=signed(remote, "POST", "/b/tools/secret/call", b"{}"),
        )
        assert denied.status_code == 403 and "exports no tool 'secret'" in denied.json()["message"]


async def test_a_private_engine_refuses_an_anonymous_caller(remote: Remote) -> None:
    async with httpx.AsyncClient() as client:
        anonymous = await client.get(remote.url + "/private/info")
        assert anonymous.status_code == 403 and "private" in anonymous.json()["message"]
        signed_in = await client.get(
            remote.url + "/private/info", headers=signed(remote, "GET", "/private/info")
        )
        assert signed_in.status_code == 403  # a known engine, but not a manager
        protected = await client.post(remote.url + "/b/tools/lookup/call", json={})
        assert protected.status_code == 403 and "anonymous" in protected.json()["message"]
    with pytest.raises(RemoteEngineError, match="403"):
        await local_engine().register_remote("v", remote.url + "/private", remote.key)


async def test_bad_bodies_get_clear_errors(remote: Remote) -> None:
    route = "/b/tools/lookup/call"
    async with httpx.AsyncClient() as client:
        for body in (b"[1]", b"{not json", b'{"arguments": 3}'):
            response = await client.post(
                remote.url + route, content=body, headers=signed(remote, "POST", route, body)
            )
            assert response.status_code == 400, body
        huge = b'{"arguments": {"sku": "' + b"x" * (1 << 20) + b'"}}'
        response = await client.post(
            remote.url + route, content=huge, headers=signed(remote, "POST", route, huge)
        )
        assert response.status_code == 413
        route = "/b/decisions/nothing"
        body = b'{"decision": {"kind": "maybe"}}'
        response = await client.post(
            remote.url + route, content=body, headers=signed(remote, "POST", route, body)
        )
        assert response.status_code == 400 and "kind" in response.json()["message"]
        body = b'{"decision": {"kind": "approved"}}'
        response = await client.post(
            remote.url + route, content=body, headers=signed(remote, "POST", route, body)
        )
        assert response.status_code == 404


async def test_a_remote_caller_closes_its_scope(remote: Remote) -> None:
    async with httpx.AsyncClient() as client:
        made = await client.post(
            remote.url + "/b/scopes", headers=signed(remote, "POST", "/b/scopes")
        )
        assert made.status_code == 200
        route = f"/b/scopes/{made.json()['scope']}"
        anonymous = await client.delete(remote.url + route)
        assert anonymous.status_code == 403  # not the anonymous caller's scope
        closed = await client.delete(remote.url + route, headers=signed(remote, "DELETE", route))
        assert closed.status_code == 200 and closed.json() == {"closed": made.json()["scope"]}
        again = await client.delete(remote.url + route, headers=signed(remote, "DELETE", route))
        assert again.status_code == 403 and "not one of this caller's" in again.json()["message"]
