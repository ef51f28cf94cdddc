"""GeminiEmbedder: the Embedder protocol on Gemini's embeddings through ``google-genai``.

``client.aio.models.embed_content`` sends a batch of texts in one
``batchEmbedContents`` request; ``output_dimensionality`` shortens the vectors
(``gemini-embedding-001`` returns 3072 values unless told otherwise). Errors
are typed like :class:`~mainspring.models.gemini.GeminiModel`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from mainspring.embeddings import Vector, check_count
from mainspring.errors import ConfigError, ModelOutputError
from mainspring.models._transport import transport_error
from mainspring.models.gemini import PROVIDER, error_from_api
from mainspring.models.retry import RetryPolicy, retrying_call

try:
    import httpx2
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('GeminiEmbedder needs: pip install "mainspring[gemini]"') from exc

__all__ = ["GeminiEmbedder"]

_NATIVE = {"gemini-embedding-001": 3072, "text-embedding-004": 768}


class GeminiEmbedder:
    """Embeddings from the Gemini API.

    Args:
        model: The embedding model, e.g. ``"gemini-embedding-001"``.
        dimensions: The vector length (sent as ``output_dimensionality``);
            defaults to the model's native length when known.
        task_type: Gemini's ``task_type`` (``"RETRIEVAL_DOCUMENT"``,
            ``"SEMANTIC_SIMILARITY"``…); ``None`` sends none.
        api_key: Defaults to the SDK's environment lookup.
        client: A ready ``genai.Client``; the other connection options are then ignored.
        http_client: An ``httpx2.AsyncClient`` for the SDK to use.
        base_url: Another endpoint (a proxy or a loopback server).
        max_batch: Texts per request (the API takes up to 100).
        retry: Retries of retryable errors; the SDK's own retries stay off.
    """

    def __init__(
        self,
        model: str = "gemini-embedding-001",
        *,
        dimensions: int | None = None,
        task_type: str | None = None,
        api_key: str | None = None,
        client: genai.Client | None = None,
        http_client: httpx2.AsyncClient | None = None,
        base_url: str | None = None,
        max_batch: int = 100,
        retry: RetryPolicy = RetryPolicy(),
    ) -> None:
        size = dimensions if dimensions is not None else _NATIVE.get(model)
        if size is None:
            raise ConfigError(f"GeminiEmbedder({model!r}) needs dimensions=")
        max_batch = check_count("max_batch", max_batch)
        self._model = model
        self._dimensions = check_count("dimensions", size)
        self._task_type = task_type
        self._max_batch = max_batch
        self._retry = retry
        if client is None:
            options = types.HttpOptions(
                api_version="v1beta", base_url=base_url, httpx_async_client=http_client
            )
            try:
                client = genai.Client(api_key=api_key, http_options=options)
            except ValueError as exc:
                raise ConfigError(
                    f"GeminiEmbedder needs an API key (api_key= or GEMINI_API_KEY): {exc}"
                ) from exc
        self._client = client

    @property
    def model_id(self) -> str:
        """``"gemini:<model>/<dimensions>"`` (plus the task type when one is set)."""
        task = f"/{self._task_type}" if self._task_type else ""
        return f"{PROVIDER}:{self._model}/{self._dimensions}{task}"

    @property
    def dimensions(self) -> int:
        """The vector length."""
        return self._dimensions

    @property
    def max_batch(self) -> int:
        """Texts per request."""
        return self._max_batch

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in order. Safe to cancel.

        Raises:
            ModelError: The API failed or answered something else than vectors.
        """
        if not texts:
            return []
        return await retrying_call(lambda: self._once(list(texts)), self._retry)

    async def _once(self, texts: list[str]) -> list[Vector]:
        config = types.EmbedContentConfig(
            output_dimensionality=self._dimensions, task_type=self._task_type
        )
        try:
            response = await self._client.aio.models.embed_content(
                model=self._model, contents=list(texts), config=config
            )
        except genai_errors.APIError as exc:
            raise error_from_api(exc) from exc
        except Exception as exc:  # the HTTP library's own (httpx2's or aiohttp's)
            # One answer, not a stream: a network failure before it is whole leaves nothing.
            network = transport_error(exc, provider=PROVIDER, name="Gemini", received=False)
            if network is None:
                raise
            raise network from exc
        embeddings = response.embeddings or []
        if len(embeddings) != len(texts):
            raise ModelOutputError(
                f"gemini: {len(embeddings)} embeddings for {len(texts)} texts", provider=PROVIDER
            )
        vectors: list[Vector] = []
        for embedding in embeddings:
            if embedding.values is None:
                raise ModelOutputError("gemini: an embedding without values", provider=PROVIDER)
            vectors.append([float(x) for x in embedding.values])
        return vectors
