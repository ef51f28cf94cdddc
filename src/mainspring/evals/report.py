"""An eval report for people: a table in the terminal, a standalone HTML page.

Outputs, reasons and tool arguments come from a model: in the terminal they
are printed as plain text (rich markup is never parsed from them), in HTML
every value is escaped and the page carries a CSP that allows no script at
all, so a ``<script>`` a model wrote shows as text and cannot run.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from mainspring.evals.results import CaseResult, EvalReport

__all__ = ["print_report", "render_html", "write_html"]


def _status(result: CaseResult) -> str:
    if result.error is not None:
        return "ERROR"
    return "pass" if result.passed else "FAIL"


def _cell(result: CaseResult) -> Text:
    status = _status(result)
    return Text(status, style="green" if status == "pass" else "bold red")


def _why(result: CaseResult) -> str:
    if result.error is not None:
        return result.error
    return "; ".join(f"{s.evaluator}: {s.reason}" for s in result.scores if not s.passed)


def print_report(report: EvalReport, console: Console) -> None:
    """Print the report as a table, each failure's reasons, then the totals.

    The totals keep the cases' spend and the evaluators' (LLM judges') apart.
    """
    table = Table(title=Text(f"eval: {report.dataset}"))
    for column in ("case", "rep", "result", "score", "cost", "tools", "asked"):
        table.add_column(column, overflow="fold")
    for r in report.results:
        table.add_row(
            Text(r.case),
            str(r.repetition),
            _cell(r),
            f"{r.score:.2f}",
            f"${r.cost_usd:.4f}",
            str(len(r.calls)),
            Text(", ".join(r.asked)),
        )
    console.print(table)
    for r in report.results:
        if not r.passed:
            console.print(Text(f"{_status(r)} {r.case} [rep {r.repetition}]: {_why(r)}"))
    judge = (
        f"; judges ${report.judge_cost_usd:.4f}, {report.judge_tokens:,} tokens"
        if report.judge_tokens or report.judge_cost_usd
        else ""
    )
    console.print(
        Text(
            f"{report.passed}/{report.total} passed; cases ${report.cost_usd:.4f}{judge}",
            style="bold green" if report.ok else "bold red",
        )
    )


_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem;color:#1b1b1b;background:#fff}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #ccc;padding:.3rem .5rem;
vertical-align:top;text-align:left}th{background:#f3f3f3}.pass{color:#176f2c}
.fail{color:#b00020;font-weight:600}pre{white-space:pre-wrap;margin:0;max-width:40rem}
.muted{color:#666}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _row(r: CaseResult) -> str:
    status = _status(r)
    css = "pass" if r.passed else "fail"
    scores = "".join(
        f"<li class='{'pass' if s.passed else 'fail'}'>{_e(s.evaluator)} {s.score:.2f}"
        f"{' — ' + _e(s.reason) if s.reason else ''}</li>"
        for s in r.scores
    )
    calls = "".join(
        f"<li>{_e(c.get('name'))} {_e(json.dumps(c.get('args')))}</li>" for c in r.calls
    )
    facts = ", ".join(
        f"{name}: {_e(', '.join(values))}"
        for name, values in (
            ("asked", r.asked),
            ("approved", r.approved),
            ("rejected", r.rejected),
            ("blocked", r.blocked),
            ("denied", r.denied),
        )
        if values
    )
    error = f"<pre class='fail'>{_e(r.error)}</pre>" if r.error else ""
    return (
        f"<tr><td>{_e(r.case)}<div class='muted'>rep {r.repetition}</div></td>"
        f"<td class='{css}'>{status}</td><td>{r.score:.2f}</td><td>${r.cost_usd:.4f}</td>"
        f"<td><pre>{_e(r.output)}</pre>{error}</td><td><ul>{calls}</ul>{facts}</td>"
        f"<td><ul>{scores}</ul></td></tr>"
    )


def render_html(report: EvalReport, *, title: str | None = None) -> str:
    """The report as one self-contained HTML page (inline CSS, no script, nothing loaded)."""
    heading = title or f"eval: {report.dataset}"
    judge = (
        f"; judges ${report.judge_cost_usd:.4f} ({report.judge_tokens:,} tokens)"
        if report.judge_tokens or report.judge_cost_usd
        else ""
    )
    rows = "".join(_row(r) for r in report.results)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' "
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{_e(heading)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{_e(heading)}</h1><p>{report.passed}/{report.total} passed; "
        f"cases ${report.cost_usd:.4f}{judge}; agent {_e(report.agent or 'given in Python')}; "
        f"repeat {report.repeat}</p><table><thead><tr><th>case</th><th>result</th><th>score</th>"
        "<th>cost</th><th>output</th><th>tools and approvals</th><th>checks</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></body></html>\n"
    )


def write_html(report: EvalReport, path: str | Path, *, title: str | None = None) -> None:
    """Write :func:`render_html`'s page to ``path`` (blocking)."""
    Path(path).write_text(render_html(report, title=title), encoding="utf-8")
