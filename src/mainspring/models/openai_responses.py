"""OpenAIResponsesModel: the OpenAI Responses API (``/v1/responses``), stateless.

Every call is sent with ``store=False``: the whole conversation goes up each
time and nothing is kept server-side. Reasoning survives between calls only
as the encrypted blob the API returns when ``include`` asks for
``reasoning.encrypted_content``; it is kept verbatim as
``ThinkingPart.signature`` (``provider="openai"``) and replayed as a
``reasoning`` item, without its ``rs_`` id (a stateless request must not
reference stored items). Thinking from other providers is dropped.

Built on the official ``openai`` SDK with its own retries off; retries,
backoff and the deadline come from :func:`~mainspring.models.retry.retrying_stream`.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from pydantic import JsonValue

try:
    import httpx2
    import openai
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError('OpenAIResponsesModel needs: pip install "mainspring[openai]"') from exc

from mainspring.errors import (
    BadRequest,
    ConfigError,
    ContextTooLong,
    ModelError,
    ModelOutputError,
    Overloaded,
    RateLimited,
    ServerError,
)
from mainspring.events import TextDelta, ThinkingDelta, ThinkingDone, ToolCallDelta
from mainspring.messages import (
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from mainspring.models.base import (
    Effort,
    ModelEvent,
    ModelRequest,
    ModelSettings,
    ModelStop,
    ModelUsage,
    ToolCallEnd,
    ToolSpec,
)
from mainspring.models.openai.convert import strict_compatible as strict_compatible
from mainspring.models.openai.errors import map_openai_error
from mainspring.models.retry import RetryPolicy, retrying_stream
from mainspring.usage import Usage

__all__ = [
    "OpenAIResponsesModel",
    "build_params",
    "input_items",
    "map_error",
    "strict_compatible",
    "tool_param",
    "usage_from_responses",
]

PROVIDER = "openai"
StopReason: TypeAlias = Literal["end_turn", "tool_use", "max_tokens", "refusal"]
Item: TypeAlias = dict[str, Any]

_DEFAULT_RETRY = RetryPolicy()

_EFFORT: dict[Effort, str] = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "max": "high",
}


class OpenAIResponsesModel:
    """A model served by the OpenAI Responses API (or a server speaking it).

    Args:
        model: The model id, e.g. ``"gpt-5"``.
        api_key: Defaults to ``OPENAI_API_KEY``.
        base_url: Another server speaking the Responses API.
        client: A ready SDK client (its retries are turned off).
        http_client: The ``httpx2`` client the SDK should use (tests pass a mock transport).
        retry: Retries for retryable failures before the first event.

    Raises:
        ConfigError: No API key was given or found in the environment.
    """

    native_output = True
    """A typed output goes as ``text.format``, with the tools still offered."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        http_client: httpx2.AsyncClient | None = None,
        retry: RetryPolicy = _DEFAULT_RETRY,
    ) -> None:
        self.model = model
        self.retry = retry
        if client is not None:
            self._client = client.with_options(max_retries=0)
            return
        try:
            self._client = openai.AsyncOpenAI(
                api_key=api_key, base_url=base_url, http_client=http_client, max_retries=0
            )
        except openai.OpenAIError as exc:
            raise ConfigError(f"OpenAIResponsesModel: {exc}") from exc

    @property
    def name(self) -> str:
        """``"openai:<model>"``."""
        return f"{PROVIDER}:{self.model}"

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one response, retried while nothing has been yielded."""
        params = build_params(self.model, request)
        return retrying_stream(lambda: self._attempt(params), self.retry)

    async def _attempt(self, params: dict[str, Any]) -> AsyncIterator[ModelEvent]:
        try:
            stream = await self._client.responses.create(**params)
        except (openai.OpenAIError, httpx2.HTTPError, OSError) as exc:
            raise map_error(exc) from exc
        reader = _StreamReader(model=self.model)
        try:
            async for event in stream:
                for out in reader.feed(event):
                    yield out
                if reader.finished:
                    break
        except (openai.OpenAIError, httpx2.HTTPError, OSError) as exc:
            # The status line came back: a network failure now breaks a stream.
            raise map_error(exc, received=True) from exc
        except ValueError as exc:  # malformed JSON in an SSE frame
            raise ModelOutputError(
                f"malformed Responses stream: {exc}", provider=PROVIDER, retryable=True
            ) from exc
        finally:
            await stream.close()
        if not reader.finished:
            raise ModelOutputError(
                "Responses stream ended without response.completed",
                provider=PROVIDER,
                retryable=True,
            )


# --- request -----------------------------------------------------------------------------


def build_params(model: str, request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments of ``responses.create`` for ``request`` (streamed, not stored)."""
    settings = request.settings
    params: dict[str, Any] = {
        "model": model,
        "input": input_items(request.messages),
        "stream": True,
        "store": False,
    }
    if request.system_text:
        params["instructions"] = request.system_text
    if request.tools:
        params["tools"] = [tool_param(t) for t in request.tools]
    if settings.tool_choice is not None:
        params["tool_choice"] = _tool_choice(settings.tool_choice)
    params.update(_settings_params(settings))
    params.update(settings.extra)
    params["store"] = False
    return params


