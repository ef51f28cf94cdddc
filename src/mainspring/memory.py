"""Long-term memory: the MemoryStore protocol and its in-memory implementation.

A memory store keeps short texts an agent chose to remember and recalls the
ones that best match a query, by keyword::

    store = InMemoryMemoryStore()
    await store.remember("the user prefers metric units", scope="user-42")
    items = await store.recall("which units?", scope="user-42")

``scope`` lets one store serve many users or agents: recall and forget never
cross scopes. Implementations: :class:`InMemoryMemoryStore` (tests, one
process) and :class:`mainspring.stores.sqlite_memory.SQLiteMemoryStore`
(SQLite FTS5, durable). The ``check_*`` helpers and :func:`words` are the
argument rules every implementation shares, so they reject the same misuse
with the same :class:`~mainspring.errors.ConfigError`.
"""

from __future__ import annotations

import json
import math
import re
import time
import unicodedata
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, Self, runtime_checkable

from pydantic import JsonValue

from mainspring.errors import ConfigError

__all__ = [
    "DEFAULT_SCOPE",
    "InMemoryMemoryStore",
    "MemoryItem",
    "MemoryStore",
    "check_k",
    "check_memory_text",
    "check_meta",
    "check_query",
    "check_scope",
    "check_str",
    "words",
]

DEFAULT_SCOPE = "default"
"""The scope used when the caller names none."""

_WORD = re.compile(r"[^\W_]+")
"""A run of letters and digits: what SQLite's ``unicode61`` tokenizer calls a token."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryItem:
    """One remembered text, as stored or as recalled."""

    id: str
    """Store-assigned identifier, for :meth:`MemoryStore.forget`."""
    text: str
    """The remembered text, exactly as given."""
    score: float = 0.0
    """Relevance to the recall query (higher is better); 0 when not recalled."""
    meta: dict[str, JsonValue] = field(default_factory=dict[str, JsonValue])
    """Caller data stored with the text, as it reads back from JSON."""
    created_at: float
    """Wall-clock seconds (``time.time``) when it was remembered."""


@runtime_checkable
class MemoryStore(Protocol):
    """Texts remembered per scope, recalled by keyword relevance."""

    async def remember(
        self,
        text: str,
        *,
        scope: str = DEFAULT_SCOPE,
        meta: Mapping[str, JsonValue] | None = None,
    ) -> MemoryItem:
        """Store ``text`` (with optional JSON ``meta``) in ``scope``; durable when it returns.

        Raises:
            ConfigError: ``text`` is not a non-blank string of valid Unicode, ``scope``
                is not a non-empty string, or ``meta`` is not a JSON object.
        """
        ...

    async def recall(
        self, query: str, *, k: int = 5, scope: str = DEFAULT_SCOPE
    ) -> Sequence[MemoryItem]:
        """At most ``k`` items of ``scope`` that share a word with ``query``, best first.

        Ties go to the newer item, then the smaller id. A query without words
        (empty, blank, punctuation) recalls nothing.

        Raises:
            ConfigError: ``k`` is not a positive integer, or ``query`` is not a string.
        """
        ...

    async def forget(self, item_id: str, *, scope: str = DEFAULT_SCOPE) -> bool:
        """Delete the item; ``False`` if ``scope`` holds no item with that id."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


# ----------------------------------------------------------------- argument rules


def check_str(what: str, value: object) -> str:
    """``value`` if it is a string SQLite can store (no lone surrogates), else ConfigError."""
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a str, not {type(value).__name__}")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise ConfigError(f"{what} {value!r} is not valid Unicode text") from None
    return value


def check_memory_text(text: object) -> str:
    """The text to remember: a non-blank string of valid Unicode (NUL characters are kept)."""
    text = check_str("text", text)
    if not text.strip():
        raise ConfigError("text to remember must not be empty or blank")
    return text


def check_query(query: object) -> str:
    """A recall query: any string (what is not a word is ignored, lone surrogates too)."""
    if not isinstance(query, str):
        raise ConfigError(f"query must be a str, not {type(query).__name__}")
    return query


def check_scope(scope: object) -> str:
    """A scope: a non-empty string."""
    scope = check_str("scope", scope)
    if not scope:
        raise ConfigError("scope must not be empty")
    return scope


