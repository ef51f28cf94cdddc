"""``mainspring chat``: talk to an agent at the terminal.

The terminal belongs to the main thread: ``input()``, with line editing and
history from the standard library's ``readline`` where Python has it. The
engine runs on an event loop in a second thread (an anyio blocking portal)
that lives as long as the chat, so the session and its stores stay on one
loop from turn to turn. While a run streams, the main thread only waits for
it, so Ctrl-C arrives there as KeyboardInterrupt and becomes
``Session.cancel()``: the run ends with ``turn_complete(cancelled)`` and the
session takes the next message.

Exit codes: 0 after ``/exit`` or Ctrl-D; 130 after Ctrl-C on an empty prompt
(on a line with text, Ctrl-C only clears it); 2 a usage or configuration error
at start (agent, model or store); 4 the store cannot be reached; 1 any other
failure at start (see :class:`~mainspring.cli.exit.ExitCode`). An error inside
the chat (a bad command, an unknown session, an edit the tool refuses) is one
line, and the chat goes on.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import shlex
import signal
import threading
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import replace
from functools import partial
from types import FrameType
from typing import Annotated

import anyio
import typer
from anyio.from_thread import BlockingPortal, start_blocking_portal
from pydantic import JsonValue
from rich.console import Console

from mainspring._agent_spec import load_agent, load_model
from mainspring.agent import Agent
from mainspring.cli.exit import Debug, ExitCode, failing_cleanly, require_database, show_failure
from mainspring.cli.render import Renderer, approval_panel, styled
from mainspring.decisions import Approve, Decision, Reject
from mainspring.demo import demo_agent
from mainspring.errors import ConfigError
from mainspring.events import Event, PendingAction, StreamStarted, ToolCallDelta, UsageEvent
from mainspring.session import Session
from mainspring.stores.urls import Stores, open_stores

__all__ = ["chat"]

PROMPT = "you> "
DECIDE = "approve? y / n / e(dit) > "
DECLINED = "The user declined at the terminal."

HELP = """\
/approve [field=value ...]  approve what waits, editing modifiable fields
/reject [reason]            reject it (the model is told the reason)
/sessions                   the sessions the store holds
/resume ID                  continue a stored session
/help                       this list
/exit                       leave (Ctrl-D too; Ctrl-C on an empty line: 130)
At an approval prompt: y approves, n rejects, e edits the fields first.
While a run streams, Ctrl-C cancels it; the session stays usable."""

_QUIET = (StreamStarted, UsageEvent, ToolCallDelta)
"""Events that show nothing: the spinner keeps turning through them."""


class _Spinner:
    """Turns on a terminal until the run shows something (nothing on a pipe)."""

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    def __init__(self, console: Console) -> None:
        self._console = console
        self._scope = anyio.CancelScope()
        self._drawn = False
        self.active = console.is_terminal

    async def run(self) -> None:
        with self._scope:
            for frame in itertools.cycle(self.FRAMES):
                if not self.active:
                    return
                self._write(f"\r{frame} ")
                self._drawn = True
                await anyio.sleep(0.1)

    def stop(self) -> None:
        if not self.active:
            return
        self.active = False
        self._scope.cancel()
        if self._drawn:
            self._write("\r\x1b[2K")  # erase the spinner's line

    def _write(self, text: str) -> None:
        self._console.file.write(text)
        self._console.file.flush()


def _line_buffer() -> Callable[[], str] | None:
    """What readline holds of the line being typed; ``None`` without readline."""
    try:
        import readline  # importing it gives input() line editing and history
    except ImportError:  # not every Python has it; input() still works, plainly
        return None
    return readline.get_line_buffer


def _value(text: str, current: JsonValue | None) -> JsonValue:
    """A field's new value as typed: text for a text field, else JSON (or the text)."""
    if isinstance(current, str):
        return text
    try:
        value: JsonValue = json.loads(text)
    except ValueError:
        return text
    return value