def _settings_params(settings: ModelSettings) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if settings.max_tokens is not None:
        params["max_output_tokens"] = settings.max_tokens
    if settings.temperature is not None:
        params["temperature"] = settings.temperature
    if settings.output_schema is not None:
        params["text"] = {"format": _json_schema_format(settings.output_schema)}
    if settings.effort is not None:
        params["reasoning"] = {"effort": _EFFORT[settings.effort], "summary": "auto"}
        params["include"] = ["reasoning.encrypted_content"]
    return params


def _tool_choice(choice: str) -> str | dict[str, str]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "name": choice}


def tool_param(spec: ToolSpec) -> dict[str, Any]:
    """A function tool; ``strict`` when the schema already meets strict mode's rules."""
    return {
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.input_schema,
        "strict": strict_compatible(spec.input_schema),
    }


def _json_schema_format(schema: dict[str, JsonValue]) -> dict[str, Any]:
    title = schema.get("title")
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", title)[:64] if isinstance(title, str) else "output"
    body = {k: v for k, v in schema.items() if k != "title"}
    return {
        "type": "json_schema",
        "name": name or "output",
        "schema": body,
        "strict": strict_compatible(body),
    }


def input_items(messages: Sequence[Message]) -> list[Item]:
    """The ``input`` list for a neutral conversation.

    Tool results are sent only for calls present in the history (the API
    rejects an output whose ``call_id`` it has not seen).
    """
    items: list[Item] = []
    calls: set[str] = set()
    for message in messages:
        if message.role == "assistant":
            items.extend(_assistant_items(message))
            calls.update(p.id for p in message.tool_calls)
            continue
        content: list[TextPart | ImagePart] = []
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                if part.tool_use_id in calls:
                    items.append(_tool_output(part))
            elif isinstance(part, TextPart | ImagePart):
                content.append(part)
        if content:
            items.append(_user_item(content))
    return items


def _user_item(content: Sequence[TextPart | ImagePart]) -> Item:
    if all(isinstance(p, TextPart) for p in content):
        return {
            "role": "user",
            "content": "".join(p.text for p in content if isinstance(p, TextPart)),
        }
    return {"role": "user", "content": [_content_part(p) for p in content]}


def _content_part(part: TextPart | ImagePart) -> Item:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    url = part.url or f"data:{part.media_type};base64,{part.data or ''}"
    return {"type": "input_image", "image_url": url}


def _tool_output(part: ToolResultPart) -> Item:
    if not part.images:
        return {"type": "function_call_output", "call_id": part.tool_use_id, "output": part.content}
    output: list[Item] = [{"type": "input_text", "text": part.content}] if part.content else []
    output.extend(_content_part(image) for image in part.images)
    return {"type": "function_call_output", "call_id": part.tool_use_id, "output": output}


def _assistant_items(message: Message) -> list[Item]:
    items: list[Item] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            items.append({"role": "assistant", "content": "".join(text)})
            text.clear()

    for part in message.parts:
        if isinstance(part, TextPart):
            text.append(part.text)
            continue
        flush()
        if isinstance(part, ToolCallPart):
            items.append(
                {
                    "type": "function_call",
                    "call_id": part.id,
                    "name": part.name,
                    "arguments": json.dumps(part.arguments, separators=(",", ":")),
                }
            )
        elif isinstance(part, ThinkingPart) and part.provider == PROVIDER and part.signature:
            summary = [{"type": "summary_text", "text": part.text}] if part.text else []
            items.append(
                {"type": "reasoning", "summary": summary, "encrypted_content": part.signature}
            )
    flush()
    return items


# --- response ----------------------------------------------------------------------------


def usage_from_responses(usage: Mapping[str, Any] | None) -> Usage:
    """Normalize a Responses ``usage`` object (uncached input; reasoning within output)."""
    if not usage:
        return Usage(requests=1)
    inputs = usage.get("input_tokens_details") or {}
    outputs = usage.get("output_tokens_details") or {}
    cached = int(inputs.get("cached_tokens") or 0)
    written = int(inputs.get("cache_write_tokens") or 0)
    return Usage(
        input_tokens=max(int(usage.get("input_tokens") or 0) - cached - written, 0),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        output_tokens=int(usage.get("output_tokens") or 0),
        reasoning_tokens=int(outputs.get("reasoning_tokens") or 0),
        requests=1,
    )


@dataclass(slots=True)
class _Call:
    call_id: str
    name: str
    index: int
    args: list[str] = field(default_factory=list)
    ended: bool = False


