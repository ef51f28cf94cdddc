"""AnthropicModel: the Messages API through the official ``anthropic`` SDK, always streamed.

Requests are built from the neutral :class:`~mainspring.models.base.ModelRequest`:

- system blocks become text blocks; the block marked ``cache_breakpoint`` (the
  end of the stable prefix) carries ``cache_control: {"type": "ephemeral"}``;
- tool results (role ``tool``) become ``tool_result`` blocks in a user
  message, merged with neighbouring user content so roles alternate;
- thinking goes back unchanged, with its signature, only when Anthropic
  produced it (``ThinkingPart.provider == "anthropic"``); thinking from other
  providers means nothing here and is dropped;
- ``effort`` maps to an extended-thinking budget (``minimal`` = no thinking),
  raising ``max_tokens`` above the budget;
- ``output_schema`` uses the API's native structured output
  (``output_config.format`` of type ``json_schema``), not a forced tool, so the
  answer arrives as ordinary text;
- ``settings.extra`` is merged into the JSON body last, so it wins.

The SDK's own retries are off (``max_retries=0``): :class:`RetryPolicy` owns
retrying. Server-side tool blocks (``server_tool_use``, ``web_search_tool_result``
and friends) run on Anthropic's side; they are skipped without breaking the
turn and never surface as client tool calls.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

try:
    import anthropic
    import httpx2
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('AnthropicModel needs: pip install "mainspring[anthropic]"') from exc

from pydantic import JsonValue

from mainspring.errors import (
    ModelError,
    ModelHTTPError,
    ModelOutputError,
)
from mainspring.events import TextDelta, ThinkingDelta, ThinkingDone, ToolCallDelta
from mainspring.messages import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from mainspring.models._http import http_error, retry_after_seconds
from mainspring.models._transport import transport_error
from mainspring.models.base import (
    Effort,
    ModelEvent,
    ModelRequest,
    ModelSettings,
    ModelStop,
    ModelUsage,
    ToolCallEnd,
)
from mainspring.models.retry import RetryPolicy, retrying_stream
from mainspring.usage import Usage

__all__ = ["THINKING_BUDGETS", "AnthropicModel", "anthropic_usage", "request_body"]

PROVIDER = "anthropic"

DEFAULT_RETRY = RetryPolicy()
"""The retry policy used when none is given."""

THINKING_BUDGETS: dict[Effort, int] = {"low": 1024, "medium": 4096, "high": 16384, "max": 32000}
"""Extended-thinking ``budget_tokens`` per neutral effort (``minimal`` turns thinking off)."""

StopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal"]

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    # A server-tool loop hit its iteration limit; the turn is over for us.
    "pause_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}

# Error ``type`` of an ``event: error`` frame, which arrives on a 200 stream.
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}

_CONTEXT_WORDING = ("prompt is too long", "context window", "context length", "too many tokens")


class AnthropicModel:
    """A Claude model over the Anthropic Messages API."""

    native_output = True
    """A typed output goes as ``output_config.format``, with the tools still offered."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        http_client: httpx2.AsyncClient | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        max_tokens: int = 4096,
    ) -> None:
        """Create the adapter.

        Args:
            model: The Anthropic model id, e.g. ``"claude-sonnet-4-5"``.
            api_key: Defaults to ``ANTHROPIC_API_KEY``.
            base_url: Another endpoint (a proxy, a gateway).
            client: A ready SDK client (its retries are turned off).
            http_client: The HTTP client the SDK should use (tests pass a mock transport).
            retry: How retryable failures are retried.
            max_tokens: Output limit when the request's settings leave it unset.
        """
        if client is None:
            client = anthropic.AsyncAnthropic(
                api_key=api_key, base_url=base_url, http_client=http_client, max_retries=0
            )
        else:
            client = client.with_options(max_retries=0)
        self._client = client
        self._model = model
        self._retry = retry
        self._max_tokens = max_tokens

    @property
    def name(self) -> str:
        """``"anthropic:<model>"``."""
        return f"{PROVIDER}:{self._model}"

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one response, retrying retryable failures before the first event."""
        body = request_body(request, model=self._model, max_tokens=self._max_tokens)
        return retrying_stream(lambda: self._attempt(body), self._retry)

    async def _attempt(self, body: dict[str, JsonValue]) -> AsyncIterator[ModelEvent]:
        rest = dict(body)
        model, max_tokens, messages = (
            rest.pop("model"),
            rest.pop("max_tokens"),
            rest.pop("messages"),
        )
        translator = _Translator(self._model)
        received = False  # the status line came back: a network failure now breaks a stream
        try:
            stream = await self._client.messages.create(
                model=str(model),
                max_tokens=cast(int, max_tokens),
                messages=cast("list[anthropic.types.MessageParam]", messages),
                stream=True,
                extra_body=rest,
            )
            received = True
            async with stream:
                async for event in stream:
                    for out in translator.feed(event):
                        yield out
        except (anthropic.APIError, httpx2.HTTPError, OSError, json.JSONDecodeError) as exc:
            raise map_error(exc, received=received) from exc
        if not translator.done:
            raise ModelOutputError(
                "the Anthropic stream ended before message_stop", provider=PROVIDER, retryable=True
            )


# --- request -----------------------------------------------------------------


def request_body(request: ModelRequest, *, model: str, max_tokens: int) -> dict[str, JsonValue]:
    """The Messages API JSON body (without ``stream``) for a neutral request."""
    settings = request.settings
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": settings.max_tokens or max_tokens,
        "messages": _messages(request.messages),
    }
    system = [
        {"type": "text", "text": b.text}
        | ({"cache_control": {"type": "ephemeral"}} if b.cache_breakpoint else {})
        for b in request.system
        if b.text
    ]
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
    _apply_settings(body, settings)
    return cast("dict[str, JsonValue]", body)


def _apply_settings(body: dict[str, Any], settings: ModelSettings) -> None:
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    choice = settings.tool_choice
    if choice is not None:
        mapped = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}
        body["tool_choice"] = mapped.get(choice, {"type": "tool", "name": choice})
    if settings.effort is not None and settings.effort != "minimal":
        budget = THINKING_BUDGETS[settings.effort]
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if body["max_tokens"] <= budget:
            body["max_tokens"] = budget + body["max_tokens"]
    if settings.output_schema is not None:
        body["output_config"] = {
            "format": {"type": "json_schema", "schema": settings.output_schema}
        }
    body.update(settings.extra)


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = [b for part in message.parts if (b := _block(part)) is not None]
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)  # roles must alternate
        else:
            out.append({"role": role, "content": blocks})
    return out


def _block(part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, ImagePart):
        return _image(part)
    if isinstance(part, ToolCallPart):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments}
    if isinstance(part, ToolResultPart):
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.tool_use_id}
        if part.images:
            text = [{"type": "text", "text": part.content}] if part.content else []
            result["content"] = text + [_image(i) for i in part.images]
        else:
            result["content"] = part.content
        if part.is_error:
            result["is_error"] = True
        return result
    return _thinking(part)


def _thinking(part: ThinkingPart) -> dict[str, Any] | None:
    # A signature only means something to the provider that made it.
    if part.provider != PROVIDER or not part.signature:
        return None
    if part.redacted:
        return {"type": "redacted_thinking", "data": part.signature}
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


def _image(part: ImagePart) -> dict[str, Any]:
    if part.data is not None:
        source = {"type": "base64", "media_type": part.media_type, "data": part.data}
    else:
        source = {"type": "url", "url": part.url or ""}
    return {"type": "image", "source": source}


# --- response ----------------------------------------------------------------


def anthropic_usage(raw: Mapping[str, Any]) -> Usage:
    """Normalize an Anthropic ``usage`` object.

    Anthropic's ``input_tokens`` already excludes cache reads and writes, which
    it reports apart; ``output_tokens_details.thinking_tokens`` (when present)
    is the reasoning share of the output.
    """
    details = raw.get("output_tokens_details") or {}
    return Usage(
        input_tokens=raw.get("input_tokens") or 0,
        cache_read_tokens=raw.get("cache_read_input_tokens") or 0,
        cache_write_tokens=raw.get("cache_creation_input_tokens") or 0,
        output_tokens=raw.get("output_tokens") or 0,
        reasoning_tokens=(details.get("thinking_tokens") or 0) if isinstance(details, dict) else 0,
        requests=1,
    )


def _field(obj: object, name: str, default: Any = None) -> Any:
    """A field of an SDK object, or of a dict when the SDK did not know the shape."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _dump(obj: object) -> dict[str, Any]:
    if obj is None:
        return {}
    if isinstance(obj, Mapping):
        return dict(obj)
    dumped: dict[str, Any] = obj.model_dump()  # type: ignore[attr-defined]  # SDK pydantic model
    return dumped