class _Chat:
    """The REPL over one session at a time (see the module docstring)."""

    def __init__(
        self,
        portal: BlockingPortal,
        agent: Agent,
        stores: Stores,
        *,
        spec: str | None,
        store_url: str | None,
        console: Console,
        debug: bool,
    ) -> None:
        self.portal = portal
        self.agent = agent
        self.stores = stores
        self.spec = spec
        self.store_url = store_url
        self.console = console
        self.err = Console(stderr=True)
        self.debug = debug
        self.session: Session | None = None
        self._stopping = False
        self._buffer = _line_buffer()

    @property
    def durable(self) -> bool:
        """Whether the store keeps sessions past this process (so "continue later" is true)."""
        return (
            self.store_url is not None
            and self.stores.sessions is not None
            and not self.store_url.startswith("memory:")
        )

    def _current(self) -> Session:
        assert self.session is not None, "open() comes first"
        return self.session

    # ------------------------------------------------------------ the loop

    def open(self, session_id: str | None) -> None:
        """Start a new session, or continue the stored one ``session_id``."""
        if session_id is not None:
            self._resume(session_id)
            return
        kwargs = self.stores.session_kwargs()
        self.session = self.portal.call(lambda: Session(self.agent, **kwargs))
        self.console.print(
            styled(
                (f"chat with {self.agent.name}", "bold"),
                f" (session {self.session.session_id}) · /help lists the commands",
            ),
            soft_wrap=True,
        )

    def loop(self) -> int:
        """Read and act until the user leaves; the exit code."""
        while True:
            pending = self._current().pending
            try:
                line = self._read(DECIDE if pending else PROMPT)
            except (EOFError, KeyboardInterrupt) as leaving:
                self.console.print()
                self._farewell()
                return ExitCode.INTERRUPTED if isinstance(leaving, KeyboardInterrupt) else 0
            if line is None or not line.strip():
                continue
            try:
                if self._handle(line.strip(), pending):
                    self._farewell()
                    return ExitCode.OK
            except Exception as exc:  # one line, and the chat goes on
                show_failure(self.err, exc, debug=self.debug)

    def close(self) -> None:
        """Tear the session down (its stored state stays)."""
        if self.session is not None:
            self.portal.call(self.session.aclose)

    def _read(self, prompt: str) -> str | None:
        """A line; ``None`` when Ctrl-C cleared what was typed.

        Raises:
            KeyboardInterrupt: Ctrl-C on an empty line.
            EOFError: Ctrl-D.
        """
        read_buffer = self._buffer
        if read_buffer is None or threading.current_thread() is not threading.main_thread():
            return input(prompt)
        typed = [""]

        def interrupted(signum: int, frame: FrameType | None) -> None:
            typed[0] = read_buffer()  # readline clears the line once the interrupt is raised
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGINT, interrupted)
        try:
            return input(prompt)
        except KeyboardInterrupt:
            if not typed[0]:
                raise
            self.console.print()
            return None
        finally:
            signal.signal(signal.SIGINT, previous)

    def _handle(self, line: str, pending: PendingAction | None) -> bool:
        """Act on one line; ``True`` to leave."""
        if line.startswith("/"):
            return self._command(line)
        if pending is None:
            session = self._current()
            self._run(lambda: session.send(line))
            return False
        answer = line.lower()
        if answer in ("y", "yes"):
            self._decide(Approve())
        elif answer in ("n", "no"):
            self._decide(Reject(DECLINED))
        elif answer in ("e", "edit"):
            edits = self._edit(pending)
            if edits is not None:
                self._decide(Approve(edits=edits))
        else:
            self._note(
                f"{pending.name} waits for a decision: y approves, n rejects, e edits "
                "(or /reject REASON, /help)"
            )
        return False

    def _command(self, line: str) -> bool:
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        if name in ("/exit", "/quit"):
            return True
        if name == "/help":
            self.console.print(HELP, markup=False, highlight=False, soft_wrap=True)
        elif name == "/approve":
            self._decide(Approve(edits=self._edits_of(rest)))
        elif name == "/reject":
            self._decide(Reject(rest or DECLINED))
        elif name == "/sessions":
            self._list_sessions()
        elif name == "/resume":
            if not rest:
                raise ConfigError("/resume needs a session id (/sessions lists them)")
            self._resume(rest)
        else:
            raise ConfigError(f"unknown command {name}: /help lists them")
        return False

    # ------------------------------------------------------------ decisions

    def _waiting(self) -> PendingAction:
        pending = self._current().pending
        if pending is None:
            raise ConfigError("nothing waits for a decision")
        return pending

    def _decide(self, decision: Decision) -> None:
        session, pending = self._current(), self._waiting()
        self._run(lambda: session.resume(pending.attempt_id, decision))

    def _edits_of(self, text: str) -> dict[str, JsonValue]:
        """``field=value ...`` (shell quoting) as edits of the waiting action's input."""
        pending = self._waiting()
        edits: dict[str, JsonValue] = {}
        for word in shlex.split(text):
            field, sep, raw = word.partition("=")
            if not sep or not field:
                raise ConfigError(f"an edit is field=value, not {word!r}")
            edits[field] = _value(raw, pending.input.get(field))
        return edits

    def _edit(self, pending: PendingAction) -> dict[str, JsonValue] | None:
        """Ask for each modifiable field (Enter keeps it); ``None`` if abandoned."""
        if not pending.modifiable_fields:
            self._note(f"{pending.name} has no modifiable fields: y or n")
            return None
        edits: dict[str, JsonValue] = {}
        for field in pending.modifiable_fields:
            current = pending.input.get(field)
            shown = json.dumps(current) if field in pending.input else "unset"
            try:
                text = self._read(f"  {field} [{shown}]: ")
            except (EOFError, KeyboardInterrupt):
                text = None
                self.console.print()
            if text is None:
                self._note("edit abandoned; the action still waits")
                return None
            if text.strip():
                edits[field] = _value(text.strip(), current)
        return edits

    # ------------------------------------------------------------ running

    def _run(self, start: Callable[[], AsyncGenerator[Event, None]]) -> None:
        """Stream a run to the terminal; Ctrl-C meanwhile cancels it."""
        self._stopping = False
        finished = self.portal.start_task_soon(self._stream, start)
        while True:
            try:
                # Polled, not one blocking wait: the kernel may hand Ctrl-C's signal to
                # the loop's thread, and Python runs the handler only once this thread
                # runs again (a wait with no timeout would hold it off to the run's end).
                while True:
                    try:
                        finished.result(timeout=0.1)
                        break
                    except concurrent.futures.TimeoutError:
                        continue
                break
            except KeyboardInterrupt:
                if self._stopping:  # a write still finishing: it is never cut short
                    self._note("stopping: a running write finishes first")
                self.portal.call(self._interrupt)
        pending = self._current().pending
        if pending is not None:
            self._show_pending(pending)

    def _interrupt(self) -> None:
        """On the loop: cancel the run (again, if it had not started when first asked)."""
        self._stopping = True
        self._current().cancel()

    async def _stream(self, start: Callable[[], AsyncGenerator[Event, None]]) -> None:
        render = Renderer(self.console, debug=self.debug)
        spinner = _Spinner(self.console)
        failure: list[Exception] = []
        async with aclosing(start()) as events, anyio.create_task_group() as tg:
            tg.start_soon(spinner.run)
            try:
                async for event in events:
                    if self._stopping:  # Ctrl-C came before the run had begun
                        self._current().cancel()
                    if not isinstance(event, _QUIET):
                        spinner.stop()
                    render.show(event)
            except Exception as exc:  # re-raised outside the task group, ungrouped
                failure.append(exc)
            finally:
                spinner.stop()
        if failure:
            raise failure[0]

    def _show_pending(self, pending: PendingAction) -> None:
        session_id = self._current().session_id
        self.console.print(approval_panel(pending))
        edits = (
            "e edits " + ", ".join(pending.modifiable_fields) if pending.modifiable_fields else ""
        )
        hint = f"session {session_id} waits for your decision: y approves, n rejects"
        hint += f", {edits}" if edits else ""
        if self.durable:
            hint += f"; or decide later: {self._again(session_id)}"
        self._note(hint)

    # ------------------------------------------------------------ sessions

    def _list_sessions(self) -> None:
        store = self.stores.sessions
        current = self._current().session_id
        if store is None:
            self._note(
                f"no --store: this session ({current}) lives in memory only; "
                "start with --store sqlite:///chat.db to keep sessions"
            )
            return
        ids = self.portal.call(partial(store.session_ids, limit=100))
        if not ids:
            self._note("the store holds no sessions yet (a session is saved at its first message)")
        for session_id in ids:
            marker = "  (this one)" if session_id == current else ""
            self.console.print(f"{session_id}{marker}", markup=False, highlight=False)

    def _resume(self, session_id: str) -> None:
        store = self.stores.sessions
        if store is None:
            raise ConfigError("resuming needs --store with sessions, e.g. sqlite:///chat.db")
        loaded = self.portal.call(
            partial(
                Session.load,
                self.agent,
                store,
                session_id,
                checkpoint_store=self.stores.checkpoints,
                run_lock=self.stores.locks,
            )
        )
        if loaded.state.agent_name != self.agent.name:
            self.portal.call(loaded.aclose)
            raise ConfigError(
                f"session {session_id} belongs to the agent {loaded.state.agent_name!r}; "
                f"this chat runs {self.agent.name!r}"
            )
        self.close()
        self.session = loaded
        messages = loaded.messages
        self.console.print(
            styled(
                (f"resumed session {loaded.session_id}", "bold"),
                f" ({len(messages)} messages, {self.agent.name})",
            ),
            soft_wrap=True,
        )
        last = next((m for m in reversed(messages) if m.role == "assistant" and m.text), None)
        if last is not None:
            self.console.print(styled(("last answer: ", "dim"), last.text))
        if loaded.pending is not None:
            self._show_pending(loaded.pending)

    def _again(self, session_id: str) -> str:
        """The command that continues ``session_id`` (quoted: it works when pasted)."""
        agent = [self.spec] if self.spec else []
        store = ["--store", self.store_url or ""]
        return shlex.join(["mainspring", "chat", *agent, *store, "--session", session_id])

    def _farewell(self) -> None:
        session = self.session
        if session is None or not self.durable:
            return
        waits = f" ({session.pending.name} waits for a decision)" if session.pending else ""
        self._note(
            f"session {session.session_id} is kept{waits}: {self._again(session.session_id)}"
        )

    def _note(self, text: str) -> None:
        self.console.print(styled(("note:", "yellow"), f" {text}"), highlight=False, soft_wrap=True)


