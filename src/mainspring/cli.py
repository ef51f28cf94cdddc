"""The ``mainspring`` command line.

``mainspring demo`` runs the offline wallet agent: text streams live, tool
calls and results show, and the payment asks for approval at the terminal
(``--yes`` approves automatically, for scripts and CI).
"""

from __future__ import annotations

import errno
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.console import Console
from rich.prompt import Confirm
from rich.text import Text

from mainspring._agent_spec import load_agent, load_model
from mainspring._cli_chat import chat
from mainspring._cli_render import (
    Debug,
    Renderer,
    approval_panel,
    error_line,
    failing_cleanly,
    styled,
)
from mainspring._cli_serve import serve
from mainspring._cli_sessions import sessions_app
from mainspring._version import __version__
from mainspring.agent import Agent
from mainspring.codec import event_to_json
from mainspring.decisions import Approve, Decision, Reject
from mainspring.demo import DEMO_MESSAGE, demo_agent
from mainspring.errors import ConfigError
from mainspring.events import (
    ErrorEvent,
    Event,
    PendingAction,
)
from mainspring.models.base import Model
from mainspring.pipelines import (
    ContextLoaded,
    PipelineEvent,
    PipelineRunner,
    Stage,
    StageEvent,
    StageFinished,
    StageOutput,
    StageStart,
    load_workspace,
    scripted_pipeline_model,
)
from mainspring.session import Session
from mainspring.stores.urls import Stores, open_stores

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
                demo_agent(model=model),
                stores.sessions,
                session_id,
                checkpoint_store=stores.checkpoints,
                run_lock=stores.locks,
            )
        else:
            session = Session(demo_agent(model=model), **stores.session_kwargs())
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
            return 1
        if pending is None:
            return 0
        try:
            decision = _ask(console, pending, yes=yes)
        except _NoTerminal:
            if store_url is None:
                raise
            if store_url.startswith("memory:"):  # gone when this process exits
                later = "an in-memory store does not outlive this process; use sqlite:///…"
            else:
                later = (
                    f"continue later with mainspring demo --store {store_url} "
                    f"--session {session.session_id}"
                )
            console.print(
                styled(
                    ("waiting for approval", "yellow"),
                    f" (session {session.session_id}): {later}",
                )
            )
            return 0
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
        typer.Argument(help="'wallet' (payments) or 'coding' (read, patch, approve, apply)."),
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
            help="'scripted' (offline), or a model string such as anthropic:claude-sonnet-4-5, "
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
    debug: Debug = False,
) -> None:
    """Run an offline demo: the wallet (reads, then a payment to approve) or coding.

    Exit codes: 0 done (or waiting for approval in a store); 1 no terminal to ask
    on without --yes, or a failure; 2 a usage or configuration error; 130 interrupted.
    """
    console = Console(highlight=False)
    with failing_cleanly(debug=debug):
        if which not in ("wallet", "coding"):
            raise ConfigError(f"unknown demo {which!r}; choose 'wallet' or 'coding'")
        chosen = _resolve_model(model)
        try:
            if which == "coding":
                code = anyio.run(lambda: _run_coding_demo(message, yes=yes, console=console))
            else:
                code = anyio.run(
                    lambda: _run_demo(
                        message or DEMO_MESSAGE,
                        yes=yes,
                        console=console,
                        store_url=store,
                        session_id=session,
                        model=chosen,
                    )
                )
        except _NoTerminal as exc:
            error_line(Console(stderr=True), exc)
            raise typer.Exit(1) from None
    raise typer.Exit(code)


async def _start(
    agent: Agent, message: str, stores: Stores | None, session_id: str | None, *, yes: bool
) -> tuple[Session, AsyncIterator[Event]]:
    """A new session sending ``message``, or a stored paused one approved (``--yes``)."""
    kwargs = stores.session_kwargs() if stores is not None else {}
    if session_id is None:
        session = Session(agent, **kwargs)
        return session, session.send(message)
    if stores is None or stores.sessions is None:
        raise ConfigError("--session needs --store with a session store")
    session = await Session.load(
        agent,
        stores.sessions,
        session_id,
        checkpoint_store=stores.checkpoints,
        run_lock=stores.locks,
    )
    pending = session.pending
    if pending is None or not yes:
        raise ConfigError(f"session {session_id} is not waiting for a decision, or no --yes")
    return session, session.resume(pending.attempt_id, Approve())


