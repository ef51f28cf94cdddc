"""Shell sessions belong to a conversation, and each caller has a bound of its own.

Unsandboxed (``SandboxPolicy.unsandboxed()``): what is tested is who may
reach a session, not the sandbox.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mainspring.toolkits import SandboxPolicy, Shell, ShellLimits
from mainspring.toolkits.shell import HOST, ShellError, ShellOwner

pytestmark = pytest.mark.anyio

ALICE = ShellOwner("user:alice", "principal/user/alice/session/s1")
ALICE_OTHER = ShellOwner("user:alice", "principal/user/alice/session/s2")
BOB = ShellOwner("user:bob", "principal/user/bob/session/s1")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _sid(report: str) -> str:
    return report.split()[1].rstrip(":")


async def test_a_caller_past_its_running_sessions_is_refused_and_keeps_them(
    tmp_path: Path,
) -> None:
    shell = Shell(
        tmp_path,
        sandbox=SandboxPolicy.unsandboxed(),
        limits=ShellLimits(max_sessions=4, max_sessions_per_caller=2),
    )
    try:
        first = _sid(await shell.start("cat", wait=0, owner=ALICE))
        second = _sid(await shell.start("cat", wait=0, owner=ALICE_OTHER))
        with pytest.raises(ShellError, match=r"you have 2 shell sessions running \(at most 2"):
            await shell.start("cat", wait=0, owner=ALICE)
        assert first in shell.list(owner=ALICE) and "running" in shell.list(owner=ALICE)
        assert second in shell.list(owner=ALICE_OTHER)
        assert shell._running_count() == 2  # the refused start left no process behind
        bob = _sid(await shell.start("cat", wait=0, owner=BOB))  # Bob's bound is his own
        assert shell.list(owner=BOB).startswith(f"{bob}: running")
        await shell.stop(first, owner=ALICE)
        third = _sid(await shell.start("cat", wait=0, owner=ALICE))  # room again
        assert third not in (first, second, bob)
    finally:
        shell.close()


async def test_another_conversation_never_reaches_a_session(tmp_path: Path) -> None:
    shell = Shell(tmp_path, sandbox=SandboxPolicy.unsandboxed())
    try:
        sid = _sid(await shell.start("cat", wait=0, owner=ALICE))
        for owner in (BOB, ALICE_OTHER, HOST):
            assert shell.list(owner=owner) == "no shell sessions"
            for act in (
                shell.poll(sid, wait=0, owner=owner),
                shell.write(sid, "x", owner=owner),
                shell.stop(sid, owner=owner),
            ):
                with pytest.raises(ShellError, match=f"no shell session '{sid}'"):
                    await act
            with pytest.raises(ShellError, match="no shell session"):
                shell.log(sid, owner=owner)
            with pytest.raises(ShellError, match="no shell session"):
                shell.close_stdin(sid, owner=owner)
        assert "running" in shell.list(owner=ALICE)
        assert await shell.write(sid, "hi\n", owner=ALICE) == f"session {sid}: wrote 3 bytes"
    finally:
        shell.close()
