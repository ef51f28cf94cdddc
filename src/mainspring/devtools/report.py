"""Token telemetry as one standalone HTML page.

:func:`read_snapshots` reads a session file (JSONL, one
:class:`~mainspring.context.snapshot.TurnSnapshot` per line),
:func:`report_data` reduces the snapshots to plain JSON-ready figures, and
:func:`render_html` draws them: inline CSS, inline SVG charts drawn here,
tables, and the figures again as a ``<script type="application/json">``
block for other tools. The page loads nothing from anywhere (a
Content-Security-Policy forbids it) and runs no script.

Everything read from the file (session ids, source, module and model names)
is outside input: it is HTML-escaped on the page and ``<``/``>``/``&``-escaped
in the JSON block.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from mainspring.context.snapshot import TurnSnapshot
from mainspring.devtools._figures import (
    ModelRow,
    ModuleRow,
    ReportData,
    ReportTotals,
    SourceRow,
    TurnRow,
    UsageTotals,
    report_data,
)
from mainspring.errors import TelemetryError

__all__ = [
    "DEFAULT_TITLE",
    "ModelRow",
    "ModuleRow",
    "ReportData",
    "ReportTotals",
    "SourceRow",
    "TurnRow",
    "UsageTotals",
    "read_snapshots",
    "render_html",
    "report_data",
    "write_report",
]

DEFAULT_TITLE = "mainspring telemetry report"


def read_snapshots(path: str | os.PathLike[str]) -> list[TurnSnapshot]:
    """Read a session file: one snapshot per line, blank lines skipped.

    Session-summary lines (``"type": "session_summary"``, written when a
    session closes) are skipped too: the report sums the turns itself.

    Raises:
        TelemetryError: a line is not JSON, not an object, lacks a field, holds a
            wrong type or a non-finite number, or comes from a newer snapshot
            version; the message names the file and the line number.
        OSError: the file cannot be read (``FileNotFoundError`` when missing).
    """
    file = Path(path)
    snapshots: list[TurnSnapshot] = []
    for number, line in enumerate(file.read_bytes().split(b"\n"), start=1):
        if line.strip():
            snapshot = _parse_line(line, f"{file}, line {number}")
            if snapshot is not None:
                snapshots.append(snapshot)
    return snapshots


def _finite(text: str) -> float:
    """Parse a JSON number; NaN, Infinity and overflow are not numbers JSON allows."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def _parse_line(line: bytes, where: str) -> TurnSnapshot | None:
    try:
        data: object = json.loads(line.decode("utf-8"), parse_constant=_finite, parse_float=_finite)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise TelemetryError(f"{where}: not a JSON line ({exc})") from exc
    if not isinstance(data, dict):
        raise TelemetryError(f"{where}: expected a JSON object, got {type(data).__name__}")
    if data.get("type") == "session_summary":
        return None
    try:
        return TurnSnapshot.from_dict(data)
    except TelemetryError as exc:
        raise TelemetryError(f"{where}: {exc}") from exc
    except KeyError as exc:
        raise TelemetryError(f"{where}: missing field {exc}") from exc
    except (ValueError, TypeError, AttributeError, OverflowError, RecursionError) as exc:
        raise TelemetryError(f"{where}: malformed snapshot ({exc})") from exc


_PALETTE = "#4e79a7 #f28e2b #e15759 #76b7b2 #59a14f #edc948 #b07aa1 #ff9da7 #9c755f #bab0ac".split()
_PREFIX_COLOR = "#4e79a7"
_Plot = tuple[float, float, float, float]
_CACHE_COLOR = "#e15759"


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _int(n: int) -> str:
    return f"{n:,}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:.1f}%"


def _usd(x: float) -> str:
    return f"${x:.4f}"


def _num(x: float) -> str:
    """An SVG coordinate: short, and never NaN or infinite."""
    return f"{x:.1f}" if math.isfinite(x) else "0"


def _script_json(data: ReportData) -> str:
    """JSON that cannot end or open anything inside a ``<script>`` element."""
    text = json.dumps(data, ensure_ascii=True, sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], *, numeric_from: int = 1) -> str:
    """A table; cells are already-escaped HTML, columns from ``numeric_from`` right-aligned."""

    def cells(tag: str, items: Sequence[str]) -> str:
        n = ' class="n"'
        return "".join(f"<{tag}{n * (i >= numeric_from)}>{c}</{tag}>" for i, c in enumerate(items))

    body = "".join(f"<tr>{cells('td', row)}</tr>" for row in rows)
    table = f"<table><thead><tr>{cells('th', head)}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="scroll">{table}</div>'


