"""Token accounting records: what one turn sent to a model, by source.

A :class:`TurnSnapshot` is taken per turn (when accounting is on). It holds
one :class:`CallSnapshot` per model call of the turn; each call lists the
:class:`Segment` s of its request — characters, tokens and share of the
request per source / module / processor — plus the internal prefix reuse
(how many of its tokens the previous call of the session sent in the same
position), the provider's normalized usage and cache figures, and a
versioned cost estimate. Raw text stays out unless ``include_content``.

When the session's context pipeline is closed, a :class:`SessionSummary`
goes to the sinks too: totals over every turn, also those no longer kept
(see ``retain_turns``).

Snapshots are plain frozen data with :meth:`TurnSnapshot.to_dict` /
:meth:`TurnSnapshot.from_dict`, one JSON object per line in a JSONL sink,
which ``mainspring report`` reads back. The compiler's own are *deferred*: a
call's figures and its segments are worked out on first read
(:meth:`Segments.deferred`, :meth:`CallSnapshot.deferred`), and equal, read
as, pickle as and compare with the snapshots built with those figures.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from mainspring._lowlevel.frozen import fast_init
from mainspring.context._segments import (
    Pending,
    Segment,
    SegmentRow,
    Segments,
    read_deferred,
    segment_tokens_by_source,
)
from mainspring.errors import TelemetryError
from mainspring.usage import Usage

__all__ = [
    "SNAPSHOT_VERSION",
    "CallSnapshot",
    "CostEstimate",
    "Pending",
    "Segment",
    "SegmentRow",
    "Segments",
    "SessionSummary",
    "SessionTotals",
    "TurnSnapshot",
    "segment_tokens_by_source",
    "usage_from_dict",
    "usage_to_dict",
]

SNAPSHOT_VERSION = 1
"""Bumped when a snapshot's shape changes; readers refuse newer versions."""


def usage_to_dict(usage: Usage) -> dict[str, int]:
    """The normalized usage as a plain dict."""
    return {
        "input_tokens": usage.input_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "output_tokens": usage.output_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "requests": usage.requests,
    }


def usage_from_dict(data: Mapping[str, Any]) -> Usage:
    """Read what :func:`usage_to_dict` wrote."""
    return Usage(**{k: int(data.get(k, 0)) for k in usage_to_dict(Usage())})


def cache_hit_rate(usage: Usage) -> float | None:
    """Cache reads over all input tokens; ``None`` when nothing was sent."""
    total = usage.total_input_tokens
    return usage.cache_read_tokens / total if total else None


_CALL_DEFERRED = frozenset({"chars", "tokens", "prefix_tokens", "stable_tokens"})


