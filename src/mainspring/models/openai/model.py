"""OpenAIChatModel: the Model protocol on the Chat Completions API."""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any, cast

import anyio.to_thread
import httpx2
import openai
from openai.types.chat import ChatCompletionChunk

from mainspring.errors import (
    ConfigError,
    ModelOutputError,
)
from mainspring.models.base import (
    ModelEvent,
    ModelRequest,
    ModelStop,
    ModelUsage,
)
from mainspring.models.openai.convert import ToolImages, build_chat_request
from mainspring.models.openai.errors import map_openai_error
from mainspring.models.openai.estimate import estimate_usage
from mainspring.models.openai.stream import ChunkReader, stop_reason
from mainspring.models.retry import RetryPolicy, retrying_stream

__all__ = ["OpenAIChatModel"]

_DEFAULT_RETRY = RetryPolicy()

_SDK_KEYS = ("model", "messages", "stream", "stream_options")


def _sdk_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    kwargs = {k: body[k] for k in _SDK_KEYS}
    kwargs["extra_body"] = {k: v for k, v in body.items() if k not in _SDK_KEYS}
    return kwargs


class OpenAIChatModel:
    """A model served by the OpenAI Chat Completions API or a compatible server."""

    native_output = True
    """A typed output goes as ``response_format`` (``json_schema``), with the tools
    still offered (compatible servers such as Ollama and vLLM take it too)."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        http_client: httpx2.AsyncClient | None = None,
        retry: RetryPolicy = _DEFAULT_RETRY,
        provider: str = "openai",
        tool_images: ToolImages = "follow",
    ) -> None:
        """Create the adapter.

        Args:
            model: The model id sent in each request (``"gpt-4o"``, ``"llama3.2"``…).
            api_key: Defaults to ``OPENAI_API_KEY``; a local server with ``base_url``
                needs none.
            base_url: An OpenAI-compatible server, e.g. ``http://localhost:11434/v1``.
            client: A ready SDK client (its own retries are turned off).
            http_client: The ``httpx2`` client the SDK should use (tests, proxies).
            retry: Retries with backoff for retryable failures.
            provider: The server's name in usage, errors and thinking parts.
            tool_images: A tool result's images: ``"follow"`` sends them in a user
                message after the tool messages (Chat tool messages carry text
                only); ``"note"`` tells the model they were left out (a server or
                model without image input).

        Raises:
            ConfigError: No API key for OpenAI itself.
        """
        self._model = model
        self._provider = provider
        self._tool_images: ToolImages = tool_images
        self._retry = retry
        if client is not None:
            self._client = client.with_options(max_retries=0)
        else:
            key = api_key or os.environ.get("OPENAI_API_KEY")
            if key is None and base_url is None:
                raise ConfigError("OpenAIChatModel needs api_key or OPENAI_API_KEY")
            self._client = openai.AsyncOpenAI(
                api_key=key or "unused",
                base_url=base_url,
                http_client=http_client,
                max_retries=0,
            )
        self._openrouter = provider == "openrouter" or "openrouter.ai" in str(self._client.base_url)

    @property
    def name(self) -> str:
        """``"<provider>:<model>"``."""
        return f"{self._provider}:{self._model}"

    @property
    def provider(self) -> str:
        """The server's name in usage, errors and thinking parts."""
        return self._provider

    def build_request(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body this model sends for ``request``."""
        return build_chat_request(
            self._model,
            request,
            provider=self._provider,
            openrouter=self._openrouter,
            tool_images=self._tool_images,
        )

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one completion, retrying retryable failures before the first event."""
        body = self.build_request(request)
        return retrying_stream(lambda: self._attempt(body), self._retry)

    async def _attempt(self, body: dict[str, Any]) -> AsyncIterator[ModelEvent]:
        reader = ChunkReader(provider=self._provider, new_call_id=_new_call_id)
        received = False  # the status line came back: a network failure now breaks a stream
        try:
            stream = cast(
                "openai.AsyncStream[ChatCompletionChunk]",
                # Fields the SDK has no parameter for (dialect extras) go in extra_body.
                await self._client.chat.completions.create(**_sdk_kwargs(body)),
            )
            received = True
            async with stream:
                async for chunk in stream:
                    for event in reader.read(chunk):
                        yield event
        except (openai.OpenAIError, httpx2.HTTPError, OSError, ValueError) as exc:
            error = map_openai_error(exc, self._provider, received=received)
            if reader.emitted:  # not retried: what the call spent is the caller's to count
                yield await self._usage(reader, body)
            raise error from exc
        if reader.finish is None:
            if reader.emitted:
                yield await self._usage(reader, body)
            raise ModelOutputError(
                f"{self._provider} stream ended without a finish_reason",
                provider=self._provider,
                retryable=True,
            )
        for event in reader.end_calls():
            yield event
        yield await self._usage(reader, body)
        reason = (
            "refusal"
            if reader.refused
            else stop_reason(reader.finish, has_tool_calls=reader.had_calls)
        )
        yield ModelStop(stop_reason=reason, model=reader.model or self._model)

    async def _usage(self, reader: ChunkReader, body: dict[str, Any]) -> ModelUsage:
        """The usage the stream reported last, else one request estimated offline."""
        if reader.usage is not None:
            return ModelUsage(usage=reader.usage)
        count = functools.partial(
            estimate_usage,
            body,
            (*reader.output, *(t for c in reader.calls.values() for t in (c.name, *c.args))),
            model=str(body["model"]),
            provider=self._provider,
        )
        # A tiktoken encoding loads its BPE file on first use: not on the event loop.
        return ModelUsage(usage=await anyio.to_thread.run_sync(count), estimated=True)


def _new_call_id() -> str:
    # Unique across processes too: a session resumed elsewhere must never see a
    # second call with an id it already has (ids key the write ledger).
    return f"call_{uuid.uuid4().hex[:16]}"
