"""GeminiModel: Google Gemini ``streamGenerateContent`` on the official ``google-genai`` SDK.

Requests are built from neutral messages: system blocks become
``system_instruction``, assistant turns become ``model`` contents (text and
``functionCall`` parts), tool results become ``functionResponse`` parts in a
``user`` turn, paired with their call by id and name.

Thought signatures. Gemini attaches an opaque ``thoughtSignature`` to a
*part* (a thought summary, a text part or a ``functionCall``), and wants it
back on the same part. The stream turns it into a
``ThinkingDone(provider="gemini", signature=...)`` placed just before the part
that carried it (thought summaries streamed before that part share the same
``ThinkingDone``). The engine keeps it as a ``ThinkingPart`` in that position,
and on the way back a Gemini ``ThinkingPart``'s signature is put on the next
text or ``functionCall`` part of the message (or, with nothing after it, on a
``thought`` part of its own). Thought summary text is not sent back; thinking
from other providers is dropped. Signatures are kept as standard base64, the
way the API returns them.

Ids. Gemini often omits ``functionCall.id``; a missing id becomes
``call_<n>``, where ``n`` counts the tool calls in the conversation so far, so
ids stay unique within a turn and are stable when the request is replayed.
The id is sent back on the ``functionCall`` and its ``functionResponse``.

Usage. ``promptTokenCount`` includes ``cachedContentTokenCount``, and
``candidatesTokenCount`` excludes ``thoughtsTokenCount`` (the recorded totals
add up as ``prompt + candidates + thoughts``). So input is
``prompt - cached``, cache read is ``cached``, output is
``candidates + thoughts`` and reasoning is ``thoughts``.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Literal

from pydantic import JsonValue, ValidationError

from mainspring.errors import (
    AuthenticationError,
    ConfigError,
    ModelError,
    ModelOutputError,
    ModelTimeout,
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
from mainspring.models._http import http_error
from mainspring.models._transport import transport_error
from mainspring.models.base import (
    Effort,
    ModelEvent,
    ModelRequest,
    ModelStop,
    ModelUsage,
    ToolCallEnd,
)
from mainspring.models.retry import RetryPolicy, retrying_stream
from mainspring.usage import Usage

try:
    import httpx2
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('GeminiModel needs: pip install "mainspring[gemini]"') from exc

__all__ = [
    "GeminiModel",
    "build_config",
    "build_contents",
    "error_from_api",
    "usage_from_metadata",
]

PROVIDER = "gemini"
StopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal"]

_REFUSALS = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)
_BUDGETS: dict[Effort, int] = {
    "minimal": 0,
    "low": 1024,
    "medium": 8192,
    "high": 24576,
    "max": 32768,
}
_CONTEXT_HINTS = re.compile(r"token count|too long|exceeds the maximum|context window", re.I)


class GeminiModel:
    """A Gemini model, streamed through ``client.aio.models.generate_content_stream``.

    Args:
        model: The model id, e.g. ``"gemini-2.5-flash"``.
        api_key: Defaults to the SDK's environment lookup (``GEMINI_API_KEY``,
            ``GOOGLE_API_KEY``).
        client: A ready ``genai.Client``; the other connection options are then ignored.
        http_client: An ``httpx2.AsyncClient`` for the SDK to use (tests inject
            a mock transport this way).
        transport: An ``httpx2`` transport for the SDK's own client (when no
            ``http_client`` is given).
        base_url: Another endpoint (a proxy or a loopback server).
        timeout: Seconds per request.
        retry: Retries of retryable errors; the SDK's own retries stay off.
    """

    @property
    def native_output(self) -> bool | Literal["without_tools"]:
        """A typed output goes as ``response_json_schema``; before Gemini 3, only without tools.

        Gemini 1.x and 2.x refuse a JSON answer together with function
        declarations, so an agent with tools gets its typed output from them
        through the final-answer tool.
        """
        if re.match(r"(models/)?gemini-[12](\.|-)", self.model):
            return "without_tools"
        return True

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        client: genai.Client | None = None,
        http_client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        retry: RetryPolicy = RetryPolicy(),
    ) -> None:
        self.model = model
        self.retry = retry
        if client is None:
            # retry_options stays None: the SDK then makes exactly one attempt.
            options = types.HttpOptions(
                api_version="v1beta",
                base_url=base_url,
                timeout=int(_timeout_seconds(timeout, http_client) * 1000),
                httpx_async_client=http_client,
                async_client_args=None if transport is None else {"transport": transport},
            )
            try:
                client = genai.Client(api_key=api_key, http_options=options)
            except ValueError as exc:
                raise ConfigError(
                    f"GeminiModel needs an API key (api_key= or GEMINI_API_KEY): {exc}"
                ) from exc
        self._client = client

    @property
    def name(self) -> str:
        """``"gemini:<model>"``."""
        return f"{PROVIDER}:{self.model}"

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the response, retrying retryable errors before the first event."""
        return retrying_stream(lambda: self._stream_once(request), self.retry)

    async def _stream_once(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        decoder = _Decoder(self.model, first_call=_count_calls(request.messages))
        # The SDK sends the request when the stream is first read, so the first
        # chunk is the first sign of the response this adapter can see.
        received = False
        try:
            chunks = await self._client.aio.models.generate_content_stream(
                model=self.model,
                contents=build_contents(request.messages),
                config=build_config(request, model=self.model),
            )
            try:
                async for chunk in chunks:
                    received = True
                    for event in decoder.feed(chunk):
                        yield event
            finally:
                aclose = getattr(chunks, "aclose", None)
                if aclose is not None:
                    await aclose()
        except genai_errors.APIError as exc:
            raise error_from_api(exc) from exc
        except (json.JSONDecodeError, ValidationError, genai_errors.UnknownApiResponseError) as exc:
            raise ModelOutputError(
                f"gemini: malformed stream chunk: {exc}", provider=PROVIDER, retryable=True
            ) from exc
        except Exception as exc:  # the HTTP library's own (httpx2's or aiohttp's)
            network = transport_error(exc, provider=PROVIDER, name="Gemini", received=received)
            if network is None:
                raise
            raise network from exc
        for event in decoder.finish():
            yield event


# ---------------------------------------------------------------- requests


def build_config(request: ModelRequest, *, model: str) -> types.GenerateContentConfig:
    """The ``GenerateContentConfig`` for a request; ``settings.extra`` is merged last."""
    settings = request.settings
    config: dict[str, object] = {}
    if request.system_text:
        config["system_instruction"] = request.system_text
    if settings.max_tokens is not None:
        config["max_output_tokens"] = settings.max_tokens
    if settings.temperature is not None:
        config["temperature"] = settings.temperature
    if request.tools:
        declarations = [
            types.FunctionDeclaration(
                name=t.name, description=t.description, parameters_json_schema=t.input_schema
            )
            for t in request.tools
        ]
        config["tools"] = [types.Tool(function_declarations=declarations)]
        if settings.tool_choice is not None:
            config["tool_config"] = _tool_config(settings.tool_choice)
    if settings.output_schema is not None:
        config["response_mime_type"] = "application/json"
        config["response_json_schema"] = settings.output_schema
    if settings.effort is not None:
        config["thinking_config"] = thinking_config(model, settings.effort)
    config.update(settings.extra)
    return types.GenerateContentConfig.model_validate(config)


def _tool_config(choice: str) -> types.ToolConfig:
    mode = {"auto": "AUTO", "none": "NONE", "required": "ANY"}.get(choice)
    names = None if mode else [choice]
    return types.ToolConfig(
        function_calling_config=types.FunctionCallingConfig(
            mode=types.FunctionCallingConfigMode(mode or "ANY"), allowed_function_names=names
        )
    )


def thinking_config(model: str, effort: Effort) -> types.ThinkingConfig:
    """Map the neutral effort to Gemini's thinking controls.

    Gemini 3 takes a ``thinking_level`` (Pro knows only LOW and HIGH); Gemini
    2.5 takes a token budget, where Pro cannot switch thinking off (minimum
    128) and Flash tops out at 24576.
    """
    pro = "pro" in model
    if model.startswith("gemini-3"):
        if pro:
            level = "LOW" if effort in ("minimal", "low") else "HIGH"
        else:
            level = {"max": "HIGH"}.get(effort, effort.upper())
        return types.ThinkingConfig(
            include_thoughts=True, thinking_level=types.ThinkingLevel(level)
        )
    budget = _BUDGETS[effort]
    if pro:
        budget = max(budget, 128)
    else:
        budget = min(budget, 24576)
    return types.ThinkingConfig(include_thoughts=budget > 0, thinking_budget=budget)


def build_contents(messages: Sequence[Message]) -> list[types.Content]:
    """Gemini ``contents`` for neutral messages; adjacent turns of one role are merged."""
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    contents: list[types.Content] = []
    for message in messages:
        if message.role == "assistant":
            role, parts = "model", _model_parts(message)
        else:
            role, parts = "user", _user_parts(message, names)
        if not parts:
            continue
        if contents and contents[-1].role == role:
            contents[-1].parts = [*(contents[-1].parts or []), *parts]
        else:
            contents.append(types.Content(role=role, parts=parts))
    return contents


def _user_parts(message: Message, names: Mapping[str, str]) -> list[types.Part]:
    parts: list[types.Part] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append(types.Part(text=part.text))
        elif isinstance(part, ImagePart):
            parts.append(_image(part))
        elif isinstance(part, ToolResultPart):
            key = "error" if part.is_error else "return_value"
            parts.append(
                types.Part(
                    function_response=types.FunctionResponse(
                        id=part.tool_use_id,
                        name=part.name or names.get(part.tool_use_id, ""),
                        response={key: part.content},
                    )
                )
            )
            parts.extend(_image(image) for image in part.images)
    return parts


def _model_parts(message: Message) -> list[types.Part]:
    parts: list[types.Part] = []
    pending: ThinkingPart | None = None
    for part in message.parts:
        if isinstance(part, ThinkingPart):
            if part.provider != PROVIDER or part.signature is None:
                continue  # another provider's reasoning, or a summary without a signature
            if pending is not None:
                parts.append(_thought(pending))
            pending = part
            continue
        signature = None if pending is None else _decode(pending.signature)
        if isinstance(part, TextPart):
            parts.append(types.Part(text=part.text, thought_signature=signature))
        elif isinstance(part, ToolCallPart):
            call = types.FunctionCall(id=part.id, name=part.name, args=dict(part.arguments))
            parts.append(types.Part(function_call=call, thought_signature=signature))
        elif isinstance(part, ImagePart):
            parts.append(_image(part))
            continue
        else:
            continue
        pending = None
    if pending is not None:
        parts.append(_thought(pending))
    return parts


def _thought(part: ThinkingPart) -> types.Part:
    return types.Part(
        text=part.text, thought=bool(part.text) or None, thought_signature=_decode(part.signature)
    )


def _image(part: ImagePart) -> types.Part:
    if part.data is not None:
        return types.Part(
            inline_data=types.Blob(mime_type=part.media_type, data=base64.b64decode(part.data))
        )
    return types.Part(file_data=types.FileData(file_uri=part.url, mime_type=part.media_type))


def _decode(signature: str | None) -> bytes | None:
    # Accept both alphabets: the API answers standard base64, the SDK sends url-safe.
    return None if signature is None else base64.b64decode(signature, altchars=b"-_")


def _count_calls(messages: Sequence[Message]) -> int:
    return sum(len(m.tool_calls) for m in messages)


# ---------------------------------------------------------------- responses


def usage_from_metadata(metadata: Mapping[str, JsonValue] | None) -> Usage:
    """Normalize a wire ``usageMetadata`` (camelCase keys) to :class:`Usage`."""
    if not metadata:
        return Usage(requests=1)

    def count(key: str) -> int:
        value = metadata.get(key)
        return value if isinstance(value, int) else 0

    cached = count("cachedContentTokenCount")
    thoughts = count("thoughtsTokenCount")
    prompt = count("promptTokenCount") + count("toolUsePromptTokenCount")
    return Usage(
        input_tokens=max(prompt - cached, 0),
        cache_read_tokens=cached,
        output_tokens=count("candidatesTokenCount") + thoughts,
        reasoning_tokens=thoughts,
        requests=1,
    )


class _Decoder:
    """Turns ``GenerateContentResponse`` chunks into neutral events."""

    def __init__(self, model: str, *, first_call: int) -> None:
        self.model = model
        self.next_call = first_call
        self.calls = 0
        self.thinking: list[str] | None = None
        self.thinking_signature: str | None = None
        self.usage: Mapping[str, JsonValue] | None = None
        self.finish_reason: str | None = None
        self.blocked = False

    def feed(self, chunk: types.GenerateContentResponse) -> Iterator[ModelEvent]:
        if chunk.model_version:
            self.model = chunk.model_version
        if chunk.usage_metadata is not None:
            self.usage = chunk.usage_metadata.model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
        if not chunk.candidates:
            if chunk.prompt_feedback is not None and chunk.prompt_feedback.block_reason:
                self.blocked = True
            return
        candidate = chunk.candidates[0]
        if candidate.content is not None:
            for part in candidate.content.parts or ():
                yield from self._part(part)
        if candidate.finish_reason is not None:
            self.finish_reason = candidate.finish_reason.value

    def _part(self, part: types.Part) -> Iterator[ModelEvent]:
        signature = _encode(part.thought_signature)
        if part.thought:
            if signature is not None and self.thinking_signature is not None:
                yield from self._close_thinking()
            if self.thinking is None:
                self.thinking = []
            self.thinking_signature = self.thinking_signature or signature
            if part.text:
                self.thinking.append(part.text)
                yield ThinkingDelta(text=part.text)
            return
        if self.thinking is not None:
            if self.thinking_signature is None:
                self.thinking_signature, signature = signature, None
            yield from self._close_thinking()
        if signature is not None:
            yield ThinkingDone(text="", signature=signature, provider=PROVIDER)
        if part.function_call is not None:
            yield from self._call(part.function_call)
        elif part.text:
            yield TextDelta(text=part.text)

    def _close_thinking(self) -> Iterator[ModelEvent]:
        text = "".join(self.thinking or ())
        yield ThinkingDone(text=text, signature=self.thinking_signature, provider=PROVIDER)
        self.thinking, self.thinking_signature = None, None

    def _call(self, call: types.FunctionCall) -> Iterator[ModelEvent]:
        call_id = call.id or f"call_{self.next_call}"
        name = call.name or ""
        arguments = json.dumps(call.args or {}, ensure_ascii=False)
        yield ToolCallDelta(tool_use_id=call_id, name=name, index=self.calls, args_delta=arguments)
        yield ToolCallEnd(tool_use_id=call_id, name=name, index=self.calls, arguments=arguments)
        self.calls += 1
        self.next_call += 1

    def finish(self) -> Iterator[ModelEvent]:
        if self.thinking is not None:
            yield from self._close_thinking()
        if self.finish_reason is None and not self.blocked:
            raise ModelOutputError(
                "gemini: the stream ended without a finishReason",
                provider=PROVIDER,
                retryable=True,
            )
        if self.finish_reason == "MALFORMED_FUNCTION_CALL":
            raise ModelOutputError(
                "gemini: the model produced a malformed function call",
                provider=PROVIDER,
                retryable=True,
            )
        yield ModelUsage(usage=usage_from_metadata(self.usage))
        yield ModelStop(stop_reason=self._stop_reason(), model=self.model)

    def _stop_reason(self) -> StopReason:
        if self.blocked or self.finish_reason in _REFUSALS:
            return "refusal"
        if self.finish_reason == "MAX_TOKENS":
            return "max_tokens"
        return "tool_use" if self.calls else "end_turn"


def _encode(signature: bytes | None) -> str | None:
    return None if signature is None else base64.b64encode(signature).decode("ascii")


# ---------------------------------------------------------------- errors


def error_from_api(exc: genai_errors.APIError) -> ModelError:
    """The typed mainspring error for an SDK ``APIError`` (keyed on its HTTP code)."""
    code = int(exc.code or 0)
    body = json.dumps(exc.details, default=str) if exc.details is not None else ""
    message = f"gemini: HTTP {code} {exc.status or ''}: {exc.message or ''}".rstrip(": ")
    if code == 504:  # the upstream gave up waiting: a timeout to retry
        return ModelTimeout(message, provider=PROVIDER, retryable=True)
    if code == 400 and "API_KEY_INVALID" in body:  # how Google reports a bad key
        return AuthenticationError(message, provider=PROVIDER, status=code, body=body)
    return http_error(
        code,
        message,
        provider=PROVIDER,
        body=body,
        retry_after=_retry_after(exc) if code == 429 else None,
        context_too_long=code == 400 and bool(_CONTEXT_HINTS.search(exc.message or "")),
    )


def _retry_after(exc: genai_errors.APIError) -> float | None:
    headers = getattr(exc.response, "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    if value is not None:
        try:
            return float(value)
        except ValueError:
            pass
    # Google puts the delay in the body: error.details[].retryDelay = "30s" (RetryInfo).
    error = exc.details.get("error") if isinstance(exc.details, dict) else None
    for detail in (error or {}).get("details", ()) if isinstance(error, dict) else ():
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return float(delay[:-1])
            except ValueError:
                pass
    return None


DEFAULT_TIMEOUT = 600.0


def _timeout_seconds(timeout: float | None, http_client: object) -> float:
    """The request timeout: given, else the client's own, else a default.

    Never none: the SDK sends its value on every request, overriding the client's.
    """
    if timeout is not None:
        return timeout
    client_timeout = getattr(getattr(http_client, "timeout", None), "read", None)
    return float(client_timeout) if client_timeout else DEFAULT_TIMEOUT
