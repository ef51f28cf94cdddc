"""Long-term memory: the MemoryStore protocol and its in-memory implementation.

A memory store keeps short texts an agent chose to remember and recalls the
ones that best match a query, by keyword and, given an
:class:`~mainspring.embeddings.Embedder`, by meaning too::

    store = InMemoryMemoryStore(embedder=HashingEmbedder())
    await store.remember("the user prefers metric units", scope="user-42")
    items = await store.recall("which units?", scope="user-42")

``scope`` lets one store serve many users or agents (it is the namespace):
recall and forget never cross scopes. ``where`` filters on the items' ``meta``.

Recall is hybrid when the store has an embedder: the full-text ranking and the
nearest vectors are fused by reciprocal rank (:func:`fuse`); an item found by
both ranks above one found by either alone. Without an embedder recall is
full-text only. An embedder that fails is logged and counted
(``embed_failures``) and recall goes on by full text; an item remembered while
it failed gets its vector when the store is opened again (or on ``reindex``).

Implementations: :class:`InMemoryMemoryStore` (tests, one process),
:class:`mainspring.stores.sqlite_memory.SQLiteMemoryStore` (SQLite FTS5 and
sqlite-vec, durable) and :class:`mainspring.stores.postgres_memory.PostgresMemoryStore`
(full-text search and pgvector in one query). The ``check_*`` helpers and
:func:`words` are the argument rules every implementation shares, so they
reject the same misuse with the same :class:`~mainspring.errors.ConfigError`.

:class:`MemoryWriter` remembers in the background: a turn hands it a text and
goes on; a store that fails or hangs is logged, counted and timed out.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
import unicodedata
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol, Self, runtime_checkable

import anyio

from mainspring._lowlevel.json_value import JsonValue
from mainspring.errors import ConfigError

if TYPE_CHECKING:
    from mainspring.embeddings import Embedder, Vector

__all__ = [
    "DEFAULT_SCOPE",
    "RRF_K",
    "InMemoryMemoryStore",
    "MemoryItem",
    "MemoryStore",
    "MemoryWriter",
    "Where",
    "candidates",
    "check_k",
    "check_memory_text",
    "check_meta",
    "check_query",
    "check_scope",
    "check_str",
    "check_where",
    "fuse",
    "meta_matches",
    "words",
]

log = logging.getLogger("mainspring.memory")

DEFAULT_SCOPE = "default"
"""The scope used when the caller names none."""

RRF_K = 60
"""The constant of reciprocal-rank fusion: an item at rank r scores ``1 / (RRF_K + r)``."""

Where = tuple[tuple[str, str], ...]
"""A checked metadata filter: (key, the JSON text its value must have), all must hold."""

_WHERE_KEY = re.compile(r"^[A-Za-z0-9_]{1,64}$")

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
    meta: dict[str, JsonValue] = field(default_factory=dict)
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
        self,
        query: str,
        *,
        k: int = 5,
        scope: str = DEFAULT_SCOPE,
        where: Mapping[str, JsonValue] | None = None,
    ) -> Sequence[MemoryItem]:
        """At most ``k`` items of ``scope`` that match ``query``, best first.

        Without an embedder an item matches when it shares a word with the
        query; with one, items near it in meaning match too (fused by
        :func:`fuse`). ``where`` keeps only items whose ``meta`` has each key at
        the given value (see :func:`check_where`). Ties go to the newer item,
        then the smaller id. A query without words (empty, blank, punctuation)
        recalls nothing.

        Raises:
            ConfigError: ``k`` is not a positive integer, ``query`` is not a
                string, or ``where`` is not a filter :func:`check_where` accepts.
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


