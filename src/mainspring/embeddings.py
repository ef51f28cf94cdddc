"""Embeddings: the Embedder protocol, batching, and an offline embedder.

An :class:`Embedder` turns texts into vectors of a fixed length. Memory
stores record its :attr:`~Embedder.model_id` with every vector they keep: a
store opened with another embedder (another model, or other dimensions) sees
the change and embeds its texts again, so vectors of two models are never
compared with each other.

Implementations:

- :class:`HashingEmbedder` — offline, deterministic, no dependencies. **Not
  semantic**: it hashes words and character trigrams into a vector, so texts
  that share words or word pieces end up close, and synonyms do not. For tests,
  demos and as a lexical-ish fallback.
- :class:`mainspring.models.openai.embeddings.OpenAIEmbedder` — the
  ``openai`` SDK's embeddings endpoint (OpenAI and compatible servers: Ollama,
  vLLM, llama.cpp), extra ``openai``.
- :class:`mainspring.models.gemini_embeddings.GeminiEmbedder` — Gemini's
  ``embedContent`` through ``google-genai``, extra ``gemini``.

:func:`embed_batched` calls an embedder in batches of at most
:attr:`~Embedder.max_batch` texts and checks what comes back.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from mainspring.errors import ConfigError, ModelOutputError

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "Vector",
    "check_count",
    "cosine",
    "embed_batched",
]

Vector = list[float]
"""One embedding."""

_WORD = re.compile(r"[^\W_]+")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of :attr:`dimensions` floats."""

    @property
    def model_id(self) -> str:
        """Names the model and everything that changes its vectors (e.g. the dimensions)."""
        ...

    @property
    def dimensions(self) -> int:
        """The length of every vector."""
        ...

    @property
    def max_batch(self) -> int:
        """At most this many texts per :meth:`embed` call."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in order (at most :attr:`max_batch` texts).

        Raises:
            ModelError: The provider failed (typed like the chat adapters' errors).
        """
        ...


async def embed_batched(embedder: Embedder, texts: Sequence[str]) -> list[Vector]:
    """Every text's vector, asking ``embedder`` at most ``max_batch`` texts at a time.

    Cancelling it leaves nothing behind (it only reads).

    Raises:
        ModelOutputError: The embedder returned the wrong number of vectors, a
            vector of the wrong length, or a value that is not a finite number.
        ModelError: The provider failed.
    """
    size = max(1, int(embedder.max_batch))
    dimensions = embedder.dimensions
    vectors: list[Vector] = []
    for start in range(0, len(texts), size):
        batch = list(texts[start : start + size])
        got = await embedder.embed(batch)
        if len(got) != len(batch):
            raise ModelOutputError(
                f"embedder {embedder.model_id!r} returned {len(got)} vectors for"
                f" {len(batch)} texts",
                provider=embedder.model_id,
            )
        vectors.extend(_checked(embedder.model_id, dimensions, vector) for vector in got)
    return vectors


def _checked(model_id: str, dimensions: int, vector: Sequence[float]) -> Vector:
    if len(vector) != dimensions:
        raise ModelOutputError(
            f"embedder {model_id!r} returned a vector of {len(vector)} values, not {dimensions}",
            provider=model_id,
        )
    out = [float(x) for x in vector]
    if not all(math.isfinite(x) for x in out):
        raise ModelOutputError(
            f"embedder {model_id!r} returned a value that is not a finite number",
            provider=model_id,
        )
    return out


def check_count(what: str, value: object, *, minimum: int = 1) -> int:
    """``value`` if it is an integer of at least ``minimum``, else :class:`ConfigError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{what} must be an integer of at least {minimum}, not {value!r}")
    return value


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity (0 when either vector is all zeros)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


class HashingEmbedder:
    """Offline, deterministic vectors by feature hashing — **not a semantic model**.

    Each word (lower-cased, diacritics removed) and each character trigram of
    each word adds ±1 to one of :attr:`dimensions` buckets (BLAKE2b of the
    feature picks bucket and sign); the vector is then scaled to length 1.
    Texts that share words or word pieces ("deploy", "deploys") come out close;
    texts that mean the same in other words do not. Use a real model
    (:class:`~mainspring.models.openai.embeddings.OpenAIEmbedder`, Ollama, vLLM,
    Gemini) for recall by meaning.
    """

    def __init__(self, dimensions: int = 256, *, max_batch: int = 256) -> None:
        """Vectors of ``dimensions`` floats (at least 8).

        Raises:
            ConfigError: ``dimensions`` or ``max_batch`` is out of range.
        """
        self._dimensions = check_count("dimensions", dimensions, minimum=8)
        self._max_batch = check_count("max_batch", max_batch)

    @property
    def model_id(self) -> str:
        """``"hashing-v1/<dimensions>"``."""
        return f"hashing-v1/{self._dimensions}"

    @property
    def dimensions(self) -> int:
        """The vector length."""
        return self._dimensions

    @property
    def max_batch(self) -> int:
        """Texts per call (no limit matters offline; kept for the protocol)."""
        return self._max_batch

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """The vectors, computed here (microseconds per text; no I/O)."""
        return [self.embed_one(text) for text in texts]

    def embed_one(self, text: str) -> Vector:
        """One text's vector (all zeros when it has no words)."""
        vector = [0.0] * self._dimensions
        for word in _words(text):
            _add(vector, "w:" + word, 1.0)
            padded = f"<{word}>"
            for i in range(len(padded) - 2):
                _add(vector, "t:" + padded[i : i + 3], 0.5)
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector] if norm else vector


def _words(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKD", text.lower())
    if not folded.isascii():
        folded = "".join(c for c in folded if not unicodedata.combining(c))
    return _WORD.findall(folded)


def _add(vector: Vector, feature: str, weight: float) -> None:
    digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    number = int.from_bytes(digest, "little")
    index = number % len(vector)
    vector[index] += weight if (number >> 63) & 1 else -weight
