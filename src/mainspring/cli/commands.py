"""The ``mainspring`` command line.

``mainspring demo`` runs the offline wallet agent: text streams live, tool
calls and results show, and the payment asks for approval at the terminal
(``--yes`` approves automatically, for scripts and CI).
"""

from __future__ import annotations

import dataclasses
import shlex
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer
from rich.console import Console
from rich.prompt import Confirm

from mainspring._agent_spec import load_agent, load_model
from mainspring._version import __version__
from mainspring.cli.audit import audit_app
from mainspring.cli.chat import chat
from mainspring.cli.evals import eval_app
from mainspring.cli.exit import Debug, ExitCode, error_line, failing_cleanly, require_database
from mainspring.cli.mcp_serve import TOKEN_ENV as TOKEN_ENV  # re-exported: it was defined here
from mainspring.cli.mcp_serve import mcp_app
from mainspring.cli.mcp_serve import mcp_serve as mcp_serve
from mainspring.cli.render import Renderer, approval_panel, styled
from mainspring.cli.report import report
from mainspring.cli.serve import serve
from mainspring.cli.sessions import sessions_app
from mainspring.codec import event_to_json
from mainspring.decisions import Approve, Decision, Reject
from mainspring.errors import ConfigError
from mainspring.events import (
    ErrorEvent,
    Event,
    PendingAction,
)
from mainspring.session import Session
from mainspring.stores.urls import Stores, open_stores

if TYPE_CHECKING:
    from mainspring.agent import Agent
    from mainspring.models.base import Model
    from mainspring.pipelines import PipelineRunner, Stage, StageArtifact

__all__ = ["app", "main"]