@dataclass(slots=True)
class _StreamReader:
    """Turns SDK stream events into neutral events; one reader per attempt."""

    model: str
    finished: bool = False
    refused: bool = False
    calls: dict[int, _Call] = field(default_factory=dict)
    thinking: dict[int, list[str]] = field(default_factory=dict)

    def feed(self, event: Any) -> list[ModelEvent]:
        kind: str = getattr(event, "type", "")
        match kind:
            case "response.output_text.delta" | "response.refusal.delta":
                self.refused = self.refused or kind == "response.refusal.delta"
                return [TextDelta(text=event.delta)] if event.delta else []
            case "response.reasoning_summary_text.delta" | "response.reasoning_text.delta":
                self.thinking.setdefault(event.output_index, []).append(event.delta)
                return [ThinkingDelta(text=event.delta)] if event.delta else []
            case "response.reasoning_summary_part.added" if event.summary_index > 0:
                self.thinking.setdefault(event.output_index, []).append("\n\n")
                return [ThinkingDelta(text="\n\n")]
            case "response.output_item.added":
                return self._item_added(event.output_index, event.item)
            case "response.function_call_arguments.delta":
                return self._args_delta(event.output_index, event.delta)
            case "response.function_call_arguments.done":
                return self._call_end(event.output_index, event.arguments)
            case "response.output_item.done":
                return self._item_done(event.output_index, event.item)
            case "response.completed" | "response.incomplete":
                self.finished = True
                return self._finish(event.response)
            case "response.failed":
                raise _failure(getattr(event.response, "error", None))
            case "error":
                raise _failure(event)
            case _:
                return []

    def _item_added(self, index: int, item: Any) -> list[ModelEvent]:
        if item.type == "function_call":
            self.calls[index] = _Call(call_id=item.call_id, name=item.name, index=len(self.calls))
        return []

    def _args_delta(self, index: int, delta: str) -> list[ModelEvent]:
        call = self.calls.get(index)
        if call is None or not delta:
            return []
        call.args.append(delta)
        return [
            ToolCallDelta(
                tool_use_id=call.call_id, name=call.name, index=call.index, args_delta=delta
            )
        ]

    def _call_end(self, index: int, arguments: str | None) -> list[ModelEvent]:
        call = self.calls.get(index)
        if call is None or call.ended:
            return []
        call.ended = True
        args = arguments if arguments is not None else "".join(call.args)
        return [
            ToolCallEnd(tool_use_id=call.call_id, name=call.name, index=call.index, arguments=args)
        ]

    def _item_done(self, index: int, item: Any) -> list[ModelEvent]:
        if item.type == "function_call":
            if index not in self.calls:
                self.calls[index] = _Call(
                    call_id=item.call_id, name=item.name, index=len(self.calls)
                )
            return self._call_end(index, item.arguments)
        if item.type == "reasoning":
            summary = getattr(item, "summary", None) or []
            text = "\n\n".join(s.text for s in summary) or "".join(self.thinking.get(index, []))
            signature: str | None = getattr(item, "encrypted_content", None)
            if text or signature:
                return [ThinkingDone(text=text, signature=signature, provider=PROVIDER)]
        return []

    def _finish(self, response: Any) -> list[ModelEvent]:
        raw = getattr(response, "usage", None)
        usage = usage_from_responses(raw.model_dump() if raw is not None else None)
        details = getattr(response, "incomplete_details", None)
        reason = getattr(details, "reason", None) if details is not None else None
        stop: StopReason = "end_turn"
        if reason == "max_output_tokens":
            stop = "max_tokens"
        elif reason == "content_filter" or self.refused:
            stop = "refusal"
        elif self.calls:
            stop = "tool_use"
        model = getattr(response, "model", None) or self.model
        return [ModelUsage(usage=usage), ModelStop(stop_reason=stop, model=model)]


# --- errors ------------------------------------------------------------------------------

_CONTEXT = re.compile(r"context.(length|window)|maximum context|too many tokens|too long", re.I)


def _failure(error: Any) -> ModelError:
    """A typed error for a ``response.failed`` / ``error`` event (no HTTP status)."""
    code = str(getattr(error, "code", None) or "")
    message = str(getattr(error, "message", None) or "the response failed")
    text = f"OpenAI Responses: {message}"
    body = json.dumps({"code": code, "message": message})
    if code == "rate_limit_exceeded":
        return RateLimited(text, provider=PROVIDER, body=body)
    if code == "context_length_exceeded" or _CONTEXT.search(message):
        return ContextTooLong(text, provider=PROVIDER, status=400, body=body)
    if code.startswith("invalid") or code == "insufficient_quota":
        return BadRequest(text, provider=PROVIDER, status=400, body=body)
    if "overloaded" in code or code == "slow_down":
        return Overloaded(text, provider=PROVIDER, status=503, body=body, retryable=True)
    if code in ("server_error", ""):
        return ServerError(text, provider=PROVIDER, status=500, body=body, retryable=True)
    return ModelError(text, provider=PROVIDER)


def map_error(exc: Exception, *, received: bool = False) -> ModelError:
    """The typed mainspring error for an SDK exception (shared with Chat Completions).

    ``received``: whether any of the response had arrived (a network failure is
    then a broken-off stream, not an unreachable server).
    """
    if isinstance(exc, openai.APIError) and not isinstance(
        exc, openai.APIStatusError | openai.APIConnectionError
    ):  # an error frame inside the stream
        return _failure(exc.body if isinstance(exc.body, Mapping) else exc)
    return map_openai_error(exc, PROVIDER, received=received)