def _swatch(color: str) -> str:
    return f'<span class="sw" style="background:{color}"></span>'


_W = 720


def _svg(label: str, height: int, parts: Iterable[str]) -> str:
    return (
        f'<svg class="chart" role="img" aria-label="{label}" viewBox="0 0 {_W} {height}" '
        f'width="{_W}" height="{height}">{"".join(parts)}</svg>'
    )


def _rect(x: float, y: float, w: float, h: float, color: str, tip: str) -> str:
    return (
        f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}" '
        f'fill="{color}"><title>{_esc(tip)}</title></rect>'
    )


def _composition_svg(data: ReportData, colors: dict[str, str]) -> str:
    """One horizontal bar, 100% wide, split by source share."""
    h = 32
    parts: list[str] = []
    x = 0.0
    for row in data["sources"]:
        w = max(row["share"], 0.0) * _W
        tip = f"{row['source']}: {_int(row['tokens'])} tokens ({_pct(row['share'])})"
        parts.append(_rect(x, 0, w, h, colors[row["source"]], tip))
        x += w
    return _svg("token share by source", h, parts or [_rect(0, 0, _W, h, "#ddd", "no tokens")])


def _axes(top: float, bottom: float, left: float, labels: Sequence[tuple[float, str]]) -> str:
    out = [
        f'<line x1="{_num(left)}" y1="{_num(bottom)}" x2="{_W}" y2="{_num(bottom)}" stroke="#999"/>'
    ]
    for frac, label in labels:
        y = bottom - frac * (bottom - top)
        out.append(
            f'<line x1="{_num(left)}" y1="{_num(y)}" x2="{_W}" y2="{_num(y)}" stroke="#eee"/>'
            f'<text x="{_num(left - 4)}" y="{_num(y + 4)}" text-anchor="end">{_esc(label)}</text>'
        )
    return "".join(out)


def _x_labels(turns: Sequence[TurnRow], left: float, slot: float, y: float) -> str:
    step = max(1, math.ceil(len(turns) / 20))
    return "".join(
        f'<text x="{_num(left + (i + 0.5) * slot)}" y="{_num(y)}" text-anchor="middle">'
        f"{_esc(t['turn_index'])}</text>"
        for i, t in enumerate(turns)
        if i % step == 0
    )


