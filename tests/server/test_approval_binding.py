"""Approval ids bound to the approver and the policy version; expiry through the REST door."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from mainspring import ApprovalPolicy, PendingAction, PermissionRules
from mainspring.server import ApprovalSigner, BadApproval
from tests.server.agents import paying_agent
from tests.server.conftest import SIGNING_KEY, client_for, config, read_sse

pytestmark = pytest.mark.anyio

PENDING = PendingAction(
    attempt_id="att-1",
    tool_use_id="tu-1",
    turn_index=0,
    name="pay",
    input={"to": "bo", "amount": 5.0},
    description="Pay someone.",
)


def test_aisvs_9_2_3_an_approval_id_is_bound_to_its_principal_and_policy_version() -> None:
    signer = ApprovalSigner(SIGNING_KEY)
    token = signer.sign("s-1", PENDING, principal="alice", policy="2026-12")
    signed = signer.verify("s-1", token, principal="alice", policy="2026-12")
    assert (signed.attempt_id, signed.input_hash) == ("att-1", token.split(".")[1])
    # Replayed by another principal, or after the policy changed: refused.
    with pytest.raises(BadApproval, match="principal or policy version"):
        signer.verify("s-1", token, principal="bob", policy="2026-12")
    with pytest.raises(BadApproval):
        signer.verify("s-1", token, principal="alice", policy="2027-01")
    with pytest.raises(BadApproval):
        signer.verify("s-1", token)  # unbound: neither


def versioned(ledger: list[float], version: str) -> Any:
    agent = paying_agent(ledger)
    rules = PermissionRules(approvals=ApprovalPolicy(), version=version)
    return dataclasses.replace(agent, permissions=rules)


async def _paused(client: Any) -> tuple[str, dict[str, Any]]:
    response = await client.post("/v1/sessions", json={})
    sid: str = response.json()["session_id"]
    frames = await read_sse(
        client, "POST", f"/v1/sessions/{sid}/messages", json_body={"message": "pay"}
    )
    (pending,) = [f.data for f in frames if f.event == "pending_action"]
    return sid, pending


async def test_a_rest_decision_records_the_authenticated_principal_and_the_policy(
    server_for: Any,
) -> None:
    ledger: list[float] = []
    base = server_for(versioned(ledger, "v3"))
    async with client_for(base) as client:
        sid, pending = await _paused(client)
        assert pending["policy_version"] == "v3" and pending["requested_by"] == "alice"
        assert pending["expires_at"] > 0
        url = f"/v1/sessions/{sid}/decisions/{pending['approval_id']}"
        await read_sse(client, "POST", url, json_body={"decision": "approve"})
        state = (await client.get(f"/v1/sessions/{sid}/state")).json()
    record = json.loads(state["decided"][pending["attempt_id"]])
    assert (record["principal"], record["policy_version"]) == ("alice", "v3")
    assert ledger == [5.0]


async def test_an_approval_id_handed_out_under_another_policy_version_is_refused(
    server_for: Any, tmp_path: Path
) -> None:
    """A deploy changed the policy between showing the action and deciding it."""
    store = f"sqlite:///{tmp_path / 'shared.db'}"
    ledger: list[float] = []
    before = server_for(versioned(ledger, "v1"), config(store=store))
    after = server_for(versioned(ledger, "v2"), config(store=store))
    async with client_for(before) as client:
        sid, pending = await _paused(client)
    async with client_for(after) as client:
        url = f"/v1/sessions/{sid}/decisions/{pending['approval_id']}"
        response = await client.post(url, json={"decision": "approve"})
        assert response.status_code == 403, response.text
        assert response.json()["error"]["type"] == "BadApproval"
        # Even with an id this server signs now, the action asked under v1 is refused.
        fresh = (await client.get(f"/v1/sessions/{sid}/pending")).json()["pending"]
        response = await client.post(
            f"/v1/sessions/{sid}/decisions/{fresh['approval_id']}", json={"decision": "approve"}
        )
        assert response.status_code == 422, response.text
        assert response.json()["error"]["type"] == "PolicyChanged"
    assert ledger == []


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_aisvs_14_2_2_an_expired_approval_fails_closed_through_rest(
    server_for: Any,
) -> None:
    ledger: list[float] = []
    clock = Clock()
    agent = paying_agent(ledger)
    rules = PermissionRules(approvals=ApprovalPolicy(clock=clock))
    base = server_for(dataclasses.replace(agent, permissions=rules))
    async with client_for(base) as client:
        sid, pending = await _paused(client)
        assert pending["expires_at"] == clock.now + 3600
        clock.now = pending["expires_at"]
        url = f"/v1/sessions/{sid}/decisions/{pending['approval_id']}"
        response = await client.post(url, json={"decision": "approve"})
        assert response.status_code == 422, response.text
        assert response.json()["error"]["type"] == "ApprovalExpired"
        assert ledger == []
        frames = await read_sse(client, "POST", url, json_body={"decision": "expire"})
        (result,) = [f.data for f in frames if f.event == "tool_result"]
        assert result["is_error"] and "expired" in result["content"]
        state = (await client.get(f"/v1/sessions/{sid}/state")).json()
    assert json.loads(state["decided"][pending["attempt_id"]])["kind"] == "expired"
    assert state["pending"] is None and ledger == []