def check_k(k: object) -> int:
    """The number of items to recall: a positive integer."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"k must be a positive integer (items to recall), not {k!r}")
    return k


def check_meta(meta: object) -> tuple[dict[str, JsonValue], str]:
    """``meta`` as JSON text and as it reads back from it (a deep copy).

    Non-string keys become strings, as JSON has it.
    """
    if meta is None:
        return {}, "{}"
    if not isinstance(meta, Mapping):
        raise ConfigError(f"meta must be a mapping, not {type(meta).__name__}")
    try:
        # ASCII-escaped: any Python string (even a lone surrogate) round-trips.
        encoded = json.dumps(dict(meta), separators=(",", ":"))
        decoded: dict[str, JsonValue] = json.loads(encoded)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ConfigError(f"meta must be JSON-serializable: {exc}") from exc
    return decoded, encoded


def words(text: str) -> list[str]:
    """The lower-cased word tokens of ``text``, diacritics removed, in order.

    A word is a run of letters and digits; everything else separates words.
    """
    folded = unicodedata.normalize("NFKD", text.lower())
    if not folded.isascii():
        folded = "".join(c for c in folded if not unicodedata.combining(c))
    return _WORD.findall(folded)


# ---------------------------------------------------------------------- in memory

_K1 = 1.2
_B = 0.75


@dataclass(slots=True)
class _Entry:
    item: MemoryItem
    meta: str
    """JSON text: each item handed out gets its own copy."""
    counts: Counter[str]
    length: int

    def copy(self, score: float = 0.0) -> MemoryItem:
        meta: dict[str, JsonValue] = json.loads(self.meta)
        return replace(self.item, meta=meta, score=score)


@dataclass(slots=True)
class _Scope:
    """One scope's items and its inverted index (word → ids of items holding it)."""

    entries: dict[str, _Entry] = field(default_factory=dict[str, _Entry])
    postings: dict[str, set[str]] = field(default_factory=dict[str, set[str]])
    total_length: int = 0

    def add(self, item: MemoryItem, meta: str) -> _Entry:
        counts = Counter(words(item.text))
        length = sum(counts.values())
        entry = self.entries[item.id] = _Entry(item, meta, counts, length)
        self.total_length += length
        for word in counts:
            self.postings.setdefault(word, set()).add(item.id)
        return entry

    def remove(self, item_id: str) -> bool:
        entry = self.entries.pop(item_id, None)
        if entry is None:
            return False
        self.total_length -= entry.length
        for word in entry.counts:
            ids = self.postings[word]
            ids.discard(item_id)
            if not ids:
                del self.postings[word]
        return True

    def scores(self, query: list[str]) -> dict[str, float]:
        """BM25 score of every item holding at least one query word."""
        n = len(self.entries)
        average = max(self.total_length / n, 1.0) if n else 1.0
        scores: dict[str, float] = {}
        for word in dict.fromkeys(query):  # each distinct word once, in order
            ids = self.postings.get(word)
            if not ids:
                continue
            idf = math.log(1.0 + (n - len(ids) + 0.5) / (len(ids) + 0.5))
            for item_id in ids:
                entry = self.entries[item_id]
                tf = entry.counts[word]
                norm = tf + _K1 * (1.0 - _B + _B * entry.length / average)
                scores[item_id] = scores.get(item_id, 0.0) + idf * tf * (_K1 + 1.0) / norm
        return scores


class InMemoryMemoryStore:
    """Memories in a dict per scope, ranked by BM25 over :func:`words`; for tests and demos.

    Every operation completes without awaiting, so concurrent tasks see each
    other's writes whole. Nothing survives the process.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        """An empty store; ``clock`` stamps :attr:`MemoryItem.created_at`."""
        self._clock = clock
        self._scopes: dict[str, _Scope] = {}

    async def remember(
        self,
        text: str,
        *,
        scope: str = DEFAULT_SCOPE,
        meta: Mapping[str, JsonValue] | None = None,
    ) -> MemoryItem:
        """Store ``text`` in ``scope`` (see :meth:`MemoryStore.remember`)."""
        text = check_memory_text(text)
        scope = check_scope(scope)
        _, meta_json = check_meta(meta)
        item = MemoryItem(id=uuid.uuid4().hex, text=text, created_at=self._clock())
        return self._scopes.setdefault(scope, _Scope()).add(item, meta_json).copy()

    async def recall(
        self, query: str, *, k: int = 5, scope: str = DEFAULT_SCOPE
    ) -> Sequence[MemoryItem]:
        """The best ``k`` matches in ``scope`` (see :meth:`MemoryStore.recall`)."""
        query = check_query(query)
        k = check_k(k)
        scope = check_scope(scope)
        found = self._scopes.get(scope)
        terms = words(query)
        if found is None or not terms:
            return []
        scores = found.scores(terms)
        ranked = sorted(
            scores.items(),
            key=lambda pair: (-pair[1], -found.entries[pair[0]].item.created_at, pair[0]),
        )
        return [found.entries[item_id].copy(score) for item_id, score in ranked[:k]]

    async def forget(self, item_id: str, *, scope: str = DEFAULT_SCOPE) -> bool:
        """Delete the item from ``scope``; ``False`` if it is not there."""
        item_id = check_str("item_id", item_id)
        scope = check_scope(scope)
        found = self._scopes.get(scope)
        if found is None or not found.remove(item_id):
            return False
        if not found.entries:
            del self._scopes[scope]
        return True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Nothing to release."""
