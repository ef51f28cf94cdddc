"""``mainspring eval run|diff``: run an eval dataset, compare two runs.

Exit codes (docs/cli.md), suited to CI:

- ``run``: 0 every case passed; 1 a case failed or could not run; 2 a usage
  mistake (the dataset, the agent string, an option; the line names it).
- ``diff``: 0 no regression; 1 a case that passed now fails or is gone (or a
  score fell past ``--max-score-drop``); 2 a file that is missing or not a
  results file.

``mainspring.evals`` is imported when a command runs, never at start.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from mainspring.cli.exit import Debug, ExitCode, failing_cleanly
from mainspring.errors import ConfigError

if TYPE_CHECKING:
    from mainspring.agent import Agent
    from mainspring.evals import EvalDiff

__all__ = ["eval_app"]

eval_app = typer.Typer(
    name="eval", help="Run eval datasets and compare their results.", no_args_is_help=True
)


def _agent_source(spec: str) -> Agent | Callable[[], Awaitable[Agent]]:
    """An agent, or a factory called once per case, named by ``package.module:attribute``.

    ``run`` calls a factory once before the cases, so a factory that fails or
    makes something else is a usage mistake (exit 2), not a failed case.
    """
    from mainspring._agent_spec import load_attribute
    from mainspring.agent import Agent

    value = load_attribute(spec, "an agent")
    if isinstance(value, Agent):
        return value
    if not callable(value):
        raise ConfigError(f"{spec!r} is of type {type(value).__name__}, not an Agent or a factory")
    factory: Callable[[], object] = value

    async def make() -> Agent:
        try:
            made = factory()
            if inspect.isawaitable(made):
                made = await made
        except Exception as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"calling {spec} failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(made, Agent):
            raise ConfigError(f"{spec} made a {type(made).__name__}, not an Agent")
        return made

    return make


@eval_app.command("run")
def run(
    dataset: Annotated[Path, typer.Argument(help="The dataset: a YAML file.")],
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            "-a",
            help="package.module:attribute: an Agent, or a function (sync or async) "
            "making one per case. Defaults to the dataset's 'agent'.",
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Cases run at once.")] = 4,
    repeat: Annotated[int, typer.Option(min=1, help="Runs of each case.")] = 1,
    judge_model: Annotated[
        str | None,
        typer.Option(help="provider:model grading the 'judge' checks that name no model."),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the results as JSON (for eval diff).")
    ] = None,
    html_out: Annotated[Path | None, typer.Option("--html", help="Write an HTML report.")] = None,
    debug: Debug = False,
) -> None:
    """Run a dataset's cases against an agent and print a table of the results.

    Exits 0 when every case passed, 1 when one failed or could not run, 2 on a
    usage mistake (a bad dataset names the case and the field).
    """
    from mainspring._agent_spec import load_model
    from mainspring.agent import Agent
    from mainspring.evals import evaluate, load_dataset, print_report, write_html

    console = Console(highlight=False, soft_wrap=True)
    with failing_cleanly(debug=debug):
        data = load_dataset(dataset)
        spec = agent or data.agent
        if spec is None:
            raise ConfigError(
                f"{dataset} names no agent: give --agent package.module:attribute "
                "(or 'agent:' in the dataset)"
            )
        source = _agent_source(spec)
        if not isinstance(source, Agent):
            anyio.run(source)  # a factory that cannot make an agent is a usage mistake
        judge = load_model(judge_model) if judge_model else None
        report = anyio.run(
            lambda: evaluate(
                data, source, concurrency=concurrency, repeat=repeat, judge_model=judge
            )
        )
        report = report.model_copy(update={"agent": spec})
        try:
            if json_out is not None:
                report.write(json_out)
            if html_out is not None:
                write_html(report, html_out)
        except OSError as exc:
            raise ConfigError(f"cannot write the results: {exc.strerror or exc}") from None
    print_report(report, console)
    for path in (json_out, html_out):
        if path is not None:
            console.print(Text(f"wrote {path}"))
    raise typer.Exit(ExitCode.OK if report.ok else ExitCode.FAILURE)


def _print_diff(diff: EvalDiff, console: Console, *, max_score_drop: float | None) -> None:
    table = Table(title=Text("eval diff"))
    for column in ("case", "status", "before", "after", "score Δ"):
        table.add_column(column, overflow="fold")
    flagged = {d.case for d in diff.regressions(max_score_drop=max_score_drop)}
    for d in diff.cases:
        style = "bold red" if d.case in flagged else ("green" if d.status == "fixed" else "")
        table.add_row(
            Text(d.case),
            Text(d.status, style=style),
            "-" if d.before_score is None else f"{d.before_score:.2f}",
            "-" if d.after_score is None else f"{d.after_score:.2f}",
            f"{d.score_delta:+.2f}",
        )
    console.print(table)
    for note in diff.notes:
        console.print(Text(f"note: {note}", style="yellow"))
    console.print(
        Text(
            f"cost ${diff.cost_before:.4f} → ${diff.cost_after:.4f} ({diff.cost_delta:+.4f}); "
            f"{len(flagged)} regression{'s' if len(flagged) != 1 else ''}",
            style="bold red" if flagged else "bold green",
        )
    )


@eval_app.command("diff")
def diff(
    before: Annotated[Path, typer.Argument(help="The baseline results (eval run --json).")],
    after: Annotated[Path, typer.Argument(help="The results to compare with it.")],
    max_score_drop: Annotated[
        float | None,
        typer.Option(min=0, help="Also a regression: a case's mean score falling by more."),
    ] = None,
    debug: Debug = False,
) -> None:
    """Compare two result files: cases flipped, score deltas, the cost delta.

    Exits 0 with no regression, 1 when a case that passed fails or is gone (or
    its score fell past --max-score-drop), 2 when a file is not a results file.
    """
    from mainspring.evals import EvalReport, diff_reports

    console = Console(highlight=False, soft_wrap=True)
    with failing_cleanly(debug=debug):
        compared = diff_reports(EvalReport.read(before), EvalReport.read(after))
    _print_diff(compared, console, max_score_drop=max_score_drop)
    regressed = compared.regressions(max_score_drop=max_score_drop)
    raise typer.Exit(ExitCode.FAILURE if regressed else ExitCode.OK)
