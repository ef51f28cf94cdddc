"""``mainspring report``: a session file's token telemetry written as one HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from mainspring._cli_exit import Debug, error_line, failing_cleanly

__all__ = ["report"]


def report(
    session_file: Annotated[
        Path, typer.Argument(help="A session file: JSONL, one turn snapshot per line.")
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the page.")] = Path(
        "report.html"
    ),
    title: Annotated[str | None, typer.Option(help="The page's title.")] = None,
    debug: Debug = False,
) -> None:
    """Write a standalone HTML report of a session file's token telemetry.

    The page (report.html in the working directory unless -o says otherwise)
    has inline CSS and SVG charts and loads nothing, so it opens offline.
    Exits 2 when the session file is missing, 1 when it is malformed or cannot
    be written.
    """
    from mainspring.devtools.report import read_snapshots, report_data, write_report

    err = Console(stderr=True)
    if not session_file.is_file():
        error_line(err, f"no such file: {session_file}")
        raise typer.Exit(2)
    with failing_cleanly(debug=debug):
        try:
            snapshots = read_snapshots(session_file)
            write_report(snapshots, output, title=title)
        except OSError as exc:
            error_line(err, exc)
            raise typer.Exit(1) from None
        except UnicodeDecodeError:
            error_line(err, f"{session_file} is not UTF-8 text (a JSONL session file is)")
            raise typer.Exit(1) from None
    totals = report_data(snapshots)["totals"]
    Console(highlight=False, soft_wrap=True).print(
        Text(
            f"wrote {output} ({totals['turns']} turns, {totals['tokens']:,} tokens, "
            f"${totals['cost_usd']:.4f})"
        )
    )