async def _run_agent(
    agent: Agent,
    message: str,
    *,
    as_json: bool,
    yes: bool,
    store_url: str | None,
    session_id: str | None,
    console: Console,
) -> int:
    stores: Stores | None = await open_stores(store_url) if store_url else None
    try:
        session, stream = await _start(agent, message, stores, session_id, yes=yes)
        render = Renderer(console)
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
                    return 1
            if pending is None:
                return 0
            if not yes:
                holds = store_url is not None and not store_url.startswith("memory:")
                hint = f"; continue with --store {store_url} --session {session.session_id} --yes"
                _note(
                    console,
                    as_json,
                    f"waiting for a decision on {pending.name} (session {session.session_id})"
                    + (hint if holds else ""),
                )
                return 3
            stream = session.resume(pending.attempt_id, Approve())
    finally:
        if stores is not None:
            await stores.aclose()


def _note(console: Console, as_json: bool, text: str) -> None:
    """A line for people: on stderr when stdout carries JSON lines."""
    target = Console(stderr=True) if as_json else console
    target.print(styled(("note:", "yellow"), f" {text}"), highlight=False, soft_wrap=True)


@app.command()
def run(
    agent: Annotated[str, typer.Argument(help="The agent, as package.module:attribute.")],
    message: Annotated[str, typer.Argument(help="What the user says.")],
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
    debug: Debug = False,
) -> None:
    """Run one turn of your own agent, for scripts.

    Exit codes: 0 the turn completed; 1 the run ended in an error (or an
    internal error: one line, the traceback with --debug); 2 a usage or
    configuration error; 3 the turn waits for a decision (the session id is
    printed); 130 interrupted.
    """
    console = Console(highlight=False)
    with failing_cleanly(debug=debug):
        chosen = load_agent(agent)
        code = anyio.run(
            lambda: _run_agent(
                chosen,
                message,
                as_json=as_json,
                yes=yes,
                store_url=store,
                session_id=session,
                console=console,
            )
        )
    raise typer.Exit(code)


app.add_typer(sessions_app)
app.command()(chat)
app.command()(serve)
mcp_app = typer.Typer(name="mcp", help="Model Context Protocol.", no_args_is_help=True)
app.add_typer(mcp_app)


TOKEN_ENV = "MAINSPRING_MCP_TOKEN"
"""The environment variable `mcp serve --http` reads its bearer token from."""


def _mcp_token(token_file: Path | None) -> str | None:
    import os

    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read --token-file {token_file}: {exc.strerror}") from None
        if not token:
            raise ConfigError(f"--token-file {token_file} is empty")
        return token
    return os.environ.get(TOKEN_ENV, "").strip() or None


async def _serve_mcp(
    chosen: Agent,
    *,
    http: bool,
    host: str,
    port: int,
    expose_confirm: bool,
    skills: list[str],
    token: str | None,
) -> None:
    from mainspring.mcp.server import build_mcp_server, serve_stdio  # needs the extra
    from mainspring.skills import SkillCatalog

    catalog = SkillCatalog(skills) if skills else None
    server = build_mcp_server(chosen, skills=catalog, expose_confirm=expose_confirm)
    if not http:
        await serve_stdio(server)
        return
    try:
        await _serve_mcp_http(server, host=host, port=port, token=token)
    except BaseExceptionGroup as group:  # the task group's: show the one failure plainly
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


async def _serve_mcp_http(server: Any, *, host: str, port: int, token: str | None) -> None:
    from mainspring.mcp.server import serve_http

    async with anyio.create_task_group() as tg:
        bound = await tg.start(
            lambda task_status: serve_http(
                server,
                host=host,
                port=port,
                token=token,
                allow_remote=token is not None,
                task_status=task_status,
            )
        )
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        auth = " (bearer token required)" if token is not None else ""
        Console(stderr=True, highlight=False).print(
            f"serving MCP at http://{shown}:{bound}/mcp{auth}"
        )


