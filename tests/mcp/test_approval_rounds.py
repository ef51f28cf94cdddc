"""The 2026-07-28 approval round trip's bookkeeping: only a minted, unused state approves."""

from __future__ import annotations

import anyio
import mcp_types as mt
from hypothesis import given
from hypothesis import strategies as st

from mainspring.decisions import Approve, Reject
from mainspring.events import PendingAction
from mainspring.mcp._approval_rounds import APPROVAL_KEY, ApprovalRounds, retry_decider

YES = {APPROVAL_KEY: mt.ElicitResult(action="accept", content={"approve": True})}


def pending(name: str = "wipe", value: str = "a") -> PendingAction:
    return PendingAction(
        attempt_id="a1",
        approval_id="a1",
        tool_use_id="t1",
        turn_index=0,
        name=name,
        input={"target": value},
        description="wipe a target",
        reason="needs approval",
    )


def mint(rounds: ApprovalRounds, action: PendingAction) -> str:
    state = rounds.input_required(action, "ok?", {"type": "object"}).request_state
    assert state is not None
    return state


def test_a_minted_state_approves_once_and_only_its_tool_and_input() -> None:
    async def main() -> None:
        rounds = ApprovalRounds(ttl=60)
        state = mint(rounds, pending())
        assert (await rounds.decision("other", state, YES))[1:] == (
            None,
            "the request state is for another tool",
        )
        wanted, approved, _ = await rounds.decision("wipe", state, YES)
        assert approved == {"approve": True}
        decide = retry_decider(wanted, approved, "", lambda p: {"properties": {"approve": {}}})
        assert isinstance(await decide(pending()), Approve)
        assert isinstance(await decide(pending(value="b")), Reject)
        assert (await rounds.decision("wipe", state, YES))[1:] == (
            None,
            "this approval was already used",
        )
        no = {APPROVAL_KEY: mt.ElicitResult(action="accept", content={"approve": False})}
        assert not (await rounds.decision("wipe", mint(rounds, pending()), no))[1]
        assert not (await rounds.decision("wipe", mint(rounds, pending()), None))[1]

    anyio.run(main)


@given(st.text(max_size=200))
def test_no_other_state_approves(state: str) -> None:
    async def main() -> None:
        rounds = ApprovalRounds(ttl=60)
        assert not (await rounds.decision("wipe", state, YES))[1] or '"nonce"' in state

    anyio.run(main)


def test_rounds_sharing_a_store_use_an_approval_once() -> None:
    from mainspring.stores.records import InMemoryRecords

    async def main() -> None:
        shared = InMemoryRecords()
        one = ApprovalRounds(ttl=60, records=shared)
        two = ApprovalRounds(ttl=60, records=shared)
        state = mint(one, pending())
        assert (await two.decision("wipe", state, YES))[1]
        assert (await one.decision("wipe", state, YES))[1:] == (
            None,
            "this approval was already used",
        )

    anyio.run(main)
