"""Thinking blocks: the ``<eval_summary>`` marker a model may close its reasoning with.

A thinking block that holds

```text
<eval_summary mode="brief">
- balance_ok: pass — the balance covers the swap
- health_factor: warn - it drops to 1.4
</eval_summary>
```

is reported by ``thinking_done`` with ``summary_mode="brief"`` and one
:class:`EvalItem` per ``- name: verdict — note`` line (the note after an em
dash, ``--`` or `` - ``, optional). Parsing is one pass over the text, bounded
in what it keeps, and never raises: text without the marker has no summary.
"""

from __future__ import annotations

import re

from mainspring._lowlevel.frozen import dataclass

__all__ = ["MAX_EVAL_ITEMS", "EvalItem", "parse_eval_summary"]

MAX_EVAL_ITEMS = 64
"""Items kept from one summary (the rest are dropped)."""
_OPEN = "<eval_summary"
_CLOSE = "</eval_summary>"
_MODE = re.compile(r"""\bmode\s*=\s*["']?([A-Za-z0-9_-]{1,32})""")
_NOTE_SPLIT = re.compile(r"\s+(?:\u2014|--|-)\s+|\u2014")
_FIELD = 200
"""Characters kept of an item's name or verdict (1,000 of its note)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalItem:
    """One line of an evaluation summary."""

    name: str
    verdict: str
    note: str = ""


def parse_eval_summary(text: str) -> tuple[str, tuple[EvalItem, ...]] | None:
    """The summary's mode and items, or ``None`` when ``text`` has no ``<eval_summary>``.

    A marker without a ``mode`` attribute has mode ``"default"``; an unclosed
    one runs to the end of the text.
    """
    start = text.find(_OPEN)
    if start < 0:
        return None
    head_end = text.find(">", start)
    if head_end < 0:
        return None
    head = text[start + len(_OPEN) : head_end]
    if head and not head[0].isspace():
        return None  # <eval_summaryX>: another tag
    found = _MODE.search(head[:200])
    mode = found.group(1) if found else "default"
    end = text.find(_CLOSE, head_end)
    body = text[head_end + 1 : end if end >= 0 else len(text)]
    items: list[EvalItem] = []
    for line in body.splitlines():
        item = _item(line)
        if item is not None:
            items.append(item)
            if len(items) >= MAX_EVAL_ITEMS:
                break
    return mode, tuple(items)


def _item(line: str) -> EvalItem | None:
    line = line.strip()
    if not line.startswith(("-", "*")):
        return None
    line = line[1:].strip()
    name, colon, rest = line.partition(":")
    if not colon or not name.strip():
        return None
    parts = _NOTE_SPLIT.split(rest.strip(), maxsplit=1)
    verdict = parts[0].strip()
    note = parts[1].strip() if len(parts) > 1 else ""
    return EvalItem(name=name.strip()[:_FIELD], verdict=verdict[:_FIELD], note=note[:1000])
