"""Neutral requests as Chat Completions request bodies."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

from pydantic import JsonValue

from mainspring.messages import (
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from mainspring.models.base import (
    ModelRequest,
    ModelSettings,
    SystemBlock,
    ToolSpec,
)

__all__ = [
    "ToolImages",
    "build_chat_request",
    "chat_messages",
    "image_note",
    "strict_compatible",
]

ToolImages: TypeAlias = Literal["follow", "note"]
"""What becomes of a tool result's images in Chat Completions, whose tool messages
carry text only: ``"follow"`` sends them in a user message right after the tool
messages; ``"note"`` (for a server or model without image input) tells the model
in the tool message that they were left out."""

_EFFORT = {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high", "max": "high"}
_REASONING_MODEL = re.compile(r"^(o\d|gpt-5|gpt-oss)")


def _image_url(part: ImagePart) -> str:
    if part.url is not None:
        return part.url
    return f"data:{part.media_type};base64,{part.data or ''}"


def _user_content(parts: Sequence[TextPart | ImagePart]) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in parts):
        return "".join(p.text for p in parts if isinstance(p, TextPart))
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        else:
            content.append({"type": "image_url", "image_url": {"url": _image_url(part)}})
    return content


def _assistant(message: Message, *, echo_reasoning_of: str | None) -> dict[str, Any]:
    text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
    has_calls = any(isinstance(p, ToolCallPart) for p in message.parts)
    # With tool calls the content is "" when there is no text, never null: OpenAI
    # takes both, local servers (llama-cpp-python's) refuse null.
    out: dict[str, Any] = {"role": "assistant", "content": text if text or has_calls else None}
    thinking = [
        p
        for p in message.parts
        if isinstance(p, ThinkingPart)
        and not p.redacted
        and echo_reasoning_of is not None
        and p.provider == echo_reasoning_of
    ]
    if thinking:
        out["reasoning_content"] = "".join(p.text for p in thinking)
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for call in message.parts
        if isinstance(call, ToolCallPart)
    ]
    if calls:
        out["tool_calls"] = calls
    return out


def image_note(images: Sequence[ImagePart], *, sent: bool) -> str:
    """The line a tool result gets about its images (``sent``: they follow separately)."""
    kinds = ", ".join(dict.fromkeys(i.media_type for i in images))
    count = f"{len(images)} image{'s' * (len(images) != 1)} ({kinds})"
    if sent:
        return f"[the tool also returned {count}: shown in the next message]"
    return f"[the tool also returned {count}, which could not be shown to you here]"


def _tool_message(result: ToolResultPart, images: ToolImages) -> dict[str, Any]:
    content = result.content
    if result.images:
        note = image_note(result.images, sent=images == "follow")
        content = f"{content}\n{note}" if content else note
    return {"role": "tool", "tool_call_id": result.tool_use_id, "content": content}


def _tool_images_message(results: Sequence[ToolResultPart]) -> dict[str, Any] | None:
    parts: list[TextPart | ImagePart] = []
    for result in results:
        if result.images:
            parts.append(TextPart(text=f"Images returned by {result.name} ({result.tool_use_id}):"))
            parts.extend(result.images)
    return {"role": "user", "content": _user_content(parts)} if parts else None


def chat_messages(
    system: Sequence[SystemBlock],
    messages: Sequence[Message],
    *,
    echo_reasoning_of: str | None = None,
    cache_control: bool = False,
    tool_images: ToolImages = "follow",
) -> list[dict[str, Any]]:
    """Neutral history as Chat Completions messages.

    Args:
        system: One system message per non-empty block.
        messages: The conversation; tool results become one ``tool`` message each.
        echo_reasoning_of: Send thinking parts produced by this provider back as
            ``reasoning_content``; ``None`` drops all thinking.
        cache_control: Mark system blocks with ``cache_breakpoint`` the
            OpenRouter/Anthropic way (content parts with ``cache_control``).
        tool_images: Where a tool result's images go (see :data:`ToolImages`).
    """
    out: list[dict[str, Any]] = []
    for block in system:
        if not block.text:
            continue
        if cache_control and block.cache_breakpoint:
            part = {"type": "text", "text": block.text, "cache_control": {"type": "ephemeral"}}
            out.append({"role": "system", "content": [part]})
        else:
            out.append({"role": "system", "content": block.text})
    for message in messages:
        if message.role == "assistant":
            out.append(_assistant(message, echo_reasoning_of=echo_reasoning_of))
            continue
        results = [p for p in message.parts if isinstance(p, ToolResultPart)]
        out.extend(_tool_message(p, tool_images) for p in results)
        if tool_images == "follow" and (shown := _tool_images_message(results)) is not None:
            out.append(shown)
        user_parts = [p for p in message.parts if isinstance(p, TextPart | ImagePart)]
        if user_parts and message.role == "user":
            out.append({"role": "user", "content": _user_content(user_parts)})
    return out


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.input_schema,
        },
    }


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def strict_compatible(schema: JsonValue) -> bool:
    """Whether OpenAI's strict mode accepts ``schema`` unchanged.

    Strict mode needs every object closed (``additionalProperties: false``)
    with all of its properties required.
    """
    if isinstance(schema, list):
        return all(strict_compatible(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    props = schema.get("properties")
    if schema.get("type") == "object" or isinstance(props, dict):
        if schema.get("additionalProperties") is not False:
            return False
        required = schema.get("required", [])
        names = set(props) if isinstance(props, dict) else set()
        if not isinstance(required, list) or set(map(str, required)) != names:
            return False
    return all(
        strict_compatible(v)
        for k, v in schema.items()
        if k not in ("required", "enum", "const", "default", "examples")
    )


def _response_format(schema: dict[str, JsonValue]) -> dict[str, Any]:
    title = schema.get("title")
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", title) if isinstance(title, str) else "output"
    return {
        "type": "json_schema",
        "json_schema": {
            "name": name[:64] or "output",
            "schema": schema,
            # Strict only when the schema meets its rules (a pydantic model's does not:
            # its objects are open); the engine validates the answer either way.
            "strict": strict_compatible(schema),
        },
    }


def _apply_settings(
    body: dict[str, Any], settings: ModelSettings, *, model: str, provider: str, openrouter: bool
) -> None:
    if settings.max_tokens is not None:
        # OpenAI replaced max_tokens (reasoning models refuse it); servers still expect it.
        key = "max_completion_tokens" if provider == "openai" else "max_tokens"
        body[key] = settings.max_tokens
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.output_schema is not None:
        body["response_format"] = _response_format(settings.output_schema)
    if settings.effort is not None:
        effort = _EFFORT[settings.effort]
        if openrouter:
            body["reasoning"] = {"effort": effort}
        elif provider != "openai" or _REASONING_MODEL.match(model):
            body["reasoning_effort"] = effort
    body.update(settings.extra)


def build_chat_request(
    model: str,
    request: ModelRequest,
    *,
    provider: str = "openai",
    openrouter: bool = False,
    tool_images: ToolImages = "follow",
) -> dict[str, Any]:
    """The JSON body of a streaming ``/chat/completions`` call for ``request``."""
    body: dict[str, Any] = {
        "model": model,
        "messages": chat_messages(
            request.system,
            request.messages,
            echo_reasoning_of=None if provider == "openai" else provider,
            cache_control=openrouter,
            tool_images=tool_images,
        ),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [_tool(t) for t in request.tools]
    settings = request.settings
    if settings.tool_choice is not None:
        body["tool_choice"] = _tool_choice(settings.tool_choice)
    _apply_settings(body, settings, model=model, provider=provider, openrouter=openrouter)
    return body