def check_where(where: object) -> Where:
    """A metadata filter: a mapping of keys to scalar values (str, int, bool or ``None``).

    An item matches when its ``meta`` has, for every key, a value whose JSON
    text equals the filter value's (so ``1``, ``1.0`` and ``true`` differ; a
    missing key matches ``None``). Keys are 1-64 letters, digits or ``_``.
    """
    if where is None:
        return ()
    if not isinstance(where, Mapping):
        raise ConfigError(f"where must be a mapping of meta keys to values, not {type(where)}")
    pairs: list[tuple[str, str]] = []
    for key, value in where.items():
        if not isinstance(key, str) or not _WHERE_KEY.fullmatch(key):
            raise ConfigError(f"where key {key!r} must be 1-64 letters, digits or '_'")
        if value is not None and not isinstance(value, str | int | bool):
            raise ConfigError(
                f"where[{key!r}] must be a str, int, bool or None, not {type(value).__name__}"
            )
        if isinstance(value, str):
            check_str(f"where[{key!r}]", value)
        pairs.append((key, json.dumps(value)))
    return tuple(sorted(pairs))


def meta_matches(meta: Mapping[str, JsonValue], where: Where) -> bool:
    """Whether ``meta`` (as it reads back from JSON) passes the filter."""
    return all(json.dumps(meta.get(key), separators=(",", ":")) == value for key, value in where)


def candidates(k: int) -> int:
    """How many items each ranking contributes to a fused recall of ``k`` items."""
    return min(max(4 * k, 40), 4096)


def fuse(rankings: Iterable[Sequence[str]], *, rrf_k: int = RRF_K) -> dict[str, float]:
    """Reciprocal-rank fusion: each id's sum of ``1 / (rrf_k + rank)`` over the rankings.

    Ranks start at 1; an id missing from a ranking gets nothing from it.
    """
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item_id in enumerate(ranking, start=1):
            scores[item_id] = scores.get(item_id, 0.0) + 1.0 / (rrf_k + rank)
    return scores


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
    vector: Vector | None = None

    def copy(self, score: float = 0.0) -> MemoryItem:
        meta: dict[str, JsonValue] = json.loads(self.meta)
        return replace(self.item, meta=meta, score=score)


@dataclass(slots=True)
class _Scope:
    """One scope's items and its inverted index (word → ids of items holding it)."""

    entries: dict[str, _Entry] = field(default_factory=dict)
    postings: dict[str, set[str]] = field(default_factory=dict)
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

    def ranked(self, scores: Mapping[str, float]) -> list[str]:
        """Ids by score, then newer first, then smaller id."""
        return sorted(scores, key=lambda i: (-scores[i], -self.entries[i].item.created_at, i))


