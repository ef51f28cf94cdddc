"""Approval of a confirm-tier call in the stateless 2026-07-28 protocol: two round trips.

The 2026-07-28 revision has no back channel for a server to ask its client
mid-request. A call that needs approval therefore ends its first round with
an ``input_required`` result: one elicitation (the approval form of
``_approval_form``: approve yes/no and the editable fields) and a
``requestState`` naming the tool, the SHA-256 of its canonical input and a
fresh nonce. The SDK's :class:`~mcp.server.request_state.RequestStateBoundary`
seals that state (AES-256-GCM, bound to the request and principal, with a
TTL), so what comes back is what this server minted. The client's retry
carries the user's answer and the state; the call runs (through the one
dispatch path, judged again) only if:

- the state names this tool and this exact input (any edit is refused),
- its nonce has not been used before (a replayed state is refused: at most
  once), and
- the answer is an ``accept`` with ``approve: true`` (its changed editable
  fields become the approval's edits, judged again by the dispatch path).

A nonce is used by claiming it in a shared store (``SharedRecords``) for the
state's TTL: with a store every worker shares, a recorded retry replayed to
another worker is refused there too. Without one, this process's memory.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mainspring.decisions import Decision, Reject, canonical_input_hash
from mainspring.events import PendingAction
from mainspring.mcp._approval_form import decision_of
from mainspring.stores.base import SharedRecords
from mainspring.stores.records import InMemoryRecords

try:
    import mcp_types as types
except ImportError as exc:
    raise ImportError('the MCP server needs: pip install "mainspring[mcp]"') from exc

__all__ = ["APPROVAL_KEY", "NONCE_KIND", "ApprovalRounds", "NeedsApproval", "retry_decider"]

APPROVAL_KEY = "mainspring_approval"
"""The key of the approval elicitation in ``inputRequests`` / ``inputResponses``."""
NONCE_KIND = "mcp-approval"
"""The kind of the shared records that hold used approval nonces."""


class NeedsApproval(Exception):
    """Raised out of a first-round call that paused: answer with ``input_required``."""

    def __init__(self, pending: PendingAction) -> None:
        super().__init__(pending.name)
        self.pending = pending


class ApprovalRounds:
    """Mints first-round states and judges retries; remembers used nonces."""

    def __init__(self, *, ttl: float, records: SharedRecords | None = None) -> None:
        """States live ``ttl`` seconds.

        ``records`` is where used nonces are claimed (default: this process's memory).
        """
        self.ttl = ttl
        self.records: SharedRecords = records if records is not None else InMemoryRecords()

    def input_required(
        self, pending: PendingAction, message: str, schema: dict[str, Any]
    ) -> types.InputRequiredResult:
        """The first round's answer: ask with the form ``schema``, remember what is approved."""
        state = {
            "tool": pending.name,
            "input": canonical_input_hash(pending.input),
            "nonce": secrets.token_urlsafe(16),
        }
        ask = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
        )
        return types.InputRequiredResult(
            input_requests={APPROVAL_KEY: ask}, request_state=json.dumps(state)
        )

    async def decision(
        self,
        tool: str,
        request_state: str,
        responses: Mapping[str, types.InputResponse] | None,
    ) -> tuple[str, dict[str, Any] | None, str]:
        """``(input hash, the accepted form's content or None, why not)``; consumes the nonce.

        The nonce is claimed before the answer is read: a state is judged once,
        whatever it carries, on whichever worker it reaches first.

        Raises:
            StoreError: The store cannot be reached (nothing is approved).
        """
        try:
            state = json.loads(request_state)
            wanted, nonce = state["input"], state["nonce"]
            named = state["tool"]
        except (ValueError, KeyError, TypeError):
            return "", None, "the request state is not this server's"
        if named != tool or not isinstance(wanted, str) or not isinstance(nonce, str):
            return "", None, "the request state is for another tool"
        if not await self._consume(nonce):
            return wanted, None, "this approval was already used"
        answer = (responses or {}).get(APPROVAL_KEY)
        if not isinstance(answer, types.ElicitResult):
            return wanted, None, "no answer to the approval request"
        if answer.action != "accept" or (answer.content or {}).get("approve") is not True:
            return wanted, None, f"the client's user did not approve ({answer.action})"
        return wanted, dict(answer.content or {}), ""

    async def _consume(self, nonce: str) -> bool:
        added = await self.records.put_record(NONCE_KIND, nonce, "", owner="", ttl=self.ttl)
        return added == "added"


def retry_decider(
    wanted: str,
    content: dict[str, Any] | None,
    why: str,
    form: Callable[[PendingAction], dict[str, Any]],
) -> Callable[[PendingAction], Awaitable[Decision]]:
    """The ``decide`` of a retried call: approve only the very call that was approved.

    ``form`` rebuilds the form that was shown for the pending action (so the
    answer can only edit the fields it offered).
    """

    async def decide(pending: PendingAction) -> Decision:
        if content is None:
            return Reject(why)
        if canonical_input_hash(pending.input) != wanted:
            return Reject("the input differs from the one approved")
        return decision_of(pending, form(pending), content)

    return decide
