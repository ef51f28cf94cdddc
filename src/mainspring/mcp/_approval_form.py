"""The approval form an MCP client's user sees, and what its answer decides.

A call that needs approval is asked of the client's user as a form
elicitation (mid-request on a 2025-era connection, as an ``input_required``
round in 2026-07-28). The form has an ``approve`` checkbox and, for each of
the tool's modifiable fields (``ToolPolicy.modifiable_fields``) whose input
schema is a flat value (string, number, integer, boolean, or an enum of
them: what a form elicitation can hold), that field with its type, its
bounds and its current value as the default. Only those are editable: an
answer carrying any other field is refused, and a changed value becomes
``Approve(edits=…)``, checked again by the one dispatch path.

A client asked nothing it did not declare: :func:`can_ask` says whether it
declared form elicitation (``elicitation: {}`` or ``{"form": {}}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue

from mainspring.decisions import Approve, Decision, Reject
from mainspring.events import PendingAction

try:
    import mcp_types as types
except ImportError as exc:
    raise ImportError('the MCP server needs: pip install "mainspring[mcp]"') from exc

__all__ = ["APPROVE_FIELD", "CannotAsk", "approval_schema", "can_ask", "decision_of"]

APPROVE_FIELD = "approve"
"""The form's yes/no field."""

_FLAT = ("string", "number", "integer", "boolean")
_KEPT = ("title", "description", "enum", "minimum", "maximum", "minLength", "maxLength", "format")


class CannotAsk(Exception):
    """The call needs an approval the client did not declare it can give."""

    def __init__(self, pending: PendingAction) -> None:
        super().__init__(pending.name)
        self.pending = pending

    def message(self) -> str:
        """The error result's text: what is missing and how to get the approval."""
        why = f" ({self.pending.reason})" if self.pending.reason else ""
        return (
            f"{self.pending.name} needs the user's approval{why}, and this MCP client "
            "cannot give one: it did not declare the elicitation capability (form "
            "mode), so it cannot be asked. Nothing ran. Call it from an MCP client "
            "that supports elicitation, or through the agent's HTTP API "
            "(`mainspring serve`), where approvals are decided."
        )


def can_ask(capabilities: types.ClientCapabilities | None) -> bool:
    """Whether the client declared form elicitation (an empty ``elicitation`` means form)."""
    declared = capabilities.elicitation if capabilities is not None else None
    if declared is None:
        return False
    return declared.form is not None or declared.url is None


def approval_schema(pending: PendingAction, input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The form: ``approve``, then each editable field with its current value as default."""
    properties: dict[str, Any] = {
        APPROVE_FIELD: {
            "type": "boolean",
            "title": "Approve",
            "description": "Run this action now (false rejects it).",
        }
    }
    given = input_schema.get("properties")
    declared = given if isinstance(given, Mapping) else {}
    for name in pending.modifiable_fields:
        field = _field(name, declared.get(name), pending.input.get(name))
        if field is not None and name != APPROVE_FIELD:
            properties[name] = field
    return {"type": "object", "properties": properties, "required": [APPROVE_FIELD]}


def _field(name: str, spec: object, current: JsonValue) -> dict[str, Any] | None:
    if not isinstance(spec, Mapping) or spec.get("type") not in _FLAT:
        return None
    field = {key: spec[key] for key in _KEPT if key in spec}
    field["type"] = spec["type"]
    field.setdefault("title", name)
    if current is not None and not isinstance(current, dict | list):
        field["default"] = current
    return field


def decision_of(
    pending: PendingAction, schema: Mapping[str, Any], content: Mapping[str, Any] | None
) -> Decision:
    """An accepted form's answer as the decision; anything else rejects.

    ``content`` is the form's content when the user accepted (``None`` otherwise).
    """
    answer = content or {}
    if answer.get(APPROVE_FIELD) is not True:
        return Reject("the client's user did not approve")
    offered = set(schema.get("properties", {}))
    extra = sorted(set(answer) - offered)
    if extra:
        return Reject(f"the approval changes fields the form did not offer: {extra}")
    edits: dict[str, JsonValue] = {
        key: value
        for key, value in answer.items()
        if key != APPROVE_FIELD and value != pending.input.get(key)
    }
    return Approve(edits=edits)
