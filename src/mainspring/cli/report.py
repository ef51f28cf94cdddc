"""``mainspring report``: a session file's token telemetry written as one HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from mainspring.cli.exit import Debug, failing_cleanly
from mainspring.errors import ConfigError, TelemetryError

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
    Exits 2 when the session file is missing, unreadable or malformed, or the
    page cannot be written.
    """
    from mainspring.devtools.report import read_snapshots, report_data, write_report

    with failing_cleanly(debug=debug):
        if not session_file.is_file():
            raise ConfigError(f"no such file: {session_file} (give a JSONL session file)")
        try:
            snapshots = read_snapshots(session_file)
        except OSError as exc:
            raise ConfigError(f"cannot read {session_file}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ConfigError(
                f"{session_file} is not UTF-8 text (a JSONL session file is)"
            ) from None
        except TelemetryError as exc:  # names the file and the line
            raise ConfigError(str(exc)) from None
        try:
            write_report(snapshots, output, title=title)
        except OSError as exc:
            raise ConfigError(
                f"cannot write {output}: {exc.strerror or exc} (choose another -o)"
            ) from None
    totals = report_data(snapshots)["totals"]
    Console(highlight=False, soft_wrap=True).print(
        Text(
            f"wrote {output} ({totals['turns']} turns, {totals['tokens']:,} tokens, "
            f"${totals['cost_usd']:.4f})"
        )
    )
