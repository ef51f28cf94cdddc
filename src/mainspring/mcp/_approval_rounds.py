"""Approval of a confirm-tier call in the stateless 2026-07-28 protocol: two round trips.

The 2026-07-28 revision has no back channel for a server to ask its client
mid-request. A call that needs approval therefore ends its first round with
an ``input_required`` result: one elicitation (approve: yes/no) and a
``requestState`` naming the tool, the SHA-256 of its canonical input and a
fresh nonce. The SDK's :class:`~mcp.server.request_state.RequestStateBoundary`
seals that state (AES-256-GCM, bound to the request and principal, with a
TTL), so what comes back is what this server minted. The client's retry
carries the user's answer and the state; the call runs (through the one
dispatch path, judged again) only if:

- the state names this tool and this exact input (any edit is refused),
- its nonce has not been used before (a replayed state is refused: at most
  once), and
- the answer is an ``accept`` with ``approve: true``.

The nonces used are kept in memory for the state's TTL, bounded.
"""

from __future__ import annotations

import json
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from mainspring.decisions import Approve, Decision, Reject, canonical_input_hash
from mainspring.events import PendingAction

try:
    import mcp_types as types
except ImportError as exc:
    raise ImportError('the MCP server needs: pip install "mainspring[mcp]"') from exc

__all__ = ["APPROVAL_KEY", "ApprovalRounds", "NeedsApproval", "retry_decider"]

APPROVAL_KEY = "mainspring_approval"
"""The key of the approval elicitation in ``inputRequests`` / ``inputResponses``."""
_MAX_NONCES = 100_000


class NeedsApproval(Exception):
    """Raised out of a first-round call that paused: answer with ``input_required``."""

    def __init__(self, pending: PendingAction) -> None:
        super().__init__(pending.name)
        self.pending = pending


class ApprovalRounds:
    """Mints first-round states and judges retries; remembers used nonces."""

    def __init__(self, *, ttl: float, schema: dict[str, Any]) -> None:
        """States live ``ttl`` seconds; the elicitation asks with ``schema``."""
        self.ttl = ttl
        self.schema = schema
        self._used: OrderedDict[str, float] = OrderedDict()

    def input_required(self, pending: PendingAction, message: str) -> types.InputRequiredResult:
        """The first round's answer: ask for approval, remember what is approved."""
        state = {
            "tool": pending.name,
            "input": canonical_input_hash(pending.input),
            "nonce": secrets.token_urlsafe(16),
        }
        ask = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=self.schema)
        )
        return types.InputRequiredResult(
            input_requests={APPROVAL_KEY: ask}, request_state=json.dumps(state)
        )

    def decision(
        self,
        tool: str,
        request_state: str,
        responses: Mapping[str, types.InputResponse] | None,
    ) -> tuple[str, bool, str]:
        """``(input hash, approved, why not)`` for a retry; consumes the state's nonce."""
        try:
            state = json.loads(request_state)
            wanted, nonce = state["input"], state["nonce"]
            named = state["tool"]
        except (ValueError, KeyError, TypeError):
            return "", False, "the request state is not this server's"
        if named != tool or not isinstance(wanted, str) or not isinstance(nonce, str):
            return "", False, "the request state is for another tool"
        if not self._consume(nonce):
            return wanted, False, "this approval was already used"
        answer = (responses or {}).get(APPROVAL_KEY)
        if not isinstance(answer, types.ElicitResult):
            return wanted, False, "no answer to the approval request"
        if answer.action != "accept" or (answer.content or {}).get("approve") is not True:
            return wanted, False, f"the client's user did not approve ({answer.action})"
        return wanted, True, ""

    def _consume(self, nonce: str) -> bool:
        now = anyio.current_time()
        while self._used and next(iter(self._used.values())) < now:
            self._used.popitem(last=False)
        if nonce in self._used or len(self._used) >= _MAX_NONCES:
            return False  # full of live approvals: refuse rather than forget a used one
        self._used[nonce] = now + self.ttl
        return True


def retry_decider(
    wanted: str, approved: bool, why: str
) -> Callable[[PendingAction], Awaitable[Decision]]:
    """The ``decide`` of a retried call: approve only the very call that was approved."""

    async def decide(pending: PendingAction) -> Decision:
        if not approved:
            return Reject(why)
        if canonical_input_hash(pending.input) != wanted:
            return Reject("the input differs from the one approved")
        return Approve()

    return decide
