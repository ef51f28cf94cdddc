"""Tool-call arguments from a model, parsed as hostile input.

A model (or a provider in between) may send arguments that are not JSON,
megabytes long, or nested deeply enough to exhaust a recursive parser or
validator. :func:`parse_arguments` turns each of these into a short error
message for the model (never the input echoed back), in time linear in the
input.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from json.scanner import make_scanner

__all__ = ["MAX_ARGUMENT_CHARS", "MAX_ARGUMENT_DEPTH", "clip", "parse_arguments"]


MAX_ARGUMENT_CHARS = 10 * 1024 * 1024
"""Arguments longer than this are refused unparsed (an error result, never a crash)."""
MAX_ARGUMENT_DEPTH = 64
"""Arguments nested deeper than this are refused: no tool needs it, and deep
nesting is how hostile input exhausts a recursive parser or validator."""


def clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


def parse_arguments(name: str, raw: str) -> tuple[object, str | None]:
    """The call's arguments as JSON, or why they cannot be used (a short message)."""
    if len(raw) > MAX_ARGUMENT_CHARS:
        return None, (
            f"the arguments for {clip(name)!r} are {len(raw):,} characters, over the limit of "
            f"{MAX_ARGUMENT_CHARS:,}; send less (split the work into several calls)"
        )
    if not raw.strip():
        return {}, None
    try:
        parsed = _loads(raw)
    except RecursionError:
        parsed = None
    except ValueError as exc:
        return None, (
            f"the arguments for {clip(name)!r} are not valid JSON ({clip(str(exc))}); "
            "send a JSON object"
        )
    # Nesting deeper than the limit needs more brackets than the limit: count first (fast).
    deep = raw.count("[") + raw.count("{") > MAX_ARGUMENT_DEPTH
    if parsed is None or (deep and _depth_over(parsed, MAX_ARGUMENT_DEPTH)):
        return None, (
            f"the arguments for {clip(name)!r} are nested more than {MAX_ARGUMENT_DEPTH} "
            "levels deep; send a flatter JSON object"
        )
    return parsed, None


_scan: Callable[[str, int], tuple[object, int]] = make_scanner(
    json.JSONDecoder()  # type: ignore[arg-type]  # (typeshed: it takes any decoder)
)
"""json's own C scanner: what ``json.loads`` runs, without the two regular-expression
passes around it for whitespace (most of its cost on a short object)."""


def _loads(raw: str) -> object:
    """``json.loads(raw)``: the scanner alone where no whitespace surrounds the value."""
    try:
        value, end = _scan(raw, 0)
    except StopIteration:  # whitespace first, or not JSON: json.loads says which
        return json.loads(raw)
    if end != len(raw):  # whitespace after, or extra data: json.loads says which
        return json.loads(raw)
    return value


def _depth_over(value: object, limit: int) -> bool:
    """Whether ``value`` nests containers deeper than ``limit`` (iterative, linear)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[object] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