def _chat(
    agent: Agent,
    *,
    spec: str | None,
    store_url: str | None,
    session_id: str | None,
    console: Console,
    debug: bool,
) -> int:
    with start_blocking_portal() as portal:
        stores = portal.call(open_stores, store_url) if store_url else Stores()
        repl = _Chat(
            portal, agent, stores, spec=spec, store_url=store_url, console=console, debug=debug
        )
        try:
            repl.open(session_id)
            return repl.loop()
        finally:
            repl.close()
            portal.call(stores.aclose)


def chat(
    agent: Annotated[
        str | None,
        typer.Argument(help="Your agent, as package.module:attribute (default: the demo agent)."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="A model string to use instead of the agent's own, e.g. "
            "anthropic:claude-sonnet-4-5 (the demo agent's own is offline)."
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(help="Keep sessions in a store, e.g. sqlite:///chat.db (for /resume)."),
    ] = None,
    session: Annotated[
        str | None, typer.Option(help="Continue this stored session (as /resume does).")
    ] = None,
    debug: Debug = False,
) -> None:
    """Talk to an agent: streamed answers, approvals at the prompt, /help for commands.

    Ctrl-C cancels a run in progress; Ctrl-D or /exit leaves (exit 0), Ctrl-C on
    an empty prompt too (exit 130). Exit 2: a usage or configuration error at
    start; 4: the store cannot be reached.
    """
    console = Console(highlight=False)
    with failing_cleanly(debug=debug):
        chosen = load_agent(agent) if agent else demo_agent()
        if model is not None and model != "scripted":
            chosen = replace(chosen, model=load_model(model))
        if session is not None:
            if store is None:
                raise ConfigError("--session needs --store, e.g. --store sqlite:///chat.db")
            require_database(store)
        code = _chat(
            chosen, spec=agent, store_url=store, session_id=session, console=console, debug=debug
        )
    raise typer.Exit(code)
