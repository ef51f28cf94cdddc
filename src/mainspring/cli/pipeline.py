"""A pipeline run at the terminal: its stages' events shown as they stream."""

from __future__ import annotations

from contextlib import aclosing

from rich.console import Console

from mainspring.cli.exit import ExitCode
from mainspring.cli.render import Renderer, styled
from mainspring.pipelines import (
    ContextLoaded,
    PipelineEvent,
    PipelineRunner,
    StageEvent,
    StageFinished,
    StageOutput,
    StageStart,
)

__all__ = ["run_pipeline"]


def _show_pipeline_event(console: Console, render: Renderer, event: PipelineEvent) -> bool:
    """Render one pipeline event; ``False`` once the pipeline halted."""
    if isinstance(event, StageEvent):
        render.show(event.event)
    elif isinstance(event, StageStart):
        console.print(styled((f"stage {event.stage}", "bold"), f" ({event.index}/{event.total})"))
    elif isinstance(event, ContextLoaded):
        files = ", ".join(event.files)
        console.print(
            styled(
                (f"stage {event.stage}", "bold cyan"),
                f" · context: {files} (~{event.token_estimate} tokens)",
            )
        )
    elif isinstance(event, StageOutput):
        console.print(styled(("wrote", "green"), f" {event.path} ({event.chars} chars)"))
    elif isinstance(event, StageFinished):
        console.print(styled((f"stage {event.stage} complete", "green"), ""))
    else:
        console.print(styled((f"halted at {event.stage}", "yellow"), f": {event.reason}"))
        return False
    return True


async def run_pipeline(
    runner: PipelineRunner, console: Console, *, stage: int | None, resume: bool
) -> int:
    """Run the pipeline (one stage, the stale rest, or all), showing its events; the exit code."""
    render = Renderer(console)
    if stage is not None:
        events = runner.run_stage(runner.workspace.stage(stage))
    elif resume:
        events = runner.resume()
    else:
        events = runner.run()
    async with aclosing(events) as stream:
        async for event in stream:
            if not _show_pipeline_event(console, render, event):
                return ExitCode.FAILURE
    return ExitCode.OK
