"""The claim of a decision: at most one decision per pending action, across workers.

``Session.resume`` validates a decision when called; once its run holds the
session (the lock taken, the state fresh), :func:`claim` claims the attempt in
the session store, so that a decision is never applied twice. A claim on
record that nobody consumed (its run died or was cancelled while it held the
lock) binds nobody: the run holding the lock next may drop it
(:func:`release_claim`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import anyio

from mainspring._run.decide import validate_decision
from mainspring.agent import Agent
from mainspring.approvals import approval_key, approvers
from mainspring.decisions import Approve, Decision
from mainspring.errors import ApproverRefused, DecisionConflict
from mainspring.events import ApprovalAdded, PendingAction
from mainspring.state import SessionState
from mainspring.stores.base import ClaimRelease, SessionStore

__all__ = ["Quorum", "claim", "release_claim"]


@dataclass(slots=True)
class Quorum:
    """What a claim found about a quorum: ``added`` when the action still waits."""

    added: ApprovalAdded | None = None
    """Set when the approval was recorded but the write does not run (yet, or here)."""


log = logging.getLogger("mainspring.session")


async def claim(
    state: SessionState,
    *,
    store: SessionStore | None,
    agent: Agent,
    attempt_id: str,
    decision: Decision,
    record: str,
    reclaimable: bool,
    quorum: Quorum | None = None,
) -> None:
    """Claim ``attempt_id`` for ``decision`` (its ``record``) and note it in ``state``.

    With ``reclaimable`` (a run lock and a store that can release claims), an
    unconsumed claim of another decision is dropped first. An approval of a
    quorum that does not complete it sets ``quorum.added`` and claims nothing
    more (see the module).

    Raises:
        DecisionConflict: Another worker decided the attempt already.
        ApproverRefused: This principal's approval is on record already.
        UnknownAttempt, ApprovalError, InputChanged: As ``Session.resume``, on
            the fresh state.
    """
    recorded = state.decided.get(attempt_id)
    if reclaimable and recorded is not None and recorded != record:
        await release_claim(state, store, attempt_id, recorded)
    validate_decision(agent, state, attempt_id, decision)
    if state.decided.get(attempt_id) == record:
        return  # claimed before a crash, never consumed: this is that decision
    pending = state.pending
    if isinstance(decision, Approve) and pending is not None and pending.quorum > 1:
        names = await _add_approval(state, store, pending, decision.principal, record)
        if len(names) < pending.quorum:
            if quorum is not None:
                quorum.added = _added(pending, decision.principal, names)
            return
        if quorum is not None:  # (if another worker completes it first, say only this)
            quorum.added = _added(pending, decision.principal, names)
    # The claim and its note here are one step a cancellation cannot split:
    # a claim on record that this object does not know would wedge it.
    with anyio.CancelScope(shield=True):
        claimed = store is None or await store.claim_decision(state.session_id, attempt_id, record)
        if claimed:
            state.note_decision(attempt_id, record)
    if claimed and quorum is not None:
        quorum.added = None  # this approval completed the quorum: the write runs here
    elif not claimed and quorum is not None and quorum.added is not None:
        return  # another approval completed the quorum at once; its worker runs the write
    if not claimed:
        raise DecisionConflict(
            f"attempt {attempt_id} was already decided by another worker; "
            "a decision is never applied twice",
            attempt_id=attempt_id,
        )


async def _add_approval(
    state: SessionState,
    store: SessionStore | None,
    pending: PendingAction,
    principal: str,
    record: str,
) -> tuple[str, ...]:
    """Record ``principal``'s approval of ``pending``; every approver on record then."""
    attempt_id = pending.attempt_id
    key = approval_key(attempt_id, principal)
    with anyio.CancelScope(shield=True):
        added = store is None or await store.claim_decision(state.session_id, key, record)
        if added:
            state.note_decision(key, record)
    if not added:
        raise ApproverRefused(
            f"{principal!r} approved {pending.name!r} already (on another worker); "
            "a quorum counts distinct principals",
            attempt_id=attempt_id,
            principal=principal,
        )
    if store is not None:  # the approvals every worker recorded, read after this one's
        fresh = await store.load(state.session_id)
        if fresh is not None:
            for name in approvers(fresh.decided, attempt_id):
                other = approval_key(attempt_id, name)
                state.note_decision(other, fresh.decided[other])
    return approvers(state.decided, attempt_id)


def _added(pending: PendingAction, principal: str, names: tuple[str, ...]) -> ApprovalAdded:
    return ApprovalAdded(
        attempt_id=pending.attempt_id, principal=principal, approvals=names, quorum=pending.quorum
    )


async def release_claim(
    state: SessionState, store: SessionStore | None, attempt_id: str, recorded: str
) -> None:
    """Drop an unconsumed claim of another decision for the pending attempt.

    Called by a run holding the session's lock on the freshest state, with
    the turn still paused on ``attempt_id``: the run that claimed it held
    the lock too and is gone (it died, or was cancelled) without consuming
    it, so the claim binds nobody. A claim already consumed is never
    dropped (the turn would no longer be paused on it).
    """
    pending = state.pending
    if pending is None or pending.attempt_id != attempt_id:
        return
    releases: object = store
    assert isinstance(releases, ClaimRelease)
    with anyio.CancelScope(shield=True):
        if await releases.release_claim(state.session_id, attempt_id, recorded):
            log.warning(
                "session %s: dropped the unconsumed claim of attempt %s (%s)",
                state.session_id,
                attempt_id,
                recorded[:200],
            )
        state.forget_decision(attempt_id)
