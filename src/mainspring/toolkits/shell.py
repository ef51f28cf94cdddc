"""Shell commands and shell sessions inside a workspace, sandboxed by default.

``shell`` runs one command to its end (or its deadline) and returns the exit
status with a preview of its output that keeps the head and the tail.
``shell_session`` starts a command in the background and then, by session
id, polls its new output, writes to its stdin, closes it, reads its log by
byte offset, lists sessions and stops them. A start waits in the foreground
for ``wait`` seconds (returning early when the command ends) while its total
``timeout`` keeps running; at that deadline the process group is killed even
if nobody is polling.

Sessions belong to the conversation that started them (the caller and the
session, ``ToolContext.conversation``): another conversation, or another
principal, neither lists, polls, reads, writes to nor stops them — to it they
do not exist. A :class:`Shell` holds at most ``max_sessions`` (64) sessions;
finished ones make room first, and a start is refused when all of them are
running, or when the caller already runs ``max_sessions_per_caller`` (8). Every
process group is killed on stop, when the call that owns it is cancelled,
when the shell is closed, and when the interpreter exits.
"""

from __future__ import annotations

import atexit
import secrets
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio.to_thread

from mainspring.errors import ConfigError, ToolError
from mainspring.toolkits.confine import FileWorkspace
from mainspring.toolkits.files import Roots, workspace_of
from mainspring.toolkits.process import Process
from mainspring.toolkits.sandbox import SandboxPolicy, child_env
from mainspring.tools.context import ToolContext
from mainspring.tools.define import Tool, tool
from mainspring.tools.policy import Flag, Permission, ToolInput

__all__ = ["HOST", "Shell", "ShellLimits", "ShellOwner", "ShellResult", "shell_tools"]

