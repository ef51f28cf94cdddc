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

import anyio

from mainspring._run.decide import validate_decision
from mainspring.agent import Agent
from mainspring.decisions import Decision
from mainspring.errors import DecisionConflict
from mainspring.state import SessionState
from mainspring.stores.base import ClaimRelease, SessionStore

__all__ = ["claim", "release_claim"]

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
) -> None:
    """Claim ``attempt_id`` for ``decision`` (its ``record``) and note it in ``state``.

    With ``reclaimable`` (a run lock and a store that can release claims), an
    unconsumed claim of another decision is dropped first.

    Raises:
        DecisionConflict: Another worker decided the attempt already.
        UnknownAttempt, ApprovalError, InputChanged: As ``Session.resume``, on
            the fresh state.
    """
    recorded = state.decided.get(attempt_id)
    if reclaimable and recorded is not None and recorded != record:
        await release_claim(state, store, attempt_id, recorded)
    validate_decision(agent, state, attempt_id, decision)
    if state.decided.get(attempt_id) == record:
        return  # claimed before a crash, never consumed: this is that decision
    # The claim and its note here are one step a cancellation cannot split:
    # a claim on record that this object does not know would wedge it.
    with anyio.CancelScope(shield=True):
        claimed = store is None or await store.claim_decision(state.session_id, attempt_id, record)
        if claimed:
            state.note_decision(attempt_id, record)
    if not claimed:
        raise DecisionConflict(
            f"attempt {attempt_id} was already decided by another worker; "
            "a decision is never applied twice",
            attempt_id=attempt_id,
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
