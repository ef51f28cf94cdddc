"""Shell commands and sessions: deadlines, previews, logs, stdin, the registry bound, clean-up.

These run unsandboxed (``SandboxPolicy.unsandboxed()``) so they test the
process handling alone; ``test_sandbox.py`` runs the same tools in bubblewrap.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, Session, ToolResult
from mainspring.testing import collect
from mainspring.toolkits import SandboxPolicy, Shell, ShellLimits, WorkspaceError, shell_tools
from mainspring.toolkits.process import Log
from mainspring.toolkits.sandbox import BASE_PATH, child_env
from mainspring.toolkits.shell import ShellError

pytestmark = pytest.mark.anyio


def live_with(marker: str) -> list[int]:
    """Processes (not zombies) whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry))
    return members


def gone_eventually(check: object, *, within: float = 60.0) -> bool:
    """Whether ``check()`` becomes empty within a bound (a wait, not a timed assertion)."""
    assert callable(check)
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not check():
            return True
        time.sleep(0.05)
    return not check()


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    sh = Shell(tmp_path, sandbox=SandboxPolicy.unsandboxed())
    yield sh
    sh.close()


async def test_a_command_runs_in_the_workspace(shell: Shell, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    result = await shell.run("pwd; echo out; echo err >&2; exit 3", cwd="sub")
    assert result.status == "exited 3"
    assert result.exit_code == 3
    assert result.output == f"{tmp_path / 'sub'}\nout\nerr\n"


async def test_cwd_is_confined_like_every_path(shell: Shell) -> None:
    with pytest.raises(WorkspaceError, match=r"'\.\.' is not allowed"):
        await shell.run("true", cwd="..")


async def test_a_runaway_command_is_killed_at_its_deadline_with_its_group(shell: Shell) -> None:
    marker = "sleep 987001"
    result = await shell.run(f"{marker} & {marker} & wait", timeout_seconds=1)
    assert result.status == "killed (deadline)"
    assert gone_eventually(lambda: group_members(result.pid))
    assert gone_eventually(lambda: live_with(marker))


async def test_background_jobs_die_with_their_command(shell: Shell) -> None:
    marker = "sleep 987002"
    result = await shell.run(f"({marker} &) ; echo started")
    assert result.status == "exited 0"
    assert gone_eventually(lambda: live_with(marker))


async def test_a_cancelled_command_leaves_no_process_behind(shell: Shell) -> None:
    marker = "sleep 987003"
    async with anyio.create_task_group() as tg:
        tg.start_soon(shell.run, f"{marker}; {marker}")
        with anyio.fail_after(60):  # (only a hang) cancelled once the command runs
            while not live_with(marker):  # noqa: ASYNC110  # polling the process table
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert gone_eventually(lambda: live_with(marker))


async def test_long_output_keeps_its_head_and_tail(tmp_path: Path) -> None:
    limits = ShellLimits(preview_head=100, preview_tail=100, log_quota=1000)
    sh = Shell(tmp_path, sandbox=SandboxPolicy.unsandboxed(), limits=limits)
    result = await sh.run("seq 1 20000")
    lines = result.output.splitlines()
    assert lines[:3] == ["1", "2", "3"]
    assert lines[-1] == "20000"
    assert "bytes omitted" in result.output
    assert len(result.output) < 400


def test_the_log_keeps_absolute_offsets_past_its_quota() -> None:
    log = Log(quota=10, head=4)
    log.write(b"0123456789")
    log.write(b"abcdef")
    assert log.total == 16
    part = log.read(0, 100)
    assert (part.data, part.offset, part.dropped, part.next_offset) == (b"6789abcdef", 6, 6, 16)
    assert log.read(12, 2).data == b"cd"
    assert (
        log.preview(head=4, tail=3)
        == "0123\n… 9 bytes omitted (read the session log by offset for them) …\ndef"
    )


def test_the_environment_is_an_allowlist() -> None:
    host = {"SECRET_TOKEN": "s3cr3t", "KEEP": "yes", "PATH": "/evil"}
    env = child_env(["KEEP", "ABSENT"], {"EXTRA": "1"}, home="/w", source=host)
    assert env == {
        "PATH": BASE_PATH,
        "HOME": "/w",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": "/tmp",
        "KEEP": "yes",
        "EXTRA": "1",
    }


async def test_a_host_secret_does_not_reach_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAINSPRING_TEST_SECRET", "s3cr3t-value")
    monkeypatch.setenv("FORWARDED", "ok")
    sh = Shell(tmp_path, sandbox=SandboxPolicy.unsandboxed(), env_keys=["FORWARDED"])
    result = await sh.run("env")
    assert "s3cr3t-value" not in result.output
    assert "FORWARDED=ok" in result.output


# ---------------------------------------------------------------- sessions


async def test_a_session_waits_in_the_foreground_then_keeps_running(shell: Shell) -> None:
    started = await shell.start("echo ready; read line; echo got $line", wait=0.5)
    sid = started.split(":", 1)[0].removeprefix("session ")
    assert started.endswith(
        "running after " + started.split("after ")[1].split("\n")[0] + "\nready\n"
    )
    assert (await shell.write(sid, "hello\n")) == f"session {sid}: wrote 6 bytes"
    polled = await shell.poll(sid, wait=10)
    while "exited" not in polled:
        polled += await shell.poll(sid, wait=10)
    assert "got hello" in polled
    assert "exited 0" in polled


async def test_a_quick_session_returns_as_soon_as_it_ends(shell: Shell) -> None:
    report = await shell.start("echo done", wait=30)
    assert "exited 0" in report and report.endswith("\ndone\n")


async def test_close_stdin_ends_input(shell: Shell) -> None:
    report = await shell.start("cat; echo EOF-seen", wait=0.2)
    sid = report.split(":", 1)[0].removeprefix("session ")
    await shell.write(sid, "abc\n")
    shell.close_stdin(sid)
    out = ""
    while "exited" not in out:
        out += await shell.poll(sid, wait=10)
    printed = [line for line in out.splitlines() if not line.startswith("session ")]
    assert printed == ["abc", "EOF-seen"]


async def test_the_log_is_read_by_offset(shell: Shell) -> None:
    report = await shell.start("printf 'abcdefghij'", wait=30)
    sid = report.split(":", 1)[0].removeprefix("session ")
    assert shell.log(sid, offset=3, limit=4) == f"session {sid}: bytes 3-7 of 10\ndefg"


async def test_stop_kills_the_group_and_forgets_the_session(shell: Shell) -> None:
    marker = "sleep 987004"
    report = await shell.start(f"{marker} & {marker}", wait=0.2)
    sid = report.split(":", 1)[0].removeprefix("session ")
    assert sid in shell.list()
    stopped = await shell.stop(sid)
    assert "killed (stop)" in stopped
    assert gone_eventually(lambda: live_with(marker))
    assert shell.list() == "no shell sessions"
    with pytest.raises(ShellError, match="no shell session"):
        await shell.poll(sid)


async def test_a_session_is_killed_at_its_deadline_without_polling(shell: Shell) -> None:
    marker = "sleep 987005"
    report = await shell.start(marker, wait=0, timeout_seconds=0.5)
    sid = report.split(":", 1)[0].removeprefix("session ")
    assert gone_eventually(lambda: live_with(marker))
    assert "killed (deadline)" in await shell.poll(sid, wait=5)


# Counting sessions is the same code on either event loop (the others here run on both).
@pytest.mark.slow
@pytest.mark.parametrize(
    "anyio_backend", ["asyncio", pytest.param("trio", marks=pytest.mark.nightly)]
)
async def test_the_sixty_fifth_running_session_is_refused(shell: Shell) -> None:
    marker = "sleep 987006"
    for _ in range(64):
        await shell.start(marker, wait=0)
    with pytest.raises(ShellError, match="64 sessions are running"):
        await shell.start(marker, wait=0)
    assert shell.list().count("running") == 64
    shell.close()
    assert gone_eventually(lambda: live_with(marker), within=30)


async def test_finished_sessions_make_room(tmp_path: Path) -> None:
    sh = Shell(tmp_path, sandbox=SandboxPolicy.unsandboxed(), limits=ShellLimits(max_sessions=2))
    await sh.start("true", wait=10)
    await sh.start("true", wait=10)
    await sh.start("true", wait=10)
    assert len(sh.list().splitlines()) == 2


async def test_the_tools_through_the_engine(tmp_path: Path) -> None:
    calls: list[str | ScriptedResponse] = [
        ScriptedResponse(tool_calls=[ScriptedCall("shell", {"command": "echo hi"})]),
        "ok",
    ]
    tools = shell_tools(tmp_path, sandbox=SandboxPolicy.unsandboxed(), permission="auto")
    events = await collect(Session(Agent(model=ScriptedModel(calls), tools=tools)).send("go"))
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.content.startswith("exited 0 after ") and result.content.endswith("\nhi\n")


def test_starting_asks_and_polling_does_not(tmp_path: Path) -> None:
    shell_tool, session_tool = shell_tools(tmp_path, sandbox=SandboxPolicy.unsandboxed())
    assert shell_tool.policy.permission == "confirm"
    resolve = session_tool.policy.permission
    assert callable(resolve)
    assert resolve({"action": "start"}) == "confirm"
    assert resolve({"action": "write"}) == "confirm"
    assert resolve({"action": "poll"}) == "auto"
    assert resolve({"action": "stop"}) == "auto"