Action = Literal["start", "poll", "write", "close_stdin", "stop", "list", "log"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShellLimits:
    """Bounds on commands and sessions."""

    max_sessions: int = 64
    max_sessions_per_caller: int = 8
    """Sessions one caller (``ToolContext.caller``) may have running at once."""
    log_quota: int = 1024 * 1024
    """Bytes of output a session keeps (the newest; the first ``preview_head`` always)."""
    preview_head: int = 6_000
    preview_tail: int = 10_000
    default_timeout: float = 120.0
    max_timeout: float = 3600.0
    max_input: int = 64 * 1024
    max_log_read: int = 64 * 1024


@dataclass(frozen=True, slots=True)
class ShellResult:
    """How a command ended, and what it printed (head and tail)."""

    status: str
    exit_code: int | None
    output: str
    pid: int
    """The process group that ran it (gone once the result exists)."""
    seconds: float

    def text(self) -> str:
        """As the model sees it."""
        return f"{self.status} after {self.seconds:.1f}s\n{self.output}"


class ShellError(ToolError):
    """A shell request that cannot be served (unknown session, too many sessions…)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, tool="shell_session")


@dataclass(frozen=True, slots=True)
class ShellOwner:
    """Who a session belongs to: a caller (its key) and one of its conversations."""

    caller: str
    conversation: str

    @classmethod
    def of(cls, ctx: ToolContext) -> ShellOwner:
        """The conversation of a tool call (its caller and session)."""
        return cls(ctx.caller.key, ctx.conversation)


HOST = ShellOwner("", "")
"""The owner of sessions the host starts on a :class:`Shell` itself (not through a tool)."""

_SHELLS: weakref.WeakSet[Shell] = weakref.WeakSet()


@atexit.register
def _kill_everything() -> None:  # pragma: no cover - runs at interpreter exit
    for shell in list(_SHELLS):
        shell.close()


class Shell:
    """Commands and sessions for one workspace, under one sandbox policy."""

    def __init__(
        self,
        roots: Roots,
        *,
        sandbox: SandboxPolicy | None = None,
        env_keys: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        limits: ShellLimits = ShellLimits(),
        argv: Sequence[str] = ("/bin/sh", "-c"),
    ) -> None:
        """Run in ``roots`` (a :class:`FileWorkspace` or its roots) under ``sandbox``.

        Args:
            roots: Commands run in the first root (or a directory below it).
            sandbox: Defaults to :meth:`SandboxPolicy.workspace` of the first root.
            env_keys: Host environment variables passed through (nothing else is).
            env: More variables, set as given.
            limits: Sessions, log quota, previews, timeouts.
            argv: The shell; the command is appended as its last argument.
        """
        self.workspace: FileWorkspace = workspace_of(roots)
        root = self.workspace.roots[0]
        self.sandbox = SandboxPolicy.workspace(root) if sandbox is None else sandbox
        self.limits = limits
        self._env = child_env(env_keys, env, home=str(root))
        self._argv = tuple(argv)
        self._sessions: dict[str, Process] = {}
        self._commands: dict[str, str] = {}
        self._cursor: dict[str, int] = {}
        self._owners: dict[str, ShellOwner] = {}
        self._lock = threading.Lock()
        _SHELLS.add(self)

    # ----------------------------------------------------------- processes

    def _cwd(self, cwd: str) -> Path:
        location = self.workspace.locate(cwd)
        with self.workspace.open_dir(location):  # it exists and is reached without links
            pass
        return self.workspace.roots[location.root].joinpath(*location.parts)

    def _timeout(self, timeout: float | None) -> float:
        value = self.limits.default_timeout if timeout is None else timeout
        if not 0 < value <= self.limits.max_timeout:
            raise ShellError(f"timeout must be in (0, {self.limits.max_timeout}] seconds")
        return value

    def spawn(
        self, command: str, *, cwd: str = ".", timeout_seconds: float | None = None
    ) -> Process:
        """Start ``command`` (sandbox checked first; never run unsandboxed instead).

        Raises:
            SandboxUnavailable: the policy's sandbox cannot run.
        """
        self.sandbox.check()
        where = self._cwd(cwd)
        argv = self.sandbox.command([*self._argv, command], cwd=where)
        deadline = time.monotonic() + self._timeout(timeout_seconds)
        return Process(
            argv,
            cwd=where,
            env=dict(self._env),
            deadline=deadline,
            log_quota=self.limits.log_quota,
            limits=self.sandbox.limits,
        )

    def _result(self, proc: Process) -> ShellResult:
        out = proc.log.preview(head=self.limits.preview_head, tail=self.limits.preview_tail)
        return ShellResult(proc.status(), proc.returncode, out, proc.pid, proc.elapsed())

    async def run(
        self, command: str, *, cwd: str = ".", timeout_seconds: float | None = None
    ) -> ShellResult:
        """Run ``command`` to its end or its deadline (then its process group is killed).

        Cancelling kills the process group and waits (shielded, within the
        grace period) for it to be gone.
        """
        proc = await anyio.to_thread.run_sync(
            lambda: self.spawn(command, cwd=cwd, timeout_seconds=timeout_seconds)
        )
        try:
            while not await anyio.to_thread.run_sync(proc.wait_ended, 1.0, abandon_on_cancel=True):
                pass
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(proc.kill, "cancel")
            raise
        return self._result(proc)

    # ------------------------------------------------------------ sessions

    def _admit(self, proc: Process, command: str, owner: ShellOwner) -> str:
        with self._lock:
            try:
                self._check_room(owner)
            except ShellError:
                proc.kill("refused")
                raise
            if len(self._sessions) >= self.limits.max_sessions:
                done = [sid for sid, p in self._sessions.items() if not p.running]
                if not done:
                    proc.kill("refused")
                    raise ShellError(
                        f"{self.limits.max_sessions} sessions are running; stop one first"
                    )
                self._forget(done[0])
            sid = "sh_" + secrets.token_hex(4)
            self._sessions[sid] = proc
            self._commands[sid] = command
            self._cursor[sid] = 0
            self._owners[sid] = owner
            return sid

    def _forget(self, sid: str) -> None:
        self._sessions.pop(sid, None)
        self._commands.pop(sid, None)
        self._cursor.pop(sid, None)
        self._owners.pop(sid, None)

    def _get(self, sid: str | None, owner: ShellOwner) -> Process:
        proc = self._sessions.get(sid or "")
        if proc is None or self._owners.get(sid or "") != owner:  # another's: not there
            raise ShellError(f"no shell session {sid!r}; list them with action='list'")
        return proc

    def _running_count(self) -> int:
        return sum(p.running for p in self._sessions.values())

    def _check_room(self, owner: ShellOwner) -> None:
        """Refuse a start past ``max_sessions`` running, or the caller's own limit (locked)."""
        if self._running_count() >= self.limits.max_sessions:
            raise ShellError(f"{self.limits.max_sessions} sessions are running; stop one first")
        mine = sum(
            p.running
            for sid, p in self._sessions.items()
            if self._owners.get(sid, HOST).caller == owner.caller
        )
        if owner != HOST and mine >= self.limits.max_sessions_per_caller:
            raise ShellError(
                f"you have {mine} shell sessions running (at most"
                f" {self.limits.max_sessions_per_caller} per caller); stop one first"
            )

    async def start(
        self,
        command: str,
        *,
        cwd: str = ".",
        wait: float = 5.0,
        timeout_seconds: float | None = None,
        owner: ShellOwner = HOST,
    ) -> str:
        """Start a session of ``owner``'s; wait up to ``wait`` seconds; report its state.

        Refused (and nothing started) when ``max_sessions`` sessions are
        running, or ``owner``'s caller runs ``max_sessions_per_caller``.
        Cancelled during the wait, the session is stopped.
        """
        with self._lock:
            self._check_room(owner)
        proc = await anyio.to_thread.run_sync(
            lambda: self.spawn(command, cwd=cwd, timeout_seconds=timeout_seconds)
        )
        sid = self._admit(proc, command, owner)
        try:
            await anyio.to_thread.run_sync(proc.wait_ended, max(0.0, wait), abandon_on_cancel=True)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(proc.kill, "cancel")
            raise
        return self._report(sid, proc)

    def _report(self, sid: str, proc: Process) -> str:
        cursor = self._cursor.get(sid, 0)
        chunk = proc.log.read(cursor, self.limits.preview_head + self.limits.preview_tail)
        self._cursor[sid] = chunk.next_offset
        text = chunk.data.decode("utf-8", errors="replace")
        notes = [f"session {sid}: {proc.status()} after {proc.elapsed():.1f}s"]
        if chunk.dropped:
            notes.append(f"{chunk.dropped} bytes dropped before offset {chunk.offset}")
        if chunk.next_offset < proc.log.total:
            notes.append(f"more output from offset {chunk.next_offset} (action='log')")
        return "; ".join(notes) + "\n" + text

    async def poll(self, sid: str | None, *, wait: float = 5.0, owner: ShellOwner = HOST) -> str:
        """New output since the last poll (waiting up to ``wait`` seconds for some)."""
        proc = self._get(sid, owner)
        seen = self._cursor.get(sid or "", 0)
        await anyio.to_thread.run_sync(
            lambda: proc.wait_changed(max(0.0, wait), seen=seen), abandon_on_cancel=True
        )
        return self._report(sid or "", proc)

    async def write(self, sid: str | None, data: str, *, owner: ShellOwner = HOST) -> str:
        """Send ``data`` to the session's stdin."""
        proc = self._get(sid, owner)
        raw = data.encode()
        if len(raw) > self.limits.max_input:
            raise ShellError(f"input is over {self.limits.max_input} bytes")
        await anyio.to_thread.run_sync(proc.write_stdin, raw, abandon_on_cancel=True)
        return f"session {sid}: wrote {len(raw)} bytes"

    def close_stdin(self, sid: str | None, *, owner: ShellOwner = HOST) -> str:
        """Close the session's stdin (end of input)."""
        self._get(sid, owner).close_stdin()
        return f"session {sid}: stdin closed"

    async def stop(self, sid: str | None, *, owner: ShellOwner = HOST) -> str:
        """Kill the session's process group and forget the session; its last output."""
        proc = self._get(sid, owner)
        await anyio.to_thread.run_sync(proc.kill, "stop")
        await anyio.to_thread.run_sync(proc.wait_ended, 5.0)
        report = self._report(sid or "", proc)
        with self._lock:
            self._forget(sid or "")
        return report

    def list(self, *, owner: ShellOwner = HOST) -> str:
        """One line per session of ``owner``'s: id, state, output size, command."""
        with self._lock:
            rows = [
                f"{sid}: {p.status()}, {p.log.total} bytes of output, {self._commands[sid][:80]!r}"
                for sid, p in self._sessions.items()
                if self._owners.get(sid) == owner
            ]
        return "\n".join(rows) if rows else "no shell sessions"

    def log(
        self,
        sid: str | None,
        *,
        offset: int = 0,
        limit: int | None = None,
        owner: ShellOwner = HOST,
    ) -> str:
        """The session's output from byte ``offset`` (bounded)."""
        proc = self._get(sid, owner)
        size = min(limit or self.limits.max_log_read, self.limits.max_log_read)
        chunk = proc.log.read(offset, size)
        head = f"session {sid}: bytes {chunk.offset}-{chunk.next_offset} of {proc.log.total}"
        if chunk.dropped:
            head += f" ({chunk.dropped} earlier bytes were dropped at the log quota)"
        return head + "\n" + chunk.data.decode("utf-8", errors="replace")

    async def act(
        self,
        action: Action,
        *,
        command: str | None = None,
        session_id: str | None = None,
        input: str | None = None,
        offset: int = 0,
        wait: float = 5.0,
        timeout_seconds: float | None = None,
        cwd: str = ".",
        owner: ShellOwner = HOST,
    ) -> str:
        """One ``shell_session`` action of ``owner``'s (``wait`` is kept within 0-60 seconds)."""
        wait = min(max(wait, 0.0), 60.0)
        if action == "start":
            if not command:
                raise ShellError("start needs a command")
            return await self.start(
                command, cwd=cwd, wait=wait, timeout_seconds=timeout_seconds, owner=owner
            )
        if action == "poll":
            return await self.poll(session_id, wait=wait, owner=owner)
        if action == "write":
            return await self.write(session_id, input or "", owner=owner)
        if action == "close_stdin":
            return self.close_stdin(session_id, owner=owner)
        if action == "stop":
            return await self.stop(session_id, owner=owner)
        if action == "log":
            return self.log(session_id, offset=offset, owner=owner)
        return self.list(owner=owner)

    def close(self) -> None:
        """Kill every session's process group."""
        with self._lock:
            procs = list(self._sessions.values())
            self._sessions.clear()
            self._commands.clear()
            self._cursor.clear()
            self._owners.clear()
        for proc in procs:
            proc.kill("close")


# -------------------------------------------------------------------- tools


def shell_tools(
    roots: Roots | Shell,
    *,
    sandbox: SandboxPolicy | None = None,
    permission: Permission = "confirm",
    env_keys: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    limits: ShellLimits = ShellLimits(),
) -> list[Tool]:
    """``shell`` and ``shell_session`` for one :class:`Shell` (sandboxed by default).

    Starting a command or writing to one is ``permission`` (confirm by default);
    polling, reading logs, listing, closing stdin and stopping never ask. A
    session is its conversation's alone (see the module docstring).
    """
    if isinstance(roots, Shell):
        if sandbox is not None or env_keys or env:
            raise ConfigError("pass sandbox and environment settings to the Shell itself")
        sh = roots
    else:
        sh = Shell(roots, sandbox=sandbox, env_keys=env_keys, env=env, limits=limits)

    @tool(
        name="shell",
        permission=permission,
        flags={Flag.MUTATING},
        max_result_chars=20_000,
        timeout=sh.limits.max_timeout + 30.0,  # the command's own deadline comes first
    )
    async def shell(command: str, cwd: str = ".", timeout_seconds: float | None = None) -> str:
        """Run a shell command in the workspace (sandboxed) and return its status and output.

        Args:
            command: A /bin/sh command line.
            cwd: Directory to run in, relative to the workspace root.
            timeout_seconds: Seconds before its process group is killed.
        """
        return (await sh.run(command, cwd=cwd, timeout_seconds=timeout_seconds)).text()

    def tier(args: ToolInput) -> Permission:
        return permission if args.get("action") in ("start", "write") else "auto"

    @tool(name="shell_session", permission=tier, flags={Flag.MUTATING}, max_result_chars=20_000)
    async def shell_session(
        action: Action,
        ctx: ToolContext,
        command: str | None = None,
        session_id: str | None = None,
        input: str | None = None,
        offset: int = 0,
        wait: float = 5.0,
        timeout_seconds: float | None = None,
        cwd: str = ".",
    ) -> str:
        """Long-running commands: start, poll, write, close_stdin, stop, list, log.

        Args:
            action: What to do.
            ctx: The run context (not shown to the model).
            command: For start: the /bin/sh command line.
            session_id: For every action but start and list.
            input: For write: text sent to the command's stdin.
            offset: For log: the byte offset to read from.
            wait: For start and poll: seconds to wait for output or the end.
            timeout_seconds: For start: seconds before the session's process group is killed.
            cwd: For start: directory relative to the workspace root.
        """
        return await sh.act(
            action,
            command=command,
            session_id=session_id,
            input=input,
            offset=offset,
            wait=wait,
            timeout_seconds=timeout_seconds,
            cwd=cwd,
            owner=ShellOwner.of(ctx),
        )

    return [shell, shell_session]
