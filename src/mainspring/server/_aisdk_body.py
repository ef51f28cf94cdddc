"""The body ``useChat`` posts to ``/v1/aisdk/chat``, and what its last message decides.

Only the fields the server reads are checked (the rest of a UI message is
ignored). An approval is answered by the tool part's ``approval``; with a
``data-approval-edits`` part next to it (:data:`EDITS_PART`) it approves the
action with edits of its modifiable fields, through the one decision path.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool

from mainspring.decisions import Approve, ClientResult, Decision, Reject
from mainspring.errors import ConfigError
from mainspring.server._threads import THREAD_ID
from mainspring.session import Session

__all__ = [
    "EDITS_PART",
    "SHOWN_AGAIN",
    "ChatRequest",
    "ToolApproval",
    "UIMessage",
    "UIPart",
    "answering",
    "decision_of",
    "user_text",
]


class ToolApproval(BaseModel):
    """A tool part's ``approval``: the signed id and the user's answer."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=400)
    approved: StrictBool | None = None
    """Strictly a JSON boolean: ``"yes"`` or ``1`` approves nothing."""
    reason: str | None = Field(default=None, max_length=4000)


class UIPart(BaseModel):
    """One part of a UI message (only the fields the server reads are checked)."""

    model_config = ConfigDict(extra="ignore")

    type: str = Field(min_length=1, max_length=200)
    text: str | None = None
    toolCallId: str | None = Field(default=None, max_length=400)
    state: str | None = Field(default=None, max_length=100)
    approval: ToolApproval | None = None
    output: JsonValue = None
    errorText: str | None = None
    data: JsonValue = None

    @property
    def is_tool(self) -> bool:
        """A tool part (``tool-<name>`` or ``dynamic-tool``)."""
        return self.type.startswith("tool-") or self.type == "dynamic-tool"


class UIMessage(BaseModel):
    """A UI message of the chat."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(default="", max_length=400)
    role: Literal["system", "user", "assistant"]
    parts: list[UIPart] = Field(max_length=10_000)


class ChatRequest(BaseModel):
    """The body ``DefaultChatTransport`` posts (extra ``body`` fields are ignored)."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(pattern=THREAD_ID, description="The chat id: the session's id")
    messages: list[UIMessage] = Field(min_length=1, max_length=10_000)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    messageId: str | None = Field(default=None, max_length=400)
    cancelOnAbort: StrictBool | None = None
    """Whether closing this request mid-stream cancels the run (default: the server's
    ``aisdk_abort_cancels``); a chat that resumes streams sends ``false``."""


def user_text(message: UIMessage) -> str:
    """The text of a user message (its text parts, one per line)."""
    text = "\n".join(p.text for p in message.parts if p.type == "text" and p.text)
    if not text.strip():
        raise ConfigError("the last user message has no text part")
    return text


SHOWN_AGAIN = "~"
"""Separates a signed approval id from the mark of one showing of it (``<id>~<n>``).

An approval shown again (a question while it waits) gets an id of its own, so
the SDK's ``addToolApprovalResponse`` answers the copy the user clicked: the
mark is not signed and adds no authority; the signed id before it decides."""


def signed_part(approval_id: str) -> str:
    """The signed approval id in ``approval_id`` (without a showing's mark)."""
    return approval_id.partition(SHOWN_AGAIN)[0]


EDITS_PART = "data-approval-edits"
"""The part a chat adds to the answered assistant message to approve with edits:
``{"type": "data-approval-edits", "data": {"approvalId": …, "edits": {field: value}}}``
(only the fields the request's ``approvalDescriptor.modifiableFields`` names)."""


def _edits_of(message: UIMessage, approval_id: str) -> dict[str, JsonValue]:
    """The edits an ``EDITS_PART`` of ``message`` carries for ``approval_id`` ({} for none)."""
    found = [p for p in message.parts if p.type == EDITS_PART]
    if not found:
        return {}
    if len(found) > 1:
        raise ConfigError(f"send one {EDITS_PART} part")
    data = found[0].data
    if not isinstance(data, dict) or not isinstance(data.get("edits"), dict):
        raise ConfigError(f'{EDITS_PART} needs data: {{"approvalId": …, "edits": {{…}}}}')
    named = data.get("approvalId")
    if not isinstance(named, str) or signed_part(named) != signed_part(approval_id):
        raise ConfigError(f"{EDITS_PART} names another approval than the one answered")
    edits = data["edits"]
    assert isinstance(edits, dict)
    return dict(edits)


def decision_of(session: Session, message: UIMessage) -> tuple[str, Decision] | None:
    """``(approval id, decision)`` the assistant message answers with ("" for a tool result)."""
    answered = [
        p
        for p in message.parts
        if p.is_tool and p.state == "approval-responded" and p.approval is not None
    ]
    if len(answered) > 1:
        raise ConfigError("answer one approval at a time (one action waits at a time)")
    if answered:
        part = answered[0]
        assert part.approval is not None
        if part.approval.approved is None:
            raise ConfigError("an approval response needs approved: true or false")
        edits = _edits_of(message, part.approval.id)
        if edits and not part.approval.approved:
            raise ConfigError(f"{EDITS_PART} comes with an approval, not a rejection")
        decision: Decision = (
            Approve(edits=edits)
            if part.approval.approved
            else Reject(reason=part.approval.reason or "The user declined.")
        )
        return signed_part(part.approval.id), decision
    pending = session.pending
    if pending is None or not pending.client_executed:
        return None
    for part in message.parts:
        if part.is_tool and part.toolCallId == pending.tool_use_id:
            if part.state == "output-available":
                content = part.output if isinstance(part.output, str) else json.dumps(part.output)
                return "", ClientResult(content=content)
            if part.state == "output-error":
                text = part.errorText or "the tool failed"
                return "", ClientResult(content=text, is_error=True)
    return None


def answering(body: ChatRequest) -> UIMessage:
    """The message the request sends: the last one, or the assistant one ``messageId`` names.

    The SDK names the message where an approval was answered: not the last
    one when the approval was shown again after a later question.
    """
    last = body.messages[-1]
    if body.messageId and not (last.role == "assistant" and last.id == body.messageId):
        for message in reversed(body.messages):
            if message.role == "assistant" and message.id == body.messageId:
                return message
    return last
