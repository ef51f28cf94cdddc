"""OpenAIEmbedder: the Embedder protocol on the ``/embeddings`` endpoint of the ``openai`` SDK.

Serves OpenAI itself and every server that speaks its dialect (Ollama, vLLM,
llama.cpp, LM Studio): point ``base_url`` at it. Vectors are asked for as
floats (``encoding_format="float"``), which every such server supports.
Failures are typed like the chat adapter's (:func:`map_openai_error`) and
retried by :class:`~mainspring.models.retry.RetryPolicy`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from mainspring.embeddings import Vector, check_count
from mainspring.errors import ConfigError, ModelOutputError
from mainspring.models.retry import RetryPolicy, retrying_call

try:
    import httpx2
    import openai
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('OpenAIEmbedder needs: pip install "mainspring[openai]"') from exc

from mainspring.models.openai.errors import map_openai_error

__all__ = ["KNOWN_DIMENSIONS", "OpenAIEmbedder"]

KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
"""Native vector lengths of OpenAI's models; any other model needs ``dimensions=``."""


class OpenAIEmbedder:
    """Embeddings from OpenAI or an OpenAI-compatible server."""

    def __init__(
        self,
        model: str,
        *,
        dimensions: int | None = None,
        shorten: bool = False,
        api_key: str | None = None,
        base_url: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        http_client: httpx2.AsyncClient | None = None,
        max_batch: int = 256,
        retry: RetryPolicy = RetryPolicy(),
        provider: str = "openai",
    ) -> None:
        """Create the adapter.

        Args:
            model: The embedding model (``"text-embedding-3-small"``, ``"nomic-embed-text"``…).
            dimensions: The vector length; needed unless the model is in
                :data:`KNOWN_DIMENSIONS`.
            shorten: Ask the server for ``dimensions`` values (the
                ``text-embedding-3`` models can shorten their vectors); without
                it ``dimensions`` is only checked against what comes back.
            api_key: Defaults to ``OPENAI_API_KEY``; a local server needs none.
            base_url: An OpenAI-compatible server, e.g. ``http://localhost:11434/v1``.
            client: A ready SDK client (its own retries are turned off).
            http_client: The ``httpx2`` client the SDK should use (tests, proxies).
            max_batch: Texts per request.
            retry: Retries with backoff for retryable failures.
            provider: The server's name in errors and :attr:`model_id`.

        Raises:
            ConfigError: No API key for OpenAI itself, or unknown dimensions.
        """
        size = dimensions if dimensions is not None else KNOWN_DIMENSIONS.get(model)
        if size is None:
            raise ConfigError(
                f"OpenAIEmbedder({model!r}) needs dimensions=: "
                "the length of the vectors that model returns"
            )
        self._model = model
        self._dimensions = check_count("dimensions", size)
        max_batch = check_count("max_batch", max_batch)
        self._shorten = shorten
        self._max_batch = max_batch
        self._retry = retry
        self._provider = provider
        if client is not None:
            self._client = client.with_options(max_retries=0)
        else:
            key = api_key or os.environ.get("OPENAI_API_KEY")
            if key is None and base_url is None:
                raise ConfigError("OpenAIEmbedder needs api_key or OPENAI_API_KEY")
            self._client = openai.AsyncOpenAI(
                api_key=key or "unused", base_url=base_url, http_client=http_client, max_retries=0
            )

    @property
    def model_id(self) -> str:
        """``"<provider>:<model>/<dimensions>"``."""
        return f"{self._provider}:{self._model}/{self._dimensions}"

    @property
    def dimensions(self) -> int:
        """The vector length."""
        return self._dimensions

    @property
    def max_batch(self) -> int:
        """Texts per request."""
        return self._max_batch

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in the order given (the server's ``index`` decides).

        Safe to cancel: nothing is left behind.

        Raises:
            ModelError: The server failed or answered something else than vectors.
        """
        if not texts:
            return []
        return await retrying_call(lambda: self._once(list(texts)), self._retry)

    async def _once(self, texts: list[str]) -> list[Vector]:
        kwargs: dict[str, Any] = {}
        if self._shorten:
            kwargs["dimensions"] = self._dimensions
        try:
            response = await self._client.embeddings.create(
                model=self._model, input=texts, encoding_format="float", **kwargs
            )
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            raise map_openai_error(exc, self._provider) from exc
        vectors: list[Vector | None] = [None] * len(texts)
        for item in response.data:
            index = item.index
            if not 0 <= index < len(texts) or not isinstance(item.embedding, list):
                raise ModelOutputError(
                    f"{self._provider}: embeddings answer has an item at index {index}"
                    f" for {len(texts)} texts",
                    provider=self._provider,
                )
            vectors[index] = [float(x) for x in item.embedding]
        if any(v is None for v in vectors):
            raise ModelOutputError(
                f"{self._provider}: embeddings answer lacks a vector for some texts",
                provider=self._provider,
            )
        return [v for v in vectors if v is not None]