app = typer.Typer(
    name="mainspring",
    help="mainspring: an agent engine for Python.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: flags show as flags ("-y, --yes"), and -h works like --help.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mainspring {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """An agent engine for Python."""


class _NoTerminal(Exception):
    """Approval is needed but nobody can be asked."""


def _interactive() -> bool:
    return sys.stdin.isatty()


def _ask(console: Console, action: PendingAction, *, yes: bool) -> Decision:
    console.print(approval_panel(action))
    if yes:
        console.print("[yellow]approved automatically (--yes)[/]")
        return Approve()
    if not _interactive():
        raise _NoTerminal("no terminal to ask for approval on; pass --yes to approve")
    if _confirm("Approve?", console, default=False):
        return Approve()
    return Reject("The user declined at the terminal.")


def _confirm(question: str, console: Console, *, default: bool) -> bool:
    """A y/n prompt that Ctrl-C ends at once.

    Inside ``anyio.run`` the event loop's SIGINT handler only schedules a
    cancellation, which a blocking read of the terminal never notices: the
    first Ctrl-C would be swallowed. During the prompt, Ctrl-C raises
    KeyboardInterrupt right where the prompt waits.
    """
    if threading.current_thread() is not threading.main_thread():
        return Confirm.ask(question, console=console, default=default)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return Confirm.ask(question, console=console, default=default)
    finally:
        signal.signal(signal.SIGINT, previous)


async def _run_demo(
    message: str,
    *,
    yes: bool,
    console: Console,
    store_url: str | None,
    session_id: str | None,
    model: Model | None = None,
) -> int:
    stores = await open_stores(store_url) if store_url else Stores()
    try:
        if session_id is not None:
            if stores.sessions is None:
                raise ConfigError("--session needs a --store that holds sessions")
            session = await Session.load(
                _demo_agent(model),
                stores.sessions,
                session_id,
                checkpoint_store=stores.checkpoints,
                run_lock=stores.locks,
            )
        else:
            session = Session(_demo_agent(model), **stores.session_kwargs())
        return await _converse(session, message, yes=yes, console=console, store_url=store_url)
    finally:
        await stores.aclose()


async def _converse(
    session: Session, message: str, *, yes: bool, console: Console, store_url: str | None
) -> int:
    render = Renderer(console)
    pending: PendingAction | None = session.pending
    stream = None
    if pending is None:
        console.print(styled(("you", "bold"), f": {message}"))
        stream = session.send(message)
    while True:
        failed = False
        if stream is not None:
            pending = None
            async for event in stream:
                render.show(event)
                if isinstance(event, PendingAction):
                    pending = event
                elif isinstance(event, ErrorEvent):
                    failed = True
        if failed:
            return ExitCode.FAILURE
        if pending is None:
            return ExitCode.OK
        try:
            decision = _ask(console, pending, yes=yes)
        except _NoTerminal:
            if store_url is None:
                raise
            if not durable(store_url, session):
                later = (
                    f"{store_url} keeps no sessions beyond this process; "
                    "use --store sqlite:///demo.db (or postgresql://…)"
                )
            else:
                again = shlex.join(
                    ["mainspring", "demo", "--store", store_url, "--session", session.session_id]
                )
                later = f"continue later with {again} --yes (without --yes a terminal asks)"
            console.print(
                styled(
                    ("waiting for approval", "yellow"),
                    f" (session {session.session_id}): {later}",
                ),
                soft_wrap=True,
            )
            return ExitCode.OK
        stream = session.resume(pending.attempt_id, decision)


async def _run_coding_demo(message: str | None, *, yes: bool, console: Console) -> int:
    import tempfile
    from pathlib import Path

    from mainspring.toolkits.demo import CODING_MESSAGE, coding_demo_agent, seed_workspace

    with tempfile.TemporaryDirectory(prefix="mainspring-coding-") as folder:
        root = Path(folder)
        seed_workspace(root)
        console.print(f"[dim]workspace: {root}[/]")
        session = Session(coding_demo_agent(root))
        code = await _converse(
            session, message or CODING_MESSAGE, yes=yes, console=console, store_url=None
        )
        console.print(f"[dim]calc.py now:[/]\n{(root / 'calc.py').read_text()}", end="")
        return code


@app.command()
def demo(
    which: Annotated[
        str,
        typer.Argument(
            help="'wallet' (payments), 'coding' (read, patch, approve, apply) or 'finance' "
            "(a ledger: quotes, swaps, loans, guards)."
        ),
    ] = "wallet",
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="What the user says.")
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Approve every action automatically.")
    ] = False,
    model: Annotated[
        str,
        typer.Option(
            help="'scripted' (offline), 'mock' (offline, scriptless), or a model string such as "
            "anthropic:claude-sonnet-4-5, "
            "openai:gpt-5, gemini:gemini-2.5-flash, openai-compatible:http://localhost:11434/v1#llama3.2"
        ),
    ] = "scripted",
    store: Annotated[
        str | None,
        typer.Option(help="Keep the session in a store: memory://, sqlite:///demo.db, …"),
    ] = None,
    session: Annotated[
        str | None, typer.Option(help="Continue this stored session (e.g. one awaiting approval).")
    ] = None,
    tiers: Annotated[
        str, typer.Option(help="finance: USD tiers, conservative | balanced | aggressive.")
    ] = "balanced",
    ledger: Annotated[
        str | None, typer.Option(help="finance: the SQLite ledger file (default: in memory).")
    ] = None,
    debug: Debug = False,
) -> None:
    """Run an offline demo: the wallet (reads, then a payment to approve), coding, or finance.

    ``--model auto`` (finance) picks a real model when a provider key is set.

    Exit codes: 0 done (or waiting for approval in a store); 1 no terminal to ask
    on without --yes, or a failure; 2 a usage or configuration error; 4 the store
    cannot be reached; 130 interrupted.
    """
    console = Console(highlight=False)
    with failing_cleanly(debug=debug):
        if which not in ("wallet", "coding", "finance"):
            raise ConfigError(f"unknown demo {which!r}; choose 'wallet', 'coding' or 'finance'")
        if which != "wallet" and (store is not None or session is not None):
            raise ConfigError(f"--store and --session keep the wallet demo, not {which}")
        if which != "finance" and ledger is not None:
            raise ConfigError("--ledger is the finance demo's: mainspring demo finance --ledger …")
        if session is not None:
            if store is None:
                raise ConfigError("--session needs --store, e.g. --store sqlite:///demo.db")
            require_database(store)
        if model == "auto":
            from mainspring.cli.finance import auto_model

            model = auto_model()
        chosen = _resolve_model(model)
        try:
            if which == "finance":
                code = _finance(
                    message, yes=yes, console=console, model=chosen, tiers=tiers, ledger=ledger
                )
            elif which == "coding":
                code = anyio.run(lambda: _run_coding_demo(message, yes=yes, console=console))
            else:
                code = anyio.run(
                    lambda: _run_demo(
                        message or _demo_message(),
                        yes=yes,
                        console=console,
                        store_url=store,
                        session_id=session,
                        model=chosen,
                    )
                )
        except _NoTerminal as exc:
            error_line(Console(stderr=True), exc)
            raise typer.Exit(ExitCode.FAILURE) from None
    raise typer.Exit(code)


def _finance(
    message: str | None,
    *,
    yes: bool,
    console: Console,
    model: Model | None,
    tiers: str,
    ledger: str | None,
) -> int:
    from mainspring.cli.finance import run_finance_demo

    return anyio.run(
        lambda: run_finance_demo(
            message,
            ask=lambda c, action: _ask(c, action, yes=yes),
            console=console,
            model=model,
            tiers=tiers,
            ledger=ledger or ":memory:",
        )
    )


async def _start(
    agent: Agent, message: str | None, stores: Stores | None, session_id: str | None, *, yes: bool
) -> tuple[Session, AsyncIterator[Event]]:
    """A new session sending ``message``, or a stored paused one approved (``--yes``)."""
    kwargs = stores.session_kwargs() if stores is not None else {}
    if session_id is None:
        if message is None:
            raise ConfigError("say something: mainspring run AGENT MESSAGE (or --session ID --yes)")
        session = Session(agent, **kwargs)
        return session, session.send(message)
    if stores is None or stores.sessions is None:
        raise ConfigError(
            "--session needs --store with a session store (sqlite:///… or postgresql://…)"
        )
    if message is not None:
        raise ConfigError("--session continues a waiting turn: drop the message, add --yes")
    session = await Session.load(
        agent,
        stores.sessions,
        session_id,
        checkpoint_store=stores.checkpoints,
        run_lock=stores.locks,
    )
    pending = session.pending
    if pending is None:
        raise ConfigError(f"session {session_id} is not waiting for a decision")
    if not yes:
        raise ConfigError(f"session {session_id} waits for {pending.name}: add --yes to approve it")
    return session, session.resume(pending.attempt_id, Approve())


async def _run_agent(
    agent: Agent,
    message: str | None,
    *,
    spec: str,
    as_json: bool,
    debug: bool,
    yes: bool,
    store_url: str | None,
    session_id: str | None,
    console: Console,
) -> int:
    stores: Stores | None = await open_stores(store_url) if store_url else None
    try:
        session, stream = await _start(agent, message, stores, session_id, yes=yes)
        render = Renderer(console, debug=debug)
        while True:
            pending = None
            async for event in stream:
                if as_json:
                    sys.stdout.write(event_to_json(event) + "\n")
                    sys.stdout.flush()
                else:
                    render.show(event)
                pending = event if isinstance(event, PendingAction) else pending
                if isinstance(event, ErrorEvent):
                    return ExitCode.FAILURE
            if pending is None:
                return ExitCode.OK
            if not yes:
                waiting = f"waiting for a decision on {pending.name} (session {session.session_id})"
                if store_url is not None and durable(store_url, session):
                    again = ["mainspring", "run", spec, "--store", store_url]
                    again += ["--session", session.session_id, "--yes"]
                    waiting += f"; approve it with: {shlex.join(again)}"
                else:
                    waiting += (
                        "; nothing keeps it: use --store sqlite:///agent.db to continue later"
                    )
                _note(console, as_json, waiting)
                return ExitCode.WAITING
            stream = session.resume(pending.attempt_id, Approve())
    finally:
        if stores is not None:
            await stores.aclose()


def durable(store_url: str, session: Session) -> bool:
    """Whether ``session`` outlives this process (its store keeps it, not in memory)."""
    return session.session_store is not None and not store_url.startswith("memory:")


def _note(console: Console, as_json: bool, text: str) -> None:
    """A line for people: on stderr when stdout carries JSON lines."""
    target = Console(stderr=True) if as_json else console
    target.print(styled(("note:", "yellow"), f" {text}"), highlight=False, soft_wrap=True)


@app.command()
def run(
    agent: Annotated[str, typer.Argument(help="The agent, as package.module:attribute.")],
    message: Annotated[
        str | None,
        typer.Argument(help="What the user says (none with --session: that continues a turn)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print every event as one JSON line (for scripts).")
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Approve every action automatically.")
    ] = False,
    store: Annotated[
        str | None, typer.Option(help="Keep the session in a store, e.g. sqlite:///agent.db.")
    ] = None,
    session: Annotated[
        str | None, typer.Option(help="Continue this stored session (approving with --yes).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Run the agent on this model instead of its own: 'mock' (offline, no script: "
            "calls the first tool once, then answers) or a model string."
        ),
    ] = None,
    debug: Debug = False,
) -> None:
    """Run one turn of your own agent, for scripts.

    Exit codes: 0 the turn completed; 1 the run ended in an error (or an
    internal error: one line, the traceback with --debug); 2 a usage or
    configuration error; 3 the turn waits for a decision (the line gives the
    command that approves it); 4 the store cannot be reached; 130 interrupted.
    With --json a failure is also one JSON object on stdout.
    """
    console = Console(highlight=False)
    with failing_cleanly(debug=debug, as_json=as_json):
        if session is not None:
            if store is None:
                raise ConfigError("--session needs --store, e.g. --store sqlite:///agent.db")
            require_database(store)
        chosen = load_agent(agent)
        if model is not None:
            chosen = dataclasses.replace(chosen, model=load_model(model))
        code = anyio.run(
            lambda: _run_agent(
                chosen,
                message,
                spec=agent,
                as_json=as_json,
                debug=debug,
                yes=yes,
                store_url=store,
                session_id=session,
                console=console,
            )
        )
    raise typer.Exit(code)


app.add_typer(sessions_app)
app.add_typer(audit_app)
app.command()(chat)
app.command()(serve)
app.add_typer(mcp_app)
app.add_typer(eval_app)


pipeline_app = typer.Typer(name="pipeline", help="Folder pipelines.", no_args_is_help=True)
app.add_typer(pipeline_app)


def _pipeline_gate(
    console: Console, *, yes: bool
) -> Callable[[Stage, Sequence[StageArtifact]], bool]:
    def gate(stage: Stage, outputs: Sequence[StageArtifact]) -> bool:
        console.print(styled((f"stage {stage.name} done", "bold"), f": review {stage.output_dir}"))
        for output in outputs:
            console.print(f"  {output.path} ({len(output.text)} chars)", markup=False)
        if yes:
            console.print("[yellow]accepted automatically (--yes)[/]")
            return True
        if not _interactive():
            console.print("[yellow]no terminal to ask on; pass --yes to continue[/]")
            return False
        return _confirm(f"Accept the outputs of {stage.name}?", console, default=True)

    return gate


def _pipeline_approval(
    console: Console, *, yes: bool
) -> Callable[[Stage, PendingAction], Decision | None]:
    """Ask at the terminal for a write a stage paused on (``None``: no terminal, halt)."""

    def decide(stage: Stage, action: PendingAction) -> Decision | None:
        console.print(styled((f"stage {stage.name}", "bold cyan"), " asks for approval"))
        try:
            return _ask(console, action, yes=yes)
        except _NoTerminal as exc:
            console.print(f"[yellow]{exc}[/]")
            return None

    return decide


@pipeline_app.command("run")
def pipeline_run(
    directory: Annotated[Path, typer.Argument(help="The workspace folder.")],
    stage: Annotated[
        int | None, typer.Option("--stage", help="Re-run only this stage number.")
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Start at the first stage whose outputs are missing, or whose contract, "
            "AGENT.md, CONTEXT.md or inputs changed since it ran.",
        ),
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Pass every review gate and approve every write.")
    ] = False,
    model: Annotated[
        str, typer.Option(help="'scripted' (offline) or a model string, as for demo.")
    ] = "scripted",
    debug: Debug = False,
) -> None:
    """Run a workspace's stages in order (offline with the scripted model by default).

    A write a stage asks approval for is asked at the terminal. Exit codes: 0
    done; 1 a stage halted, or a failure; 2 a folder that is not a workspace, or
    another configuration error; 130 interrupted.
    """
    console = Console(highlight=False)
    with failing_cleanly(debug=debug):
        if stage is not None and resume:
            raise ConfigError("--stage re-runs one stage, --resume the rest: choose one")
        from mainspring.pipelines import PipelineRunner, load_workspace, scripted_pipeline_model

        chosen = _resolve_model(model)
        workspace = load_workspace(directory)
        runner = PipelineRunner(
            workspace,
            model=chosen or scripted_pipeline_model(),
            gate=_pipeline_gate(console, yes=yes),
            on_approval=_pipeline_approval(console, yes=yes),
        )
        code = anyio.run(lambda: _run_pipeline(runner, console, stage=stage, resume=resume))
    raise typer.Exit(code)


app.command()(report)


async def _run_pipeline(
    runner: PipelineRunner, console: Console, *, stage: int | None, resume: bool
) -> int:
    """Run a pipeline at the terminal (:func:`mainspring.cli.pipeline.run_pipeline`)."""
    from mainspring.cli.pipeline import run_pipeline

    return await run_pipeline(runner, console, stage=stage, resume=resume)


def _demo_agent(model: Model | None) -> Agent:
    from mainspring.demo import demo_agent

    return demo_agent(model=model)


def _demo_message() -> str:
    from mainspring.demo import DEMO_MESSAGE

    return DEMO_MESSAGE


def _resolve_model(model: str) -> Model | None:
    """``None`` for the offline scripted model, else the adapter.

    Raises:
        ConfigError: What is missing to use it (exit 2 under failing_cleanly).
    """
    return None if model == "scripted" else load_model(model)


_CLICK = sys.modules[typer.BadParameter.__module__]
"""Click's exceptions, wherever this typer keeps them (click itself, or its own copy)."""


def main() -> None:
    """Entry point of the ``mainspring`` script: every exit code is an :class:`ExitCode`.

    A usage mistake click catches (an unknown option, a port out of range, a
    missing argument) is one line too, naming the ``--help`` to read.
    """
    command = typer.main.get_command(app)
    err = Console(stderr=True)
    try:
        code = command.main(prog_name="mainspring", standalone_mode=False)
    except typer.Abort:
        err.print("interrupted", style="yellow", highlight=False)
        code = ExitCode.INTERRUPTED
    except _CLICK.ClickException as exc:
        code = ExitCode.USAGE
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()  # the help itself: nothing was asked yet
        else:
            ctx = getattr(exc, "ctx", None)
            where = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
            error_line(err, f"{exc.format_message()}{where}")
    sys.exit(code if isinstance(code, int) else ExitCode.OK)