def _turn_tokens_svg(data: ReportData, colors: dict[str, str]) -> str:
    """Bars per turn, stacked by source, on a shared token scale."""
    turns = data["turns"]
    h, top, bottom, left = 240, 10.0, 216.0, 64.0
    peak = max((sum(max(v, 0) for v in t["by_source"].values()) for t in turns), default=0)
    scale = (bottom - top) / peak if peak else 0.0
    slot = (_W - left) / max(len(turns), 1)
    parts = [_axes(top, bottom, left, [(0.0, "0"), (0.5, _int(peak // 2)), (1.0, _int(peak))])]
    for i, turn in enumerate(turns):
        y = bottom
        for row in data["sources"]:
            n = max(turn["by_source"].get(row["source"], 0), 0)
            if not n:
                continue
            bar = n * scale
            y -= bar
            tip = f"turn {turn['turn_index']} · {row['source']}: {_int(n)} tokens"
            x = left + (i + 0.1) * slot
            parts.append(_rect(x, y, slot * 0.8, bar, colors[row["source"]], tip))
    parts.append(_x_labels(turns, left, slot, h - 8))
    return _svg("tokens per turn by source", h, parts)


def _series(
    values: Sequence[float | None], color: str, label: str, turns: Sequence[TurnRow], geo: _Plot
) -> str:
    """A line with dots through the known points; ``geo`` is top, bottom, left, slot width."""
    top, bottom, left, slot = geo
    runs: list[list[str]] = [[]]
    dots: list[str] = []
    for i, value in enumerate(values):
        if value is None:
            runs.append([])
            continue
        x = left + (i + 0.5) * slot
        y = bottom - min(max(value, 0.0), 1.0) * (bottom - top)
        runs[-1].append(f"{_num(x)},{_num(y)}")
        tip = f"turn {turns[i]['turn_index']} · {label}: {_pct(value)}"
        dots.append(
            f'<circle cx="{_num(x)}" cy="{_num(y)}" r="3" fill="{color}">'
            f"<title>{_esc(tip)}</title></circle>"
        )
    lines = "".join(
        f'<polyline points="{" ".join(run)}" fill="none" stroke="{color}" stroke-width="2"/>'
        for run in runs
        if len(run) > 1
    )
    return lines + "".join(dots)


def _turn_rates_svg(data: ReportData) -> str:
    """Prefix reuse and cache-hit rate per turn, 0-100%."""
    turns = data["turns"]
    h = 200
    geo = (10.0, 176.0, 64.0, (_W - 64.0) / max(len(turns), 1))
    parts = [
        _axes(*geo[:3], [(0.0, "0%"), (0.5, "50%"), (1.0, "100%")]),
        _series([t["prefix_reuse"] for t in turns], _PREFIX_COLOR, "prefix reuse", turns, geo),
        _series([t["cache_hit_rate"] for t in turns], _CACHE_COLOR, "cache hit", turns, geo),
        _x_labels(turns, geo[2], geo[3], h - 8),
    ]
    return _svg("prefix reuse and cache hit rate per turn", h, parts)


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
main{max-width:980px;margin:0 auto;padding:24px}h1{font-size:22px;margin:0 0 4px}
h2{font-size:17px;margin:28px 0 8px}.muted{color:#666}.scroll{overflow-x:auto}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:10px}
.card{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:10px 12px}
.card dt{color:#666;font-size:12px}.card dd{margin:2px 0 0;font-size:18px;font-weight:600}
table{border-collapse:collapse;background:#fff;min-width:50%}th{background:#f3f3f3}
th,td{border-bottom:1px solid #eee;padding:4px 10px;text-align:left;white-space:nowrap}
.n{text-align:right;font-variant-numeric:tabular-nums}.chart{max-width:100%;height:auto;
background:#fff;border:1px solid #e3e3e3;font:11px system-ui,sans-serif;fill:#555}
.legend{list-style:none;padding:0;margin:6px 0;display:flex;flex-wrap:wrap;gap:4px 16px}
.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:5px}
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"  # no loads, no scripts


def render_html(snapshots: Sequence[TurnSnapshot], *, title: str | None = None) -> str:
    """One standalone HTML5 document about the snapshots (no network, no script run)."""
    data = report_data(snapshots)
    heading = title if title is not None else DEFAULT_TITLE
    body = (
        _sections(data) if snapshots else ['<p class="empty">No data: no snapshots to report.</p>']
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{_esc(heading)}</title><style>{_CSS}</style></head>\n"
        f"<body><main><h1>{_esc(heading)}</h1>\n"
        + "\n".join(body)
        + f'\n<script type="application/json" id="report-data">{_script_json(data)}</script>'
        "\n</main></body></html>\n"
    )


def _sections(data: ReportData) -> list[str]:
    colors = {r["source"]: _PALETTE[i % len(_PALETTE)] for i, r in enumerate(data["sources"])}
    return [
        _summary(data),
        "<h2>Provider usage</h2>" + _usage_table(data),
        "<h2>Source composition</h2>"
        + _composition_svg(data, colors)
        + _legend((r["source"], colors[r["source"]]) for r in data["sources"])
        + _source_table(data, colors),
        "<h2>Tokens per turn, by source</h2>" + _turn_tokens_svg(data, colors),
        "<h2>Prefix reuse and cache hit rate per turn</h2>"
        + _turn_rates_svg(data)
        + _legend([("prefix reuse", _PREFIX_COLOR), ("cache hit rate", _CACHE_COLOR)]),
        "<h2>Turns</h2>" + _turn_table(data),
        "<h2>Modules and processors</h2>" + _module_table(data),
        "<h2>Cost by model</h2>" + _cost_table(data),
    ]


def _summary(data: ReportData) -> str:
    t = data["totals"]
    ids = data["session_ids"]
    label = "session" if len(ids) == 1 else "sessions"
    sources = ", ".join(t["price_sources"]) or "none"
    cards = [
        ("turns", _int(t["turns"])),
        ("model calls", _int(t["calls"])),
        ("tokens sent", _int(t["tokens"])),
        ("characters sent", _int(t["chars"])),
        ("cache hit rate", _pct(t["cache_hit_rate"])),
        ("mean prefix reuse", _pct(t["prefix_reuse"])),
        ("cost", _usd(t["cost_usd"]) if t["priced"] else f"{_usd(t['cost_usd'])} (partial)"),
        ("priced", "yes" if t["priced"] else f"no ({_int(t['unpriced_calls'])} calls unpriced)"),
    ]
    dl = "".join(f'<div class="card"><dt>{_esc(k)}</dt><dd>{_esc(v)}</dd></div>' for k, v in cards)
    return (
        f'<p class="muted">{label}: {_esc(", ".join(ids))} · price data: {_esc(sources)}</p>'
        f'<dl class="cards">{dl}</dl>'
    )


def _legend(items: Iterable[tuple[str, str]]) -> str:
    lis = "".join(f"<li>{_swatch(color)}{_esc(name)}</li>" for name, color in items)
    return f'<ul class="legend">{lis}</ul>'


_USAGE_KEYS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")


def _usage_table(data: ReportData) -> str:
    u = data["totals"]["usage"]
    head = "uncached input|cache read|cache write|output|reasoning|requests|cache hit rate"
    cells = [_int(u[k]) for k in (*_USAGE_KEYS, "reasoning_tokens", "requests")]
    return _table(
        head.split("|"), [[*cells, _pct(data["totals"]["cache_hit_rate"])]], numeric_from=0
    )


def _cell(key: str, value: object) -> str:
    if key == "cost_usd" and isinstance(value, float):
        return _usd(value)
    if key in ("share", "prefix_reuse", "cache_hit_rate") and isinstance(value, float | None):
        return _pct(value)
    return _int(value) if isinstance(value, int) and not isinstance(value, bool) else _esc(value)


def _cells(record: Mapping[str, object], keys: str) -> list[str]:
    """Escaped, formatted cells of the record's space-separated ``keys``."""
    return [_cell(k, record[k]) for k in keys.split()]


def _source_table(data: ReportData, colors: dict[str, str]) -> str:
    rows = [
        [_swatch(colors[r["source"]]) + _esc(r["source"]), *_cells(r, "tokens share chars")]
        for r in data["sources"]
    ]
    return _table(["source", "tokens", "share", "chars"], rows)


def _turn_table(data: ReportData) -> str:
    sources = [r["source"] for r in data["sources"]]
    keys = "session_id turn_index calls tokens prefix_reuse cache_hit_rate cost_usd"
    rows = [
        _cells(t, keys) + [_int(t["by_source"].get(s, 0)) for s in sources] for t in data["turns"]
    ]
    head = "session|turn|calls|tokens|prefix reuse|cache hit|cost".split("|")
    return _table(head + [_esc(s) for s in sources], rows)


def _module_table(data: ReportData) -> str:
    rows = [_cells(r, "module processor segments tokens share chars") for r in data["modules"]]
    return _table("module|processor|segments|tokens|share|chars".split("|"), rows, numeric_from=2)


def _cost_cells(name: str, row: ModelRow | ReportTotals) -> list[str]:
    usage = [_int(row["usage"][k]) for k in _USAGE_KEYS]
    tail = ["yes" if row["priced"] else "no", _esc(", ".join(row["price_sources"]))]
    return [name, *_cells(row, "calls tokens"), *usage, _usd(row["cost_usd"]), *tail]


def _cost_table(data: ReportData) -> str:
    rows = [_cost_cells(_esc(r["model"]), r) for r in data["models"]]
    rows.append(_cost_cells("<strong>total</strong>", data["totals"]))
    head = "model|calls|tokens sent|uncached input|cache read|cache write|output|cost|priced"
    return _table([*head.split("|"), "price source"], rows)


def write_report(
    snapshots: Sequence[TurnSnapshot] | str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    title: str | None = None,
) -> Path:
    """Render snapshots (or the session file at a path) to ``out_path``; returns it.

    Raises:
        TelemetryError: the session file is malformed (see :func:`read_snapshots`).
        OSError: the session file cannot be read or the page cannot be written.
    """
    if isinstance(snapshots, (str, os.PathLike)):
        snapshots = read_snapshots(snapshots)
    out = Path(out_path)
    # Lone surrogates (valid JSON escapes, invalid UTF-8) become "?" rather than fail.
    out.write_text(render_html(snapshots, title=title), encoding="utf-8", errors="replace")
    return out