class InMemoryMemoryStore:
    """Memories in a dict per scope, ranked by BM25 over :func:`words`; for tests and demos.

    With an ``embedder``, each item's vector is kept beside it and recall fuses
    BM25 with a brute-force cosine ranking. Without one, every operation
    completes without awaiting, so concurrent tasks see each other's writes
    whole. Nothing survives the process.
    """

    def __init__(
        self, *, embedder: Embedder | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        """An empty store; ``clock`` stamps :attr:`MemoryItem.created_at`."""
        self._clock = clock
        self._embedder = embedder
        self._scopes: dict[str, _Scope] = {}
        self.embed_failures = 0
        """Embedder calls that failed (the item was kept, recall went on by keyword)."""

    async def _vector(self, text: str) -> Vector | None:
        if self._embedder is None:
            return None
        from mainspring.embeddings import embed_batched

        try:
            (vector,) = await embed_batched(self._embedder, [text])
        except Exception:
            self.embed_failures += 1
            log.warning("embedding failed; going on by full text only", exc_info=True)
            return None
        return vector

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
        vector = await self._vector(text)
        item = MemoryItem(id=uuid.uuid4().hex, text=text, created_at=self._clock())
        entry = self._scopes.setdefault(scope, _Scope()).add(item, meta_json)
        entry.vector = vector
        return entry.copy()

    async def recall(
        self,
        query: str,
        *,
        k: int = 5,
        scope: str = DEFAULT_SCOPE,
        where: Mapping[str, JsonValue] | None = None,
    ) -> Sequence[MemoryItem]:
        """The best ``k`` matches in ``scope`` (see :meth:`MemoryStore.recall`)."""
        query = check_query(query)
        k = check_k(k)
        scope = check_scope(scope)
        filters = check_where(where)
        terms = words(query)
        if not terms or scope not in self._scopes:
            return []
        vector = await self._vector(query)
        found = self._scopes.get(scope)
        if found is None:  # forgotten while the query was embedded
            return []
        keep = (
            {i for i, e in found.entries.items() if meta_matches(json.loads(e.meta), filters)}
            if filters
            else None
        )
        scores = found.scores(terms)
        if keep is not None:
            scores = {i: v for i, v in scores.items() if i in keep}
        if vector is None:
            return [found.entries[i].copy(scores[i]) for i in found.ranked(scores)[:k]]
        lexical = found.ranked(scores)[: candidates(k)]
        from mainspring.embeddings import cosine

        near = {
            i: cosine(vector, e.vector)
            for i, e in found.entries.items()
            if e.vector is not None and (keep is None or i in keep)
        }
        semantic = found.ranked(near)[: candidates(k)]
        fused = fuse([lexical, semantic])
        return [found.entries[i].copy(fused[i]) for i in found.ranked(fused)[:k]]

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


# ------------------------------------------------------------------- background


def _positive_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and value > 0


class MemoryWriter:
    """Remembers in the background, so a turn never waits for (or fails with) the store.

    ::

        writer = MemoryWriter(store, timeout=10.0)
        writer.remember("the user prefers metric units", scope="user-42")  # returns at once
        ...
        with anyio.move_on_after(5):
            await writer.drain()  # before shutting down: let the pending writes finish

    Each text is written by a task of its own, bounded by ``timeout``; a write
    that fails or times out is logged and counted in :attr:`failures`, never
    raised. At most ``max_pending`` writes are in flight: beyond that a text is
    dropped (counted in :attr:`dropped`) rather than queued without bound.
    """

    def __init__(self, store: MemoryStore, *, timeout: float = 10.0, max_pending: int = 64) -> None:
        """A writer for ``store``.

        Raises:
            ConfigError: ``timeout`` is not positive, or ``max_pending`` not a positive integer.
        """
        if not _positive_number(timeout):
            raise ConfigError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self._store = store
        self._timeout = float(timeout)
        self._max_pending = check_k(max_pending)
        self.pending = 0
        """Writes started and not finished."""
        self.written = 0
        """Writes that finished."""
        self.failures = 0
        """Writes that raised or timed out."""
        self.dropped = 0
        """Texts refused because ``max_pending`` writes were in flight."""
        self._idle: anyio.Event | None = None

    def remember(
        self,
        text: str,
        *,
        scope: str = DEFAULT_SCOPE,
        meta: Mapping[str, JsonValue] | None = None,
    ) -> bool:
        """Start writing ``text``; ``False`` if it was dropped. Call it from async code.

        Raises:
            ConfigError: The arguments are what :meth:`MemoryStore.remember` rejects
                (checked here, before anything runs in the background).
        """
        text = check_memory_text(text)
        scope = check_scope(scope)
        stored_meta, _ = check_meta(meta)
        if self.pending >= self._max_pending:
            self.dropped += 1
            log.warning("memory writer: %d writes pending; a text was dropped", self.pending)
            return False
        from mainspring._lowlevel.background import spawn

        self.pending += 1
        spawn(self._write(text, scope, stored_meta))
        return True

    async def _write(self, text: str, scope: str, meta: dict[str, JsonValue]) -> None:
        try:
            with anyio.fail_after(self._timeout):
                await self._store.remember(text, scope=scope, meta=meta)
            self.written += 1
        except Exception:
            self.failures += 1
            log.warning("memory write failed; the text was not remembered", exc_info=True)
        finally:
            self.pending -= 1
            if not self.pending and self._idle is not None:
                self._idle.set()
                self._idle = None

    async def drain(self) -> None:
        """Wait until no write is pending. Safe to cancel: the writes go on."""
        while self.pending:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()
