"""The REST/SSE API against a real uvicorn, with httpx and httpx-sse as the client."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from mainspring.decisions import canonical_input_hash
from mainspring.server import ApprovalSigner, ServerConfig
from mainspring.sse import parse_sse
from mainspring.testing import check_events
from tests.server.agents import Gate, gated_agent, paying_agent, quoting_agent, steerable_agent
from tests.server.conftest import ALICE, BOB, SIGNING_KEY, Frame, client_for, config, read_sse

pytestmark = pytest.mark.anyio


async def _session(client: httpx.AsyncClient) -> str:
    response = await client.post("/v1/sessions", json={})
    assert response.status_code == 201, response.text
    sid: str = response.json()["session_id"]
    return sid


async def _paused(client: httpx.AsyncClient, sid: str) -> tuple[list[Frame], dict[str, Any]]:
    frames = await read_sse(
        client, "POST", f"/v1/sessions/{sid}/messages", json_body={"message": "Pay Alice $20"}
    )
    pending = [f for f in frames if f.event == "pending_action"]
    assert len(pending) == 1
    return frames, pending[0].data


def _events(frames: list[Frame]) -> list[Any]:
    text = "".join(f"event: {f.event}\ndata: {json.dumps(f.data)}\n\n" for f in frames)
    return list(parse_sse(text))


async def test_a_turn_streams_as_sse_with_ids_in_mainspring_wire_format(base: str) -> None:
    async with client_for(base) as client:
        sid = await _session(client)
        frames = await read_sse(
            client, "POST", f"/v1/sessions/{sid}/messages", json_body={"message": "Pay Alice $20"}
        )
    check_events(_events(frames))  # the grammar of every stream, after the wire round trip
    stream_id = frames[0].data["stream_id"]
    assert [f.id for f in frames] == [f"{stream_id}:{i}" for i in range(len(frames))]
    assert frames[-1].event == "turn_complete"
    assert frames[-1].data["stop_reason"] == "pending_action"


async def test_an_approval_runs_the_write_once_and_a_replayed_decision_is_refused(
    server_for: Any,
) -> None:
    ledger: list[float] = []
    base = server_for(paying_agent(ledger))
    async with client_for(base) as client:
        sid = await _session(client)
        _, pending = await _paused(client, sid)
        approval = pending["approval_id"]
        assert approval != pending["attempt_id"]  # signed, not the bare attempt id
        url = f"/v1/sessions/{sid}/decisions/{approval}"
        frames = await read_sse(client, "POST", url, json_body={"decision": "approve"})
        assert [f.data["content"] for f in frames if f.event == "tool_result"] == ["paid bo 5.0"]
        again = await client.post(url, json={"decision": "approve"})
        assert again.status_code == 409
        assert again.json()["error"]["type"] == "DecisionConflict"
        state = (await client.get(f"/v1/sessions/{sid}/state")).json()
    assert ledger == [5.0]
    assert state["pending"] is None and len(state["writes"]) == 1


async def test_an_edit_of_a_modifiable_field_runs_with_the_edited_value(server_for: Any) -> None:
    ledger: list[float] = []
    base = server_for(paying_agent(ledger))
    async with client_for(base) as client:
        sid = await _session(client)
        _, pending = await _paused(client, sid)
        assert pending["modifiable_fields"] == ["amount"]
        url = f"/v1/sessions/{sid}/decisions/{pending['approval_id']}"
        body = {"decision": "approve", "edits": {"to": "eve"}}
        refused = await client.post(url, json=body)
        assert refused.status_code == 422
        assert refused.json()["error"]["type"] == "FieldNotModifiable"
        bad_value = await client.post(url, json={"decision": "approve", "edits": {"amount": "x"}})
        assert bad_value.status_code == 422
        assert ledger == []  # nothing ran on refused decisions
        frames = await read_sse(
            client, "POST", url, json_body={"decision": "approve", "edits": {"amount": 2.5}}
        )
    assert ledger == [2.5]
    assert frames[-1].event == "turn_complete"


async def test_a_rejection_reaches_the_model_and_nothing_runs(server_for: Any) -> None:
    ledger: list[float] = []
    base = server_for(paying_agent(ledger))
    async with client_for(base) as client:
        sid = await _session(client)
        _, pending = await _paused(client, sid)
        url = f"/v1/sessions/{sid}/decisions/{pending['approval_id']}"
        frames = await read_sse(
            client, "POST", url, json_body={"decision": "reject", "reason": "not today"}
        )
    results = [f.data for f in frames if f.event == "tool_result"]
    assert results and results[0]["is_error"] and "not today" in results[0]["content"]
    assert ledger == []


async def test_approval_ids_are_bound_to_session_attempt_and_arguments(server_for: Any) -> None:
    ledger: list[float] = []
    base = server_for(paying_agent(ledger))
    async with client_for(base) as client:
        sid = await _session(client)
        other = await _session(client)
        _, pending = await _paused(client, sid)
        approval: str = pending["approval_id"]
        approve = {"decision": "approve"}
        # Tampered signature, and a bare attempt id: not ours.
        tampered = approval[:-2] + ("AA" if not approval.endswith("AA") else "BB")
        for bad in (tampered, pending["attempt_id"], "x" * 300):
            r = await client.post(f"/v1/sessions/{sid}/decisions/{bad}", json=approve)
            assert r.status_code in (403, 404), (bad, r.text)
        # The right id for another session of the same principal.
        r = await client.post(f"/v1/sessions/{other}/decisions/{approval}", json=approve)
        assert r.status_code == 403
        # Signed by this server, but for arguments other than the ones pending.
        signer = ApprovalSigner(SIGNING_KEY)
        attempt = pending["attempt_id"]
        changed = canonical_input_hash({**pending["input"], "amount": 500.0})
        mac = signer._mac(sid, attempt, changed, "alice", "")
        r = await client.post(
            f"/v1/sessions/{sid}/decisions/{attempt}.{changed}.{mac}", json=approve
        )
        assert r.status_code == 409
        assert r.json()["error"]["type"] == "StaleApproval"
        # A server with another key refuses this one's ids.
    assert ledger == []


async def test_a_decision_signed_by_another_key_is_refused(server_for: Any) -> None:
    ledger: list[float] = []
    base = server_for(paying_agent(ledger))
    async with client_for(base) as client:
        sid = await _session(client)
        _, pending = await _paused(client, sid)
        forged = ApprovalSigner(b"z" * 32).sign(sid, _pending_action(pending))
        r = await client.post(
            f"/v1/sessions/{sid}/decisions/{forged}", json={"decision": "approve"}
        )
    assert r.status_code == 403
    assert ledger == []


def _pending_action(data: dict[str, Any]) -> Any:
    from mainspring.codec import event_from_dict

    return event_from_dict(data)


async def test_private_by_default_no_credential_is_401_and_others_sessions_are_404(
    base: str,
) -> None:
    async with client_for(base, key=None) as anonymous:
        for method, url in (("POST", "/v1/sessions"), ("GET", "/v1/sessions")):
            r = await anonymous.request(method, url, json={} if method == "POST" else None)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    async with client_for(base, key="not-a-key-we-know-at-all") as stranger:
        assert (await stranger.get("/v1/sessions")).status_code == 401
    async with client_for(base, ALICE) as alice, client_for(base, BOB) as bob:
        sid = await _session(alice)
        _, pending = await _paused(alice, sid)
        for method, url in (
            ("GET", f"/v1/sessions/{sid}"),
            ("GET", f"/v1/sessions/{sid}/state"),
            ("GET", f"/v1/sessions/{sid}/pending"),
            ("GET", f"/v1/sessions/{sid}/stream"),
            ("DELETE", f"/v1/sessions/{sid}"),
            ("POST", f"/v1/sessions/{sid}/cancel"),
        ):
            r = await bob.request(method, url)
            assert r.status_code == 404, (method, url, r.text)
        r = await bob.post(f"/v1/sessions/{sid}/messages", json={"message": "hi"})
        assert r.status_code == 404
        stream = (await alice.get(f"/v1/sessions/{sid}")).json()["last_stream"]
        r = await bob.post(
            f"/v1/sessions/{sid}/messages", json={}, headers={"Last-Event-ID": f"{stream}:0"}
        )
        assert r.status_code == 404
        r = await bob.post(
            f"/v1/sessions/{sid}/decisions/{pending['approval_id']}", json={"decision": "approve"}
        )
        assert r.status_code == 404
        assert (await bob.get("/v1/sessions")).json() == {"sessions": []}
        assert (await alice.get("/v1/sessions")).json() == {"sessions": [sid]}
        # Still Alice's, untouched.
        assert (await alice.get(f"/v1/sessions/{sid}/pending")).json()["pending"] is not None


async def test_a_public_server_lets_anonymous_callers_in_but_not_bad_credentials(
    server_for: Any,
) -> None:
    base = server_for(None, ServerConfig(public=True))
    async with client_for(base, key=None) as anonymous:
        sid = await _session(anonymous)
        assert (await anonymous.get(f"/v1/sessions/{sid}")).status_code == 200
    async with client_for(base, key="a-key-nobody-configured-00") as wrong:
        assert (await wrong.get("/v1/sessions")).status_code == 401


async def test_a_reconnect_with_last_event_id_gets_the_rest_exactly_once(base: str) -> None:
    async with client_for(base) as client:
        sid = await _session(client)
        first = await read_sse(
            client,
            "POST",
            f"/v1/sessions/{sid}/messages",
            json_body={"message": "Pay Alice $20"},
            stop_after=7,
        )
        rest = await read_sse(
            client,
            "POST",
            f"/v1/sessions/{sid}/messages",
            json_body={},
            headers={"Last-Event-ID": first[-1].id},
        )
        stream_id = first[0].data["stream_id"]
        whole = await read_sse(
            client, "GET", f"/v1/sessions/{sid}/stream?stream_id={stream_id}&after=-1"
        )
        by_get = await read_sse(
            client,
            "GET",
            f"/v1/sessions/{sid}/stream",
            headers={"Last-Event-ID": first[3].id},
        )
    assert [f.id for f in first + rest] == [f.id for f in whole]
    assert [f.data for f in first + rest] == [f.data for f in whole]
    assert [f.id for f in by_get] == [f.id for f in whole[4:]]
    check_events(_events(whole))


async def test_a_run_goes_on_when_its_client_hangs_up(server_for: Any) -> None:
    gate = Gate()
    base = server_for(gated_agent(gate))
    async with client_for(base) as client:
        sid = await _session(client)
        first = await read_sse(
            client,
            "POST",
            f"/v1/sessions/{sid}/messages",
            json_body={"message": "go"},
            stop_after=1,
        )
        assert first[0].event == "stream_started"
        gate.opened.set()
        rest = await read_sse(
            client, "GET", f"/v1/sessions/{sid}/stream", headers={"Last-Event-ID": first[0].id}
        )
    text = "".join(f.data["text"] for f in rest if f.event == "text_delta")
    assert text == " ".join(f"w{i}" for i in range(40))
    assert rest[-1].event == "turn_complete" and rest[-1].data["stop_reason"] == "end_turn"


async def test_a_busy_session_is_409_and_cancel_ends_the_stream_with_a_terminal(
    server_for: Any,
) -> None:
    gate = Gate()
    base = server_for(gated_agent(gate))
    async with client_for(base) as client:
        sid = await _session(client)
        first = await read_sse(
            client,
            "POST",
            f"/v1/sessions/{sid}/messages",
            json_body={"message": "go"},
            stop_after=1,
        )
        assert gate.reached.wait(10)
        busy = await client.post(f"/v1/sessions/{sid}/messages", json={"message": "again"})
        assert busy.status_code == 409 and busy.json()["error"]["type"] == "SessionBusy"
        assert (await client.delete(f"/v1/sessions/{sid}")).status_code == 409
        cancelled = await client.post(f"/v1/sessions/{sid}/cancel")
        assert cancelled.json() == {"cancelled": True}
        rest = await read_sse(
            client, "GET", f"/v1/sessions/{sid}/stream", headers={"Last-Event-ID": first[0].id}
        )
        gate.opened.set()
        assert rest[-1].event == "turn_complete" and rest[-1].data["stop_reason"] == "cancelled"
        # The session is usable again.
        again = await read_sse(
            client, "POST", f"/v1/sessions/{sid}/messages", json_body={"message": "again"}
        )
        assert again[-1].data["stop_reason"] == "end_turn"
        assert (await client.delete(f"/v1/sessions/{sid}")).status_code == 204
        assert (await client.get(f"/v1/sessions/{sid}")).status_code == 404


async def test_bad_input_is_a_clear_4xx_never_a_500(base: str) -> None:
    async with client_for(base) as client:
        sid = await _session(client)
        cases: list[tuple[str, str, Any, dict[str, str]]] = [
            ("POST", f"/v1/sessions/{sid}/messages", {}, {}),
            ("POST", f"/v1/sessions/{sid}/messages", {"message": ""}, {}),
            ("POST", f"/v1/sessions/{sid}/messages", {"message": 5}, {}),
            ("POST", f"/v1/sessions/{sid}/messages", {"message": "x", "extra": 1}, {}),
            ("POST", f"/v1/sessions/{sid}/messages", "not an object", {}),
            ("POST", f"/v1/sessions/{sid}/messages", {}, {"Last-Event-ID": "garbage"}),
            ("POST", f"/v1/sessions/{sid}/messages", {}, {"Last-Event-ID": "nope:3"}),
            ("POST", f"/v1/sessions/{sid}/messages", {"resume_stream_id": "nope"}, {}),
            ("POST", "/v1/sessions/unknown/messages", {"message": "hi"}, {}),
            ("POST", f"/v1/sessions/{sid}/decisions/abc", {"decision": "approve"}, {}),
            ("POST", f"/v1/sessions/{sid}/decisions/abc", {"decision": "maybe"}, {}),
            ("POST", f"/v1/sessions/{sid}/decisions/abc", {}, {}),
            ("GET", f"/v1/sessions/{sid}/stream", None, {}),
            ("GET", f"/v1/sessions/{sid}/stream?after=-5", None, {}),
            ("GET", "/v1/sessions?limit=0", None, {}),
            ("GET", "/v1/nowhere", None, {}),
            ("PUT", "/v1/sessions", None, {}),
        ]
        for method, url, body, headers in cases:
            kwargs: dict[str, Any] = {"headers": headers}
            if isinstance(body, str):
                kwargs["content"] = body
                headers = {**headers, "content-type": "application/json"}
                kwargs["headers"] = headers
            elif body is not None:
                kwargs["json"] = body
            r = await client.request(method, url, **kwargs)
            assert 400 <= r.status_code < 500, (method, url, body, r.status_code, r.text)
            assert "error" in r.json() and r.json()["error"]["message"], r.text
        # The session is intact after all of that.
        frames = await read_sse(
            client, "POST", f"/v1/sessions/{sid}/messages", json_body={"message": "Pay Alice $5"}
        )
        assert frames[-1].event == "turn_complete"


async def test_an_oversized_body_is_413_declared_or_streamed(server_for: Any) -> None:
    base = server_for(None, config(max_body_bytes=2_000))
    async with client_for(base) as client:
        sid = await _session(client)
        big = {"message": "x" * 5_000}
        r = await client.post(f"/v1/sessions/{sid}/messages", json=big)
        assert r.status_code == 413 and r.json()["error"]["type"] == "BodyTooLarge"

        async def chunks() -> Any:
            yield b'{"message": "'
            for _ in range(10):
                yield b"y" * 500
            yield b'"}'

        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            content=chunks(),
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 413
        state = (await client.get(f"/v1/sessions/{sid}/state")).json()
    assert state["messages"] == []  # nothing of the refused bodies got in


async def test_a_principal_over_its_rate_gets_429_with_retry_after(server_for: Any) -> None:
    base = server_for(None, config(rate_per_minute=6, rate_burst=3))
    async with client_for(base, ALICE) as alice, client_for(base, BOB) as bob:
        codes = [(await alice.get("/v1/sessions")).status_code for _ in range(5)]
        assert codes[:3] == [200, 200, 200] and codes[3:] == [429, 429]
        limited = await alice.get("/v1/sessions")
        assert int(limited.headers["retry-after"]) >= 1
        assert (await bob.get("/v1/sessions")).status_code == 200  # per principal


async def test_openapi_health_and_readiness(base: str) -> None:
    async with client_for(base, key=None) as client:
        doc = (await client.get("/openapi.json")).json()
        assert "/v1/sessions/{session_id}/decisions/{approval_id}" in doc["paths"]
        assert "ApproveBody" in doc["components"]["schemas"]
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        ready = await client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"


async def test_a_cancel_posted_to_another_worker_reaches_the_run(tmp_path: Any) -> None:
    from mainspring.server import create_app
    from tests.server.servers import serving

    gate = Gate()
    store = f"sqlite:///{tmp_path}/shared.db"
    app_a = create_app(gated_agent(gate), config(store=store))
    app_b = create_app(gated_agent(gate), config(store=store))
    with serving(app_a) as a, serving(app_b) as b:
        async with client_for(a) as on_a, client_for(b) as on_b:
            sid = await _session(on_a)
            first = await read_sse(
                on_a,
                "POST",
                f"/v1/sessions/{sid}/messages",
                json_body={"message": "go"},
                stop_after=1,
            )
            assert gate.reached.wait(10)
            assert (await on_b.post(f"/v1/sessions/{sid}/cancel")).json() == {"cancelled": True}
            rest = await read_sse(
                on_a, "GET", f"/v1/sessions/{sid}/stream", headers={"Last-Event-ID": first[0].id}
            )
            gate.opened.set()
            assert rest[-1].data["stop_reason"] == "cancelled"
            idle = await on_b.post(f"/v1/sessions/{sid}/cancel")
            assert idle.json() == {"cancelled": False}


async def test_a_regenerated_quote_gets_a_new_approval_id_and_the_old_one_is_refused(
    server_for: Any,
) -> None:
    swaps: list[dict[str, object]] = []
    base = server_for(quoting_agent(swaps))
    async with client_for(base) as client:
        sid = await _session(client)
        _, first = await _paused(client, sid)
        assert first["can_regenerate"] is True
        frames = await read_sse(
            client, "POST", f"/v1/sessions/{sid}/regenerate/{first['approval_id']}"
        )
        fresh = next(f.data for f in frames if f.event == "pending_action")
        assert fresh["input"]["quote_id"] == "q1" and fresh["attempt_id"] == first["attempt_id"]
        assert fresh["approval_id"] != first["approval_id"]
        stale = await client.post(
            f"/v1/sessions/{sid}/decisions/{first['approval_id']}", json={"decision": "approve"}
        )
        assert stale.status_code == 409 and stale.json()["error"]["type"] == "StaleApproval"
        assert swaps == []
        await read_sse(
            client,
            "POST",
            f"/v1/sessions/{sid}/decisions/{fresh['approval_id']}",
            json_body={"decision": "approve"},
        )
    assert swaps == [{"amount": 10.0, "quote_id": "q1"}]  # the quote that was shown


async def test_a_message_steers_the_running_turn(server_for: Any) -> None:
    gate, seen = Gate(), list[str]()
    base = server_for(steerable_agent(gate, seen))
    async with client_for(base) as client:
        sid = await _session(client)
        assert (
            await client.post(f"/v1/sessions/{sid}/steer", json={"message": "early"})
        ).status_code == 409  # no turn runs yet
        first = await read_sse(
            client,
            "POST",
            f"/v1/sessions/{sid}/messages",
            json_body={"message": "go"},
            stop_after=1,
        )
        assert gate.reached.wait(10)
        steered = await client.post(
            f"/v1/sessions/{sid}/steer", json={"message": "also this", "mode": "follow_up"}
        )
        assert steered.status_code == 202 and steered.json()["steering_id"]
        bad = await client.post(f"/v1/sessions/{sid}/steer", json={"message": "x", "mode": "now"})
        assert bad.status_code == 422
        gate.opened.set()
        rest = await read_sse(
            client, "GET", f"/v1/sessions/{sid}/stream", headers={"Last-Event-ID": first[0].id}
        )
    kinds = [f.event for f in rest]
    assert "steering_taken" in kinds and kinds[-1] == "turn_complete"
    text = "".join(f.data["text"] for f in rest if f.event == "text_delta")
    assert "noted: also this" in text
    assert seen == ["go", "also this"]
