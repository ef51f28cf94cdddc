"""What a decision (or a regeneration) must satisfy before a session applies it.

Checked when ``Session.resume`` / ``Session.regenerate`` is called and again
when its stream starts (after the run lock, on the freshest state): a known
pending attempt, not decided yet (unless this is the decision claimed before
a crash), the input hash it names is the pending input's, the decision fits
the action, and edits touch only modifiable fields and stay valid. Then the
approval's own conditions (:func:`check_approver`): the pending action has
not expired (or, for ``Expire``, has), the policy version is the one in
force, and the approving principal may add this approval (named where the
rule needs one, not the requester where self-approval is off, not twice).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

from mainspring._lowlevel.json_value import JsonValue
from mainspring.agent import Agent
from mainspring.approvals import approval_key
from mainspring.decisions import (
    Approve,
    ClientResult,
    Decision,
    Expire,
    Reject,
    canonical_input_hash,
    decision_record,
    recorded_kind,
)
from mainspring.errors import (
    ApprovalError,
    ApprovalExpired,
    ApproverRefused,
    ConfigError,
    DecisionConflict,
    FieldNotModifiable,
    InputChanged,
    InvalidEdits,
    PolicyChanged,
    ToolInputError,
    UnknownAttempt,
)
from mainspring.events import PendingAction
from mainspring.state import SessionState

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["check_approver", "check_regenerable", "validate_decision"]


def check_regenerable(agent: Agent, state: SessionState, attempt_id: str) -> None:
    """Raise unless the paused call ``attempt_id`` can regenerate its input.

    Raises:
        DecisionConflict: It was already decided.
        UnknownAttempt: No pending action has this id.
        ApprovalError: Its tool has no ``regenerate`` hook.
        ApprovalExpired: It expired (a fresh input does not revive it).
    """
    recorded = state.decided.get(attempt_id)
    if recorded is not None:
        raise DecisionConflict(
            f"attempt {attempt_id} was already decided ({recorded_kind(recorded)}); "
            "it cannot be regenerated",
            attempt_id=attempt_id,
        )
    pending = state.pending
    if pending is None or pending.attempt_id != attempt_id:
        raise UnknownAttempt(
            f"no pending action with attempt id {attempt_id!r}", attempt_id=attempt_id
        )
    tool = agent.tool(pending.name)
    if not pending.can_regenerate or tool is None or tool.policy.regenerate is None:
        raise ApprovalError(
            f"{pending.name!r} cannot regenerate its input: approve or reject it",
            attempt_id=attempt_id,
        )
    _check_expiry(agent, pending, attempt_id)


def validate_decision(
    agent: Agent,
    state: SessionState,
    attempt_id: str,
    decision: Decision,
    *,
    reclaimable: bool = False,
) -> dict[str, JsonValue] | None:
    """The input an approval runs with (``None`` for other decisions); raise if it cannot apply.

    With ``reclaimable``, another decision claimed for the pending attempt but
    not consumed is no conflict (yet): the run that takes the session's lock
    finds out whether its claimer is gone (see ``Session.resume``).

    Raises:
        DecisionConflict, UnknownAttempt, InputChanged, FieldNotModifiable,
        ToolInputError, ApprovalError, ConfigError: see ``Session.resume``.
    """
    recorded = state.decided.get(attempt_id)
    pending = state.pending
    claimed_unconsumed = (
        recorded is not None
        and pending is not None
        and pending.attempt_id == attempt_id
        and recorded == decision_record(decision)
    )
    unconsumed = pending is not None and pending.attempt_id == attempt_id
    if recorded is not None and not claimed_unconsumed and not (reclaimable and unconsumed):
        raise DecisionConflict(
            f"attempt {attempt_id} was already decided ({recorded_kind(recorded)}); "
            "a decision is never applied twice",
            attempt_id=attempt_id,
        )
    if pending is None or pending.attempt_id != attempt_id:
        raise UnknownAttempt(
            f"no pending action with attempt id {attempt_id!r}", attempt_id=attempt_id
        )
    if not isinstance(decision, Approve | Reject | ClientResult | Expire):
        raise ConfigError(
            f"a decision is Approve, Reject, ClientResult or Expire, not {decision!r}"
        )
    check_approver(agent, state, pending, decision, again=claimed_unconsumed)
    if isinstance(decision, Expire):
        return None
    _check_hash(pending, decision, attempt_id)
    if isinstance(decision, ClientResult) and not pending.client_executed:
        raise ApprovalError(
            f"{pending.name!r} runs on the server: approve or reject it", attempt_id=attempt_id
        )
    if isinstance(decision, Approve):
        if pending.client_executed:
            raise ApprovalError(
                f"{pending.name!r} is executed by the client: send its ClientResult (or Reject it)",
                attempt_id=attempt_id,
            )
        return _edited_input(agent, pending, decision, attempt_id)
    return None


def check_approver(
    agent: Agent,
    state: SessionState,
    pending: PendingAction,
    decision: Decision,
    *,
    again: bool = False,
) -> None:
    """Raise unless ``decision`` may be applied to ``pending`` now, by its principal.

    ``again``: this very decision was claimed before (a crash came between
    its claim and its use), so its own approval on record is no repeat.

    Raises:
        ApprovalExpired: ``pending`` expired (any decision but ``Expire``).
        ApprovalError: ``Expire`` for an action that has not expired, or an
            approval of a quorum with edits.
        PolicyChanged: The policy version in force is not the one ``pending``
            was asked for under, or not the one the decision names.
        ApproverRefused: No principal where the rule needs one, the requester
            where self-approval is off, or a principal approving twice.
    """
    attempt_id = pending.attempt_id
    if isinstance(decision, Expire):
        expires_at = pending.expires_at
        if expires_at is None or _now(agent) < expires_at:
            when = "never expires" if expires_at is None else f"expires at {_stamp(expires_at)}"
            raise ApprovalError(
                f"{pending.name!r} has not expired ({when}): approve or reject it",
                attempt_id=attempt_id,
            )
        return
    _check_expiry(agent, pending, attempt_id)
    current = agent.permissions.version
    if pending.policy_version != current:
        raise PolicyChanged(
            f"{pending.name!r} was asked for under policy version "
            f"{pending.policy_version!r}; {current!r} is in force now: ask the model again",
            attempt_id=attempt_id,
            expected=current,
            given=pending.policy_version,
        )
    named = None if isinstance(decision, ClientResult) else decision.policy_version
    if named is not None and named != current:
        raise PolicyChanged(
            f"the decision was made under policy version {named!r}; {current!r} is in "
            "force now: show the pending action again",
            attempt_id=attempt_id,
            expected=current,
            given=named,
        )
    if not isinstance(decision, Approve):
        return
    principal = decision.principal
    if (pending.quorum > 1 or not pending.allow_self_approval) and not principal:
        raise ApproverRefused(
            f"{pending.name!r} needs the approving principal "
            f"(quorum {pending.quorum}, self-approval "
            f"{'allowed' if pending.allow_self_approval else 'forbidden'}): "
            "send Approve(principal=...)",
            attempt_id=attempt_id,
            principal=principal,
        )
    if not pending.allow_self_approval and principal == pending.requested_by:
        raise ApproverRefused(
            f"{principal!r} asked for {pending.name!r} and may not approve it: "
            "another principal must",
            attempt_id=attempt_id,
            principal=principal,
        )
    if pending.quorum > 1:
        if decision.edits:
            raise ApprovalError(
                f"{pending.name!r} needs {pending.quorum} approvals of one input: "
                "an approval of a quorum cannot edit it",
                attempt_id=attempt_id,
            )
        if not again and approval_key(attempt_id, principal) in state.decided:
            raise ApproverRefused(
                f"{principal!r} approved {pending.name!r} already; a quorum counts "
                "distinct principals",
                attempt_id=attempt_id,
                principal=principal,
            )


def _now(agent: Agent) -> float:
    return agent.permissions.approvals.clock()


def _stamp(when: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(when, UTC).isoformat(timespec="seconds")


def _check_expiry(agent: Agent, pending: PendingAction, attempt_id: str) -> None:
    expires_at = pending.expires_at
    if expires_at is not None and _now(agent) >= expires_at:
        raise ApprovalExpired(
            f"{pending.name!r} expired at {_stamp(expires_at)}; nothing ran. Settle it with "
            "Expire() (the model is told) and ask again",
            attempt_id=attempt_id,
            expires_at=expires_at,
        )


def _check_hash(pending: PendingAction, decision: Decision, attempt_id: str) -> None:
    given = None if isinstance(decision, Reject | Expire) else decision.input_hash
    if given is None:
        return
    expected = pending.input_hash or canonical_input_hash(pending.input)
    if given != expected:
        raise InputChanged(
            f"the decision was made for another input of {pending.name!r} than the "
            f"pending one (hash {given[:12]}…, pending {expected[:12]}…): it changed "
            "(regenerated?) after it was shown; show the pending action again",
            attempt_id=attempt_id,
            expected=expected,
            given=given,
        )


def _edited_input(
    agent: Agent, pending: PendingAction, decision: Approve, attempt_id: str
) -> dict[str, JsonValue]:
    bad = tuple(sorted(set(decision.edits) - set(pending.modifiable_fields)))
    if bad:
        raise FieldNotModifiable(
            f"fields {list(bad)} of {pending.name!r} are not modifiable "
            f"(modifiable: {list(pending.modifiable_fields)})",
            attempt_id=attempt_id,
            fields=bad,
        )
    _check_finite(pending.name, decision.edits, attempt_id)
    if not decision.edits or pending.nested is not None:
        return pending.input  # a nested action's edits go to the nested run
    tool = agent.tool(pending.name)
    if tool is None:
        raise ApprovalError(f"tool {pending.name!r} is no longer available", attempt_id=attempt_id)
    edited = {**pending.input, **decision.edits}
    fields = tuple(sorted(decision.edits))
    if tool.input_model is not None:
        _check_strict(tool.input_model, pending.name, edited, fields, attempt_id)
    try:
        return tool.validate(edited)
    except ToolInputError as exc:
        field = exc.field.split(".", 1)[0]
        raise InvalidEdits(
            f"the edits of {pending.name!r} are not valid: {exc}",
            attempt_id=attempt_id,
            tool=pending.name,
            fields=(field,) if field in decision.edits else fields,
        ) from None


def _check_finite(name: str, edits: dict[str, JsonValue], attempt_id: str) -> None:
    """Refuse ``NaN`` and ``±Infinity`` anywhere in the edits: JSON has no such number."""
    for field, value in edits.items():
        stack: list[object] = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, float) and not math.isfinite(item):
                raise InvalidEdits(
                    f"the edit of {field!r} of {name!r} holds {item!r}, which is not a number "
                    "JSON can carry: send a finite number",
                    attempt_id=attempt_id,
                    tool=name,
                    fields=(field,),
                )
            if isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)


def _check_strict(
    model: type[BaseModel],
    name: str,
    edited: dict[str, JsonValue],
    fields: tuple[str, ...],
    attempt_id: str,
) -> None:
    """Refuse an edit that only lenient coercion makes valid (``"35"`` or ``true`` for a number).

    The edited input is validated as JSON in pydantic's strict mode (strings
    stay strings, booleans booleans; an integer is still a number); an error
    in a field that was not edited is left to the ordinary validation.
    """
    from pydantic import ValidationError

    try:
        text = json.dumps(edited, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidEdits(
            f"the edits of {name!r} are not JSON values: {exc}",
            attempt_id=attempt_id,
            tool=name,
            fields=fields,
        ) from None
    try:
        model.__pydantic_validator__.validate_json(text, strict=True)
    except ValidationError as exc:
        for error in exc.errors():
            loc = error.get("loc") or ("",)
            if str(loc[0]) in fields:
                raise InvalidEdits(
                    f"the edit of {str(loc[0])!r} of {name!r} is not valid: "
                    f"{error.get('msg', 'invalid')} (edits are typed strictly: no strings "
                    "or booleans for numbers, no numbers for strings)",
                    attempt_id=attempt_id,
                    tool=name,
                    fields=(str(loc[0]),),
                ) from None