@mcp_app.command("serve")
def mcp_serve(
    agent: Annotated[
        str | None,
        typer.Argument(help="The agent, as package.module:attribute (default: the demo agent)."),
    ] = None,
    http: Annotated[bool, typer.Option("--http", help="Streamable HTTP instead of stdio.")] = False,
    host: Annotated[
        str, typer.Option(help="HTTP host (loopback; another one needs a token).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port.")] = 8000,
    token_file: Annotated[
        Path | None,
        typer.Option("--token-file", help=f"A file holding the bearer token (else ${TOKEN_ENV})."),
    ] = None,
    expose_confirm: Annotated[
        bool,
        typer.Option(
            "--expose-confirm", help="Also expose tools that need approval, marked as such."
        ),
    ] = False,
    skills: Annotated[
        list[str] | None, typer.Option("--skills", help="A skills folder (repeatable).")
    ] = None,
    debug: Debug = False,
) -> None:
    """Serve an agent's tools (and skills, as prompts) to MCP clients.

    Over HTTP it prints its URL at start; with a token (``--token-file`` or
    ``$MAINSPRING_MCP_TOKEN``) every request needs ``Authorization: Bearer
    <token>``, and a non-loopback ``--host`` is refused without one.
    Ctrl-C stops it at once (exit 130). Exit codes: 1 the port is taken or a
    failure; 2 a configuration error or the mcp extra is missing.
    """
    with failing_cleanly(debug=debug):
        chosen = load_agent(agent) if agent is not None else demo_agent()
        token = _mcp_token(token_file) if http else None
        if http:
            from mainspring.mcp._http_guard import is_loopback

            if not is_loopback(host) and token is None:
                raise ConfigError(
                    f"refusing to serve MCP on {host!r} without a bearer token "
                    f"(set ${TOKEN_ENV} or pass --token-file)"
                )
        try:
            anyio.run(
                lambda: _serve_mcp(
                    chosen,
                    http=http,
                    host=host,
                    port=port,
                    expose_confirm=expose_confirm,
                    skills=skills or [],
                    token=token,
                )
            )
        except OSError as exc:  # the address is taken or cannot be bound
            if exc.errno == errno.EADDRINUSE:
                problem = f"{host}:{port} is in use; pick another --port"
            else:
                problem = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
            error_line(Console(stderr=True), problem)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            raise typer.Exit(130) from None  # a server stopped: nothing to report


pipeline_app = typer.Typer(name="pipeline", help="Folder pipelines.", no_args_is_help=True)
app.add_typer(pipeline_app)


def _pipeline_gate(console: Console, *, yes: bool) -> Callable[[Stage], bool]:
    def gate(stage: Stage) -> bool:
        console.print(styled((f"stage {stage.name} done", "bold"), f": review {stage.output_dir}"))
        if yes:
            console.print("[yellow]continuing automatically (--yes)[/]")
            return True
        if not _interactive():
            console.print("[yellow]no terminal to ask on; pass --yes to continue[/]")
            return False
        return _confirm("Continue to the next stage?", console, default=True)

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


async def _run_pipeline(
    runner: PipelineRunner, console: Console, *, stage: int | None, resume: bool
) -> int:
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
                return 1
    return 0


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
    done; 1 a stage halted, or a failure; 2 a configuration error; 130 interrupted.
    """
    console = Console(highlight=False)
    with failing_cleanly(debug=debug):
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


@app.command()
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


def _resolve_model(model: str) -> Model | None:
    """``None`` for the offline scripted model, else the adapter.

    Raises:
        ConfigError: What is missing to use it (exit 2 under failing_cleanly).
    """
    return None if model == "scripted" else load_model(model)


def main() -> None:
    """Entry point of the ``mainspring`` script."""
    app()