@dataclass
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    signature: str = ""
    tool_use_id: str = ""
    name: str = ""
    index: int = 0
    initial_input: Any = None


@dataclass
class _Translator:
    """Turns raw Messages stream events into neutral model events."""

    model: str
    done: bool = False
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    blocks: dict[int, _Block] = field(default_factory=dict)
    calls: int = 0

    def feed(self, event: object) -> list[ModelEvent]:
        kind = _field(event, "type")
        if kind == "message_start":
            message = _field(event, "message")
            self.model = _field(message, "model") or self.model
            self.usage = _dump(_field(message, "usage"))
        elif kind == "content_block_start":
            return self._start(_field(event, "index"), _field(event, "content_block"))
        elif kind == "content_block_delta":
            return self._delta(_field(event, "index"), _field(event, "delta"))
        elif kind == "content_block_stop":
            return self._stop(_field(event, "index"))
        elif kind == "message_delta":
            self.stop_reason = _field(_field(event, "delta"), "stop_reason") or self.stop_reason
            self.usage |= {k: v for k, v in _dump(_field(event, "usage")).items() if v is not None}
        elif kind == "message_stop":
            self.done = True
            stop = _STOP_REASONS.get(self.stop_reason or "end_turn", "end_turn")
            return [
                ModelUsage(usage=anthropic_usage(self.usage)),
                ModelStop(stop_reason=stop, model=self.model),
            ]
        return []

    def _start(self, index: int, block: object) -> list[ModelEvent]:
        kind = str(_field(block, "type", ""))
        entry = _Block(kind=kind)
        self.blocks[index] = entry
        if kind == "text" and (text := _field(block, "text")):
            return [TextDelta(text=text)]
        if kind == "thinking":
            entry.text.append(_field(block, "thinking") or "")
            entry.signature = _field(block, "signature") or ""
        elif kind == "redacted_thinking":
            data = _field(block, "data")
            return [ThinkingDone(text="", signature=data, redacted=True, provider=PROVIDER)]
        elif kind == "tool_use":
            entry.tool_use_id, entry.name = _field(block, "id"), _field(block, "name")
            entry.index, self.calls = self.calls, self.calls + 1
            entry.initial_input = _field(block, "input")
            return [self._call_delta(entry, "")]
        return []

    def _delta(self, index: int, delta: object) -> list[ModelEvent]:
        entry = self.blocks.get(index)
        kind = _field(delta, "type")
        if entry is None:
            return []
        if kind == "text_delta" and entry.kind == "text":
            return [TextDelta(text=_field(delta, "text"))]
        if kind == "thinking_delta" and entry.kind == "thinking":
            text = _field(delta, "thinking") or ""
            entry.text.append(text)
            return [ThinkingDelta(text=text)] if text else []
        if kind == "signature_delta" and entry.kind == "thinking":
            entry.signature += _field(delta, "signature") or ""
        elif kind == "input_json_delta" and entry.kind == "tool_use":
            fragment = _field(delta, "partial_json") or ""
            entry.text.append(fragment)
            return [self._call_delta(entry, fragment)] if fragment else []
        return []  # citations, server-tool input: nothing the engine acts on

    def _stop(self, index: int) -> list[ModelEvent]:
        entry = self.blocks.pop(index, None)
        if entry is None:
            return []
        if entry.kind == "thinking":
            text = "".join(entry.text)
            return [ThinkingDone(text=text, signature=entry.signature or None, provider=PROVIDER)]
        if entry.kind == "tool_use":
            arguments = "".join(entry.text)
            if not arguments:
                arguments = json.dumps(entry.initial_input) if entry.initial_input else "{}"
            return [
                ToolCallEnd(
                    tool_use_id=entry.tool_use_id,
                    name=entry.name,
                    index=entry.index,
                    arguments=arguments,
                )
            ]
        return []

    @staticmethod
    def _call_delta(entry: _Block, fragment: str) -> ToolCallDelta:
        return ToolCallDelta(
            tool_use_id=entry.tool_use_id, name=entry.name, index=entry.index, args_delta=fragment
        )


