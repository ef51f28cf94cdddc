"""MockModel: an offline model that needs no script (the torus SDK's ``MockProvider``).

Any agent runs with it, offline and deterministically: in each turn it calls
the first tool it is offered once, with arguments made up from that tool's
JSON schema (:func:`example_input`), then answers with a text made up from
the conversation and what the tool returned. With no tools it answers at
once. It streams, reports usage and records its requests as
:class:`~mainspring.models.scripted.ScriptedModel` does (it is one, playing
a script it writes itself).

```python
agent = Agent(model=MockModel(), tools=[get_balance])   # or Agent(model="mock")
result = await Session(agent).run("What do I have?")
print(result.text)  # You asked: "What do I have?" / get_balance returned: {"usd": 42}
```

The answer is not meant to be clever: it shows the loop, the tool, its
approval and its result end to end without a key or a network.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from mainspring._lowlevel.json_value import JsonValue
from mainspring.messages import Message, ToolResultPart
from mainspring.models.base import ToolSpec
from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse

__all__ = ["MockModel", "example_input"]

_PREVIEW = 200
"""Characters of each tool result (and of the user's message) the answer quotes."""
_MAX_DEPTH = 8
"""How deep :func:`example_input` follows nested objects, arrays and references."""


class MockModel(ScriptedModel):
    """Calls the first offered tool once a turn, then answers from the context and results."""

    def __init__(self, *, name: str = "mock", chunk_size: int = 8) -> None:
        """A scriptless offline model.

        Args:
            name: The model name reported in usage (and looked up in prices).
            chunk_size: Characters per streamed delta.
        """
        super().__init__(self._respond, name=name, chunk_size=chunk_size)

    def _respond(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        start = _turn_start(messages)
        turn = messages[start:]
        results = [part for m in turn for part in m.parts if isinstance(part, ToolResultPart)]
        if tools and not results:
            first = tools[0]
            return ScriptedResponse(
                tool_calls=[ScriptedCall(first.name, example_input(first.input_schema))]
            )
        return ScriptedResponse(text=_answer(messages[start] if turn else None, results))


def _turn_start(messages: Sequence[Message]) -> int:
    """The index of the current turn's user message (the last one that is not tool results)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "user" and not any(
            isinstance(part, ToolResultPart) for part in message.parts
        ):
            return index
    return len(messages)


def _answer(user: Message | None, results: Sequence[ToolResultPart]) -> str:
    asked = _clip(user.text.strip()) if user is not None else ""
    lines = [f'You asked: "{asked}"'] if asked else ["Hello."]
    for result in results:
        verb = "failed" if result.is_error else "returned"
        lines.append(f"{result.name} {verb}: {_clip(result.content.strip())}")
    if not results:
        lines.append("(mock answer: no tool was called)")
    return "\n".join(lines)


def _clip(text: str) -> str:
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def example_input(schema: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """An input that fits ``schema`` (a tool's JSON schema): its required fields filled.

    Each required property gets its ``default``, its ``const``, its first
    ``enum`` value or its first ``examples`` entry if it has one, else a
    value of its type: ``"example"`` (a date, time, e-mail or URL for those
    formats; padded to ``minLength``), ``1`` or the ``minimum``, ``True``, a
    list of ``minItems`` examples, a nested object's required fields. Local
    ``$ref`` s (``#/$defs/…``) are followed; of ``anyOf`` / ``oneOf`` the first
    branch that is not ``null`` is taken. Optional properties are left out.
    """
    value = _example(schema, schema, 0)
    return value if isinstance(value, dict) else {}


def _example(
    schema: Mapping[str, JsonValue], root: Mapping[str, JsonValue], depth: int
) -> JsonValue:
    if depth > _MAX_DEPTH:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(ref, root)
        return _example(target, root, depth + 1) if target is not None else None
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    for key in ("enum", "examples"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return options[0]
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            picked = _first_branch(branches)
            if picked is not None:
                return _example(picked, root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None and isinstance(schema.get("properties"), dict):
        kind = "object"
    return _of_type(kind, schema, root, depth)


def _of_type(
    kind: JsonValue, schema: Mapping[str, JsonValue], root: Mapping[str, JsonValue], depth: int
) -> JsonValue:
    if kind == "object":
        properties = schema.get("properties")
        required = schema.get("required")
        if not isinstance(properties, dict) or not isinstance(required, list):
            return {}
        out: dict[str, JsonValue] = {}
        for name in required:
            spec = properties.get(name) if isinstance(name, str) else None
            if isinstance(name, str) and isinstance(spec, dict):
                out[name] = _example(spec, root, depth + 1)
        return out
    if kind == "array":
        items = schema.get("items")
        count = schema.get("minItems")
        n = count if isinstance(count, int) and count > 0 else 0
        item = _example(items, root, depth + 1) if isinstance(items, dict) else "example"
        return [item] * min(n, 16)
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return True
    if kind == "string":
        return _string(schema)
    return None


def _number(schema: Mapping[str, JsonValue], *, integer: bool) -> int | float:
    value: float = 1
    low, above, high = (_numeric(schema, k) for k in ("minimum", "exclusiveMinimum", "maximum"))
    if low is not None and value < low:
        value = low
    if above is not None and value <= above:
        value = above + 1
    if high is not None and value > high:
        value = high
    return math.ceil(value) if integer else float(value)


def _numeric(schema: Mapping[str, JsonValue], key: str) -> float | None:
    value = schema.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


_FORMATS: dict[str, str] = {
    "date": "2024-01-01",
    "date-time": "2024-01-01T00:00:00Z",
    "time": "00:00:00Z",
    "email": "user@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


def _string(schema: Mapping[str, JsonValue]) -> str:
    fmt = schema.get("format")
    text = _FORMATS.get(fmt, "example") if isinstance(fmt, str) else "example"
    low = schema.get("minLength")
    if isinstance(low, int) and len(text) < low:
        text = text + "x" * (low - len(text))
    high = schema.get("maxLength")
    if isinstance(high, int) and len(text) > high:
        text = text[:high]
    return text


def _first_branch(branches: list[JsonValue]) -> Mapping[str, JsonValue] | None:
    for branch in branches:
        if isinstance(branch, dict) and branch.get("type") != "null":
            return branch
    return None


def _resolve(ref: str, root: Mapping[str, JsonValue]) -> Mapping[str, JsonValue] | None:
    """A local ``#/…`` reference inside ``root`` (nothing is ever fetched)."""
    if not ref.startswith("#/"):
        return None
    node: JsonValue = dict(root)
    for piece in ref[2:].split("/"):
        key = piece.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node if isinstance(node, dict) else None
