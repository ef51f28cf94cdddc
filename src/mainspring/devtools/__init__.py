"""Developer tools: a standalone HTML report of token telemetry.

``mainspring report <session file>`` reads the JSONL file a snapshot sink
wrote (one :class:`~mainspring.context.snapshot.TurnSnapshot` per line) and
writes one self-contained HTML page: inline CSS, SVG charts, tables, and the
figures as JSON. It fetches nothing, so it opens offline and can be mailed.
"""

from mainspring.devtools.report import (
    ModelRow,
    ModuleRow,
    ReportData,
    ReportTotals,
    SourceRow,
    TurnRow,
    UsageTotals,
    read_snapshots,
    render_html,
    report_data,
    write_report,
)

__all__ = [
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
