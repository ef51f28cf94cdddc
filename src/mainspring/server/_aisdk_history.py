"""A chat's conversation as the AI SDK's ``UIMessage[]`` (``useChat``'s initial messages).

``GET /v1/aisdk/chat/{id}/messages`` answers with what ``useChat({id, messages})``
takes to show a chat again after a reload: the session's history folded the
way the SDK folds a stream. A user message is a ``user`` message with a
``text`` part; everything the agent did until the next user message is one
``assistant`` message: a ``step-start`` per model call, its ``reasoning`` and
``text`` parts, and a ``tool-<name>`` part per call whose state is what came
of it (``output-available``, ``output-error``, ``output-denied`` when the user
rejected it). The action waiting for an approval is ``approval-requested``
with the server's signed approval id, so the restored chat can answer it.

Ids are the ones the chat already holds: a user message keeps the id the
client gave it (``meta["client_id"]``, falling back to ``m<position>`` for a
message sent another way, or when an earlier message took that id — a
regenerated question repeats it), and the assistant message after it is
``<user id>.r``, the ``messageId`` the stream's ``start`` chunk named
(:func:`reply_id`). A restored chat therefore keeps React keys and
``messageId`` references stable across a reload.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import JsonValue

from mainspring.events import PendingAction
from mainspring.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart
from mainspring.server._threads import CLIENT_ID

__all__ = [
    "EDITED_NOTE_START",
    "REJECTED_PREFIX",
    "last_reply_id",
    "reply_id",
    "reply_to",
    "tool_output",
    "ui_messages",
]

REJECTED_PREFIX = "the user rejected this action: "
"""How the engine words a rejected action's result (what marks it ``output-denied``)."""

EDITED_NOTE_START = "[the approver edited the arguments: "
"""How the engine's note on an edited approval's result begins (the model reads it, the
UI does not; a test keeps it equal to the engine's)."""

UIPartDict = dict[str, JsonValue]


def tool_output(content: str) -> JsonValue:
    """A tool result's content as the SDK's ``output``: JSON when it is JSON.

    The note an edited approval puts before the result for the model (the
    values that ran) is left out: the output is the tool's own.
    """
    if content.startswith(EDITED_NOTE_START):
        content = content.split("]\n\n", 1)[-1]
    try:
        value: JsonValue = json.loads(content)
    except ValueError:
        return content
    return value


def _user_parts(message: Message) -> list[JsonValue]:
    parts: list[JsonValue] = []
    for part in message.parts:
        if isinstance(part, TextPart) and part.text:
            parts.append({"type": "text", "text": part.text, "state": "done"})
        elif isinstance(part, ImagePart) and (part.url or part.data):
            url = part.url or f"data:{part.media_type};base64,{part.data}"
            parts.append({"type": "file", "mediaType": part.media_type, "url": url})
    return parts


def _assistant_parts(message: Message, calls: dict[str, UIPartDict]) -> list[JsonValue]:
    parts: list[JsonValue] = [{"type": "step-start"}]
    for part in message.parts:
        if isinstance(part, ThinkingPart) and part.text and not part.redacted:
            parts.append({"type": "reasoning", "text": part.text, "state": "done"})
        elif isinstance(part, TextPart) and part.text:
            parts.append({"type": "text", "text": part.text, "state": "done"})
        elif isinstance(part, ToolCallPart):
            tool: UIPartDict = {
                "type": f"tool-{part.name}",
                "toolCallId": part.id,
                "state": "input-available",
                "input": dict(part.arguments),
            }
            calls[part.id] = tool
            parts.append(tool)
    return parts


def _settle(message: Message, calls: dict[str, UIPartDict]) -> None:
    """Tool results: the state of the call parts they answer."""
    for result in message.tool_results_parts:
        tool = calls.get(result.tool_use_id)
        if tool is None:
            continue
        if result.is_error and result.content.startswith(REJECTED_PREFIX):
            reason = result.content[len(REJECTED_PREFIX) :]
            approval: dict[str, JsonValue] = {
                "id": f"denied-{result.tool_use_id}",
                "approved": False,
            }
            if reason:
                approval["reason"] = reason
            tool["state"] = "output-denied"
            tool["approval"] = approval
        elif result.is_error:
            tool["state"] = "output-error"
            tool["errorText"] = result.content
        else:
            tool["state"] = "output-available"
            tool["output"] = tool_output(result.content)


def reply_id(user_id: str) -> str:
    """The id of the assistant message that answers the user message ``user_id``."""
    return f"{user_id}.r"


def _own_id(index: int, own: object, taken: set[str]) -> str:
    """A user message's id, its reply's id (``<id>.r``) beside it: both new in ``taken``."""

    def free(uid: str) -> bool:
        return uid not in taken and reply_id(uid) not in taken

    uid = own if isinstance(own, str) and own and free(own) else f"m{index}"
    suffix = 0
    while not free(uid):  # a client named its message like another: never a twin
        suffix += 1
        uid = f"m{index}~{suffix}"
    taken.update((uid, reply_id(uid)))
    return uid


def _user_ids(messages: Sequence[Message], taken: set[str] | None = None) -> dict[int, str]:
    """Each user message's UI id by position: its client's id, unless taken."""
    ids: dict[int, str] = {}
    taken = set() if taken is None else taken
    for index, message in enumerate(messages):
        if message.role == "user":
            ids[index] = _own_id(index, message.meta.get(CLIENT_ID), taken)
    return ids


def reply_to(messages: Sequence[Message], client_id: str) -> str:
    """The id of the reply to a user message ``client_id`` sends after ``messages``."""
    taken: set[str] = set()
    _user_ids(messages, taken)
    return reply_id(_own_id(len(messages), client_id, taken))


def last_reply_id(messages: Sequence[Message]) -> str | None:
    """The id of the assistant message of the last turn (``None`` before the first)."""
    ids = _user_ids(messages)
    return reply_id(ids[max(ids)]) if ids else None


def ui_messages(
    messages: Sequence[Message], pending: PendingAction | None = None
) -> list[JsonValue]:
    """``messages`` as ``UIMessage`` objects, with the ids the chat holds (stable across calls).

    ``pending`` (its approval id already signed) marks its call
    ``approval-requested``; a client-executed one stays ``input-available``
    (the SDK's ``onToolCall`` runs it).
    """
    out: list[JsonValue] = []
    current: dict[str, JsonValue] | None = None
    calls: dict[str, UIPartDict] = {}
    user_ids = _user_ids(messages)
    user_id: str | None = None
    for index, message in enumerate(messages):
        if message.role == "user":
            current = None
            user_id = user_ids[index]
            out.append({"id": user_id, "role": "user", "parts": _user_parts(message)})
            continue
        if current is None:
            own = reply_id(user_id) if user_id is not None else f"m{index}"
            current = {"id": own, "role": "assistant", "parts": []}
            out.append(current)
        parts = current["parts"]
        assert isinstance(parts, list)
        if message.role == "assistant":
            parts += _assistant_parts(message, calls)
        else:
            _settle(message, calls)
    if pending is not None and not pending.client_executed:
        tool = calls.get(pending.tool_use_id)
        if tool is not None and tool["state"] == "input-available":
            tool["state"] = "approval-requested"
            tool["approval"] = {"id": pending.approval_id}
    return out