@dataclass(frozen=True, slots=True, kw_only=True)
class CostEstimate:
    """What a call or turn cost, and by which price data."""

    usd: float
    priced: bool
    """False when no price was known for the model (``usd`` is then 0)."""
    price_source: str
    """``"configured"``, ``"genai-prices <version>"`` or ``"none"``."""

    def to_dict(self) -> dict[str, Any]:
        """A plain dict."""
        return {"usd": self.usd, "priced": self.priced, "price_source": self.price_source}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CostEstimate:
        """Read what :meth:`to_dict` wrote."""
        return cls(
            usd=float(data["usd"]),
            priced=bool(data["priced"]),
            price_source=str(data["price_source"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSnapshot:
    """One model call: its request by segment, usage, cache and cost."""

    step: int
    """1 for the turn's first model call, 2 for the next, …"""
    model: str
    tokenizer: str
    exact: bool
    """Whether the tokenizer is the model family's own (else an estimate)."""
    segments: Sequence[Segment]
    """The request by source / module / processor (a :class:`Segments` when compiled)."""
    chars: int
    tokens: int
    """Sum of the segments' tokens."""
    prefix_tokens: int
    """Tokens in the same position as in the session's previous call."""
    stable_tokens: int
    """Tokens before the prompt-cache breakpoint."""
    usage: Usage = Usage()
    cost: CostEstimate = CostEstimate(usd=0.0, priced=False, price_source="none")

    @classmethod
    def deferred(
        cls,
        *,
        step: int,
        model: str,
        tokenizer: str,
        exact: bool,
        segments: Segments,
        usage: Usage,
        cost: CostEstimate,
    ) -> CallSnapshot:
        """A call whose token and character figures are read from ``segments`` when needed.

        (``chars``, ``tokens``, ``prefix_tokens``, ``stable_tokens``, from a
        compile's deferred segments.) It equals, and reads exactly as, the
        call built with those figures.
        """
        made = object.__new__(cls)
        set_step, set_model, set_tokenizer, set_exact, set_segments, set_usage, set_cost = (
            _CALL_SETTERS
        )
        set_step(made, step)
        set_model(made, model)
        set_tokenizer(made, tokenizer)
        set_exact(made, exact)
        set_segments(made, segments)
        set_usage(made, usage)
        set_cost(made, cost)
        return made

    if not TYPE_CHECKING:  # a deferred call's figures are empty slots until first read

        def __getattr__(self, name: str) -> Any:
            return read_deferred(self, name, _CALL_DEFERRED)

    @property
    def prefix_reuse(self) -> float:
        """The share of this call's tokens the previous call sent identically."""
        return self.prefix_tokens / self.tokens if self.tokens else 0.0

    @property
    def cache_hit_rate(self) -> float | None:
        """Provider cache reads over all input tokens."""
        return cache_hit_rate(self.usage)

    def to_dict(self) -> dict[str, Any]:
        """A plain dict."""
        return {
            "step": self.step,
            "model": self.model,
            "tokenizer": self.tokenizer,
            "exact": self.exact,
            "segments": [s.to_dict() for s in self.segments],
            "chars": self.chars,
            "tokens": self.tokens,
            "prefix_tokens": self.prefix_tokens,
            "prefix_reuse": self.prefix_reuse,
            "stable_tokens": self.stable_tokens,
            "usage": usage_to_dict(self.usage),
            "cache_hit_rate": self.cache_hit_rate,
            "cost": self.cost.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CallSnapshot:
        """Read what :meth:`to_dict` wrote."""
        return cls(
            step=int(data["step"]),
            model=str(data["model"]),
            tokenizer=str(data["tokenizer"]),
            exact=bool(data["exact"]),
            segments=tuple(Segment.from_dict(s) for s in data["segments"]),
            chars=int(data["chars"]),
            tokens=int(data["tokens"]),
            prefix_tokens=int(data["prefix_tokens"]),
            stable_tokens=int(data.get("stable_tokens", 0)),
            usage=usage_from_dict(data.get("usage", {})),
            cost=CostEstimate.from_dict(data["cost"]),
        )


_CALL_SETTERS = tuple(
    getattr(CallSnapshot, name).__set__
    for name in ("step", "model", "tokenizer", "exact", "segments", "usage", "cost")
)
"""The slots' own setters: a deferred call is made once per model call."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnSnapshot:
    """Everything one turn sent and spent, attributed."""

    session_id: str
    turn_index: int
    calls: tuple[CallSnapshot, ...]
    started_at: float
    """Unix time of the turn's first compile."""
    version: int = SNAPSHOT_VERSION
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Tokens sent over the turn's calls."""
        return sum(c.tokens for c in self.calls)

    @property
    def chars(self) -> int:
        """Characters sent over the turn's calls."""
        return sum(c.chars for c in self.calls)

    @property
    def usage(self) -> Usage:
        """The provider's usage over the turn's calls."""
        calls = self.calls
        if len(calls) == 1:
            return calls[0].usage
        total = Usage()
        for call in calls:
            total = total + call.usage
        return total

    @property
    def cost_usd(self) -> float:
        """The estimated cost of the turn."""
        return sum(c.cost.usd for c in self.calls)

    @property
    def prefix_reuse(self) -> float:
        """Reused tokens over sent tokens, over the turn's calls."""
        tokens = self.tokens
        return sum(c.prefix_tokens for c in self.calls) / tokens if tokens else 0.0

    @property
    def cache_hit_rate(self) -> float | None:
        """Provider cache reads over all input tokens, over the turn's calls."""
        return cache_hit_rate(self.usage)

    def by_source(self) -> dict[str, int]:
        """Tokens per source over the turn's calls."""
        totals: dict[str, int] = {}
        for call in self.calls:
            segment_tokens_by_source(call.segments, totals)
        return totals

    def to_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready dict (one JSONL line)."""
        return {
            "version": self.version,
            "session_id": self.session_id,
            "turn_index": self.turn_index,
            "started_at": self.started_at,
            "calls": [c.to_dict() for c in self.calls],
            "tokens": self.tokens,
            "chars": self.chars,
            "usage": usage_to_dict(self.usage),
            "cache_hit_rate": self.cache_hit_rate,
            "prefix_reuse": self.prefix_reuse,
            "cost_usd": self.cost_usd,
            "by_source": self.by_source(),
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnSnapshot:
        """Read what :meth:`to_dict` wrote; refuses a newer snapshot version."""
        version = int(data.get("version", 0))
        if version > SNAPSHOT_VERSION or version < 1:
            raise TelemetryError(
                f"snapshot version {version} is not supported (this mainspring reads "
                f"1 to {SNAPSHOT_VERSION})"
            )
        return cls(
            session_id=str(data["session_id"]),
            turn_index=int(data["turn_index"]),
            calls=tuple(CallSnapshot.from_dict(c) for c in data["calls"]),
            started_at=float(data["started_at"]),
            version=version,
            meta=dict(data.get("meta", {})),
        )


fast_init(TurnSnapshot)  # one per accounted turn


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary:
    """Totals over every turn of one session, sent to the sinks when it closes.

    The totals count every turn taken, including those a ``retain_turns``
    bound dropped from memory; ``retained_turns`` says how many are still kept.
    """

    session_id: str
    turns: int
    """Turn snapshots taken."""
    calls: int
    """Model calls over those turns."""
    tokens: int
    """Tokens sent over those calls (by the compiler's count)."""
    usage: Usage
    """The provider's usage, summed."""
    cost_usd: float
    by_source: dict[str, int]
    """Tokens sent per source, summed."""
    started_at: float | None
    """Unix time of the first turn's first compile (``None``: no turn)."""
    ended_at: float
    """Unix time the summary was taken."""
    retained_turns: int
    version: int = SNAPSHOT_VERSION
    type: Literal["session_summary"] = "session_summary"
    """Tells a summary line from a turn line in a JSONL file."""

    def to_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready dict (one JSONL line, with ``"type": "session_summary"``)."""
        return {
            "type": self.type,
            "version": self.version,
            "session_id": self.session_id,
            "turns": self.turns,
            "calls": self.calls,
            "tokens": self.tokens,
            "usage": usage_to_dict(self.usage),
            "cache_hit_rate": cache_hit_rate(self.usage),
            "cost_usd": self.cost_usd,
            "by_source": dict(self.by_source),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "retained_turns": self.retained_turns,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionSummary:
        """Read what :meth:`to_dict` wrote; refuses a newer version."""
        version = int(data.get("version", 0))
        if version > SNAPSHOT_VERSION or version < 1 or data.get("type") != "session_summary":
            raise TelemetryError(f"not a session summary this mainspring reads: {version}")
        started = data.get("started_at")
        return cls(
            session_id=str(data["session_id"]),
            turns=int(data["turns"]),
            calls=int(data["calls"]),
            tokens=int(data["tokens"]),
            usage=usage_from_dict(data["usage"]),
            cost_usd=float(data["cost_usd"]),
            by_source={str(k): int(v) for k, v in dict(data["by_source"]).items()},
            started_at=None if started is None else float(started),
            ended_at=float(data["ended_at"]),
            retained_turns=int(data["retained_turns"]),
            version=version,
        )


@dataclass
class SessionTotals:
    """Running totals over a session's turn snapshots, however few of them are kept."""

    turns: int = 0
    calls: int = 0
    tokens: int = 0
    usage: Usage = Usage()
    """Replaced as turns add up (frozen: the zero one is shared by every new session)."""
    cost_usd: float = 0.0
    by_source: dict[str, int] = field(default_factory=dict)
    started_at: float | None = None

    def add(self, snapshot: TurnSnapshot) -> None:
        """Count one more turn."""
        calls = snapshot.calls
        self.turns += 1
        self.calls += len(calls)
        by_source = self.by_source
        for call in calls:
            self.tokens += call.tokens
            segment_tokens_by_source(call.segments, by_source)
        self.usage = self.usage + snapshot.usage
        self.cost_usd += snapshot.cost_usd
        if self.started_at is None:
            self.started_at = snapshot.started_at

    def copy(self) -> SessionTotals:
        """An independent copy."""
        return replace(self, by_source=dict(self.by_source))

    def summary(self, session_id: str, *, retained_turns: int) -> SessionSummary:
        """The totals as a :class:`SessionSummary` taken now."""
        return SessionSummary(
            session_id=session_id,
            turns=self.turns,
            calls=self.calls,
            tokens=self.tokens,
            usage=self.usage,
            cost_usd=self.cost_usd,
            by_source=dict(self.by_source),
            started_at=self.started_at,
            ended_at=time.time(),
            retained_turns=retained_turns,
        )
