"""A recorded run as the trace inspector's JSON: per model call, its context and cache.

For each model call of a run: the composition of what was sent by source,
module and processor (tokens, share of the call, the share of the call's
cost), the segments in the order sent with the stable prefix (the tokens
before the prompt-cache breakpoint) marked, the provider's cache reads and
writes and hit rate, and the prefix reused from the previous call. Figures
come from the run's token-accounting snapshots as they are; nothing here
counts anew.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import JsonValue

from mainspring.context.snapshot import CallSnapshot, Segment, usage_to_dict
from mainspring.server._recorder import RunTrace

__all__ = ["call_view", "run_detail"]


def _rows(call: CallSnapshot, key: Callable[[Segment], str]) -> list[JsonValue]:
    tokens: dict[str, int] = {}
    chars: dict[str, int] = {}
    for seg in call.segments:
        name = key(seg)
        tokens[name] = tokens.get(name, 0) + seg.tokens
        chars[name] = chars.get(name, 0) + seg.chars
    rows: list[JsonValue] = []
    for name, count in sorted(tokens.items(), key=lambda kv: (-kv[1], kv[0])):
        share = count / call.tokens if call.tokens else 0.0
        rows.append(
            {
                "name": name,
                "tokens": count,
                "chars": chars[name],
                "share": share,
                "cost_usd": call.cost.usd * share,
            }
        )
    return rows


def _segments(call: CallSnapshot) -> tuple[list[JsonValue], int | None]:
    """The segments in order, each placed against the stable prefix; and the breakpoint."""
    out: list[JsonValue] = []
    start = 0
    breakpoint_after: int | None = None
    for index, seg in enumerate(call.segments):
        end = start + seg.tokens
        item: dict[str, JsonValue] = {
            "index": index,
            "source": seg.source,
            "module": seg.module,
            "processor": seg.processor,
            "slot": seg.slot,
            "chars": seg.chars,
            "tokens": seg.tokens,
            "share": seg.share,
            "start": start,
            "stable": call.stable_tokens > 0 and end <= call.stable_tokens,
            "reused": end <= call.prefix_tokens,
        }
        if seg.content is not None:
            item["content"] = seg.content
        if call.stable_tokens > 0 and start < call.stable_tokens <= end:
            breakpoint_after = index
        out.append(item)
        start = end
    return out, breakpoint_after


def call_view(call: CallSnapshot, *, index: int, turn_index: int) -> dict[str, JsonValue]:
    """One model call as the inspector shows it."""
    segments, breakpoint_after = _segments(call)
    return {
        "index": index,
        "turn_index": turn_index,
        "step": call.step,
        "model": call.model,
        "tokenizer": call.tokenizer,
        "exact": call.exact,
        "tokens": call.tokens,
        "chars": call.chars,
        "stable_tokens": call.stable_tokens,
        "breakpoint_after_segment": breakpoint_after,
        "prefix_tokens": call.prefix_tokens,
        "prefix_reuse": call.prefix_reuse,
        "usage": dict(usage_to_dict(call.usage)),
        "cache_read_tokens": call.usage.cache_read_tokens,
        "cache_write_tokens": call.usage.cache_write_tokens,
        "cache_hit_rate": call.cache_hit_rate,
        "cost_usd": call.cost.usd,
        "cost_priced": call.cost.priced,
        "price_source": call.cost.price_source,
        "by_source": _rows(call, lambda s: s.source),
        "by_module": _rows(call, lambda s: s.module),
        "by_processor": _rows(call, lambda s: s.processor),
        "segments": segments,
    }


def _calls(run: RunTrace) -> list[JsonValue]:
    out: list[JsonValue] = []
    for snapshot in run.snapshots:
        for call in snapshot.calls:
            out.append(call_view(call, index=len(out), turn_index=snapshot.turn_index))
    return out


def run_detail(run: RunTrace, *, include_content: bool) -> dict[str, JsonValue]:
    """Everything the inspector shows of one run (the JSON export)."""
    activities: Sequence[dict[str, JsonValue]] = list(run.activities)
    return {
        "summary": run.summary(),
        "include_content": include_content,
        "calls": _calls(run),
        "activities": list(activities),
        "prefix_mutations": [a for a in activities if a["kind"] == "prefix_mutation"],
        "snapshots": [s.to_dict() for s in run.snapshots],
    }