# --- errors ------------------------------------------------------------------


def map_error(exc: Exception, *, received: bool = False) -> ModelError:
    """The typed mainspring error for an SDK, transport or decoding failure.

    ``received``: whether any of the response had arrived (a network failure is
    then a broken-off stream, not an unreachable server).
    """
    if isinstance(exc, anthropic.APIStatusError):
        return _status_error(exc)
    network = transport_error(
        exc,
        provider=PROVIDER,
        name="Anthropic",
        received=received,
        timeouts=(anthropic.APITimeoutError,),
        connections=(anthropic.APIConnectionError,),
    )
    if network is not None:
        return network
    if isinstance(exc, json.JSONDecodeError):
        return ModelOutputError(
            f"malformed Anthropic stream: {exc}", provider=PROVIDER, retryable=True
        )
    return ModelError(f"Anthropic call failed: {exc}", provider=PROVIDER)


def _status_error(exc: anthropic.APIStatusError) -> ModelHTTPError:
    body = exc.body
    error = _field(body, "error") if isinstance(body, Mapping) else None
    error_type = str(_field(error, "type", "")) if isinstance(error, Mapping) else ""
    message = str(_field(error, "message", "")) if isinstance(error, Mapping) else str(exc)
    status = exc.status_code
    if status < 400:  # an ``event: error`` frame inside a 200 stream
        status = _ERROR_TYPE_STATUS.get(error_type, 500)
    text = json.dumps(body) if body is not None else ""
    what = f"Anthropic {status} {error_type}: {message}".strip()
    if status == 408:
        status = 500  # the request timed out upstream: a server-side failure to retry
    return http_error(
        status,
        what,
        provider=PROVIDER,
        body=text,
        retry_after=retry_after_seconds(exc.response.headers),
        context_too_long=status in (400, 413)
        and any(w in message.lower() for w in _CONTEXT_WORDING),
    )
