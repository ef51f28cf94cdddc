"""The figures of a telemetry report.

:func:`report_data` reduces snapshots to plain JSON-ready rows (the
``TypedDict`` shapes here), which :mod:`mainspring.devtools.report` draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypedDict, TypeVar

from mainspring.context.snapshot import (
    CallSnapshot,
    Segment,
    TurnSnapshot,
    cache_hit_rate,
    usage_to_dict,
)
from mainspring.usage import Usage

__all__ = [
    "ModelRow",
    "ModuleRow",
    "ReportData",
    "ReportTotals",
    "SourceRow",
    "TurnRow",
    "UsageTotals",
    "report_data",
]

_K = TypeVar("_K")


UsageTotals = dict[str, int]
"""The provider's normalized usage, summed: ``input_tokens`` (uncached),
``cache_read_tokens``, ``cache_write_tokens``, ``output_tokens``,
``reasoning_tokens`` (part of the output) and ``requests``."""


class ReportTotals(TypedDict):
    """Figures over every snapshot in the report."""

    turns: int
    calls: int
    tokens: int
    """Tokens sent (as counted by the tokenizer), over all calls."""
    chars: int
    usage: UsageTotals
    cache_hit_rate: float | None
    """Cache reads over all input tokens; ``None`` when the provider saw none."""
    prefix_reuse: float
    """Mean prefix reuse, weighted by tokens: reused tokens over sent tokens."""
    cost_usd: float
    priced: bool
    """True when there was at least one call and every call had a price."""
    unpriced_calls: int
    price_sources: list[str]


class SourceRow(TypedDict):
    """Tokens one source contributed; ``share`` of all segment tokens (0-1)."""

    source: str
    tokens: int
    chars: int
    share: float


class TurnRow(TypedDict):
    """One turn's figures."""

    session_id: str
    turn_index: int
    started_at: float
    calls: int
    tokens: int
    chars: int
    prefix_reuse: float
    cache_hit_rate: float | None
    cost_usd: float
    by_source: dict[str, int]


class ModuleRow(TypedDict):
    """Tokens one module/processor pair contributed over the report."""

    module: str
    processor: str
    segments: int
    tokens: int
    chars: int
    share: float


class ModelRow(TypedDict):
    """Calls, usage and cost of one model."""

    model: str
    calls: int
    tokens: int
    usage: UsageTotals
    cost_usd: float
    priced: bool
    price_sources: list[str]


class ReportData(TypedDict):
    """Everything the page shows, as JSON-ready data; rows with the most tokens (cost) first."""

    session_ids: list[str]
    totals: ReportTotals
    sources: list[SourceRow]
    turns: list[TurnRow]
    modules: list[ModuleRow]
    models: list[ModelRow]


def report_data(snapshots: Sequence[TurnSnapshot]) -> ReportData:
    """Reduce snapshots to the report's figures (all of them, every session)."""
    calls = [call for snap in snapshots for call in snap.calls]
    usage = sum((c.usage for c in calls), Usage())
    tokens = sum(c.tokens for c in calls)
    unpriced = sum(1 for c in calls if not c.cost.priced)
    totals = ReportTotals(
        turns=len(snapshots),
        calls=len(calls),
        tokens=tokens,
        chars=sum(c.chars for c in calls),
        usage=usage_to_dict(usage),
        cache_hit_rate=cache_hit_rate(usage),
        prefix_reuse=sum(c.prefix_tokens for c in calls) / tokens if tokens else 0.0,
        cost_usd=math.fsum(c.cost.usd for c in calls),
        priced=bool(calls) and unpriced == 0,
        unpriced_calls=unpriced,
        price_sources=sorted({c.cost.price_source for c in calls}),
    )
    return ReportData(
        session_ids=list(dict.fromkeys(s.session_id for s in snapshots)),
        totals=totals,
        sources=_source_rows(snapshots),
        turns=[_turn_row(s) for s in snapshots],
        modules=_module_rows(snapshots),
        models=_model_rows(snapshots),
    )


def _source_rows(snapshots: Sequence[TurnSnapshot]) -> list[SourceRow]:
    by_source = _group(snapshots, lambda g: g.source)
    total = sum(g.tokens for segs in by_source.values() for g in segs)
    rows = [
        SourceRow(
            source=source,
            tokens=(n := sum(g.tokens for g in segs)),
            chars=sum(g.chars for g in segs),
            share=n / total if total else 0.0,
        )
        for source, segs in by_source.items()
    ]
    return sorted(rows, key=lambda r: (-r["tokens"], r["source"]))


def _group(snaps: Sequence[TurnSnapshot], key: Callable[[Segment], _K]) -> dict[_K, list[Segment]]:
    groups: dict[_K, list[Segment]] = {}
    for seg in (g for snap in snaps for c in snap.calls for g in c.segments):
        groups.setdefault(key(seg), []).append(seg)
    return groups


def _turn_row(snap: TurnSnapshot) -> TurnRow:
    return TurnRow(
        session_id=snap.session_id,
        turn_index=snap.turn_index,
        started_at=snap.started_at,
        calls=len(snap.calls),
        tokens=snap.tokens,
        chars=snap.chars,
        prefix_reuse=snap.prefix_reuse,
        cache_hit_rate=snap.cache_hit_rate,
        cost_usd=math.fsum(c.cost.usd for c in snap.calls),
        by_source=snap.by_source(),
    )


def _module_rows(snapshots: Sequence[TurnSnapshot]) -> list[ModuleRow]:
    by_pair = _group(snapshots, lambda g: (g.module, g.processor))
    total = sum(g.tokens for segs in by_pair.values() for g in segs)
    rows = [
        ModuleRow(
            module=module,
            processor=processor,
            segments=len(segs),
            tokens=(n := sum(g.tokens for g in segs)),
            chars=sum(g.chars for g in segs),
            share=n / total if total else 0.0,
        )
        for (module, processor), segs in by_pair.items()
    ]
    return sorted(rows, key=lambda r: (-r["tokens"], r["module"], r["processor"]))


def _model_rows(snapshots: Sequence[TurnSnapshot]) -> list[ModelRow]:
    by_model: dict[str, list[CallSnapshot]] = {}
    for call in (c for snap in snapshots for c in snap.calls):
        by_model.setdefault(call.model, []).append(call)
    rows = [
        ModelRow(
            model=model,
            calls=len(calls),
            tokens=sum(c.tokens for c in calls),
            usage=usage_to_dict(sum((c.usage for c in calls), Usage())),
            cost_usd=math.fsum(c.cost.usd for c in calls),
            priced=all(c.cost.priced for c in calls),
            price_sources=sorted({c.cost.price_source for c in calls}),
        )
        for model, calls in by_model.items()
    ]
    return sorted(rows, key=lambda r: (-r["cost_usd"], r["model"]))
