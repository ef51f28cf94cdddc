"""The bubblewrap sandbox: a command cannot read, write or connect outside its workspace.

Every test here needs ``bwrap`` and skips with a reason starting ``needs
bwrap`` without it (under ``MAINSPRING_CI=1`` such a skip fails: CI installs
bubblewrap). The escapes are tried by real commands; each test also shows
the same command working where it is allowed, so a refusal is the
sandbox's doing, not a broken test.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mainspring.toolkits import SandboxPolicy, SandboxUnavailable, Shell
from tests.toolkits.test_shell import gone_eventually, live_with

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        shutil.which("bwrap") is None, reason="needs bwrap (apt-get install bubblewrap)"
    ),
]

SECRET = "TOP-SECRET-VALUE"


def exists(path: str | Path) -> bool:
    return os.path.lexists(path)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET + "\n")
    return folder


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    (folder / "inside.txt").write_text("inside\n")
    return folder


@pytest.fixture
def shell(root: Path) -> Iterator[Shell]:
    sh = Shell(root)  # the default: SandboxPolicy.workspace(root)
    yield sh
    sh.close()


async def test_the_default_policy_is_the_workspace_sandbox(shell: Shell, root: Path) -> None:
    assert shell.sandbox == SandboxPolicy.workspace(root)
    assert shell.sandbox.kind == "bubblewrap" and not shell.sandbox.network


async def test_the_workspace_is_readable_and_writable(shell: Shell, root: Path) -> None:
    result = await shell.run("cat inside.txt && echo made > made.txt && pwd")
    assert result.output == f"inside\n{root}\n"
    assert (root / "made.txt").read_text() == "made\n"


async def test_reading_outside_the_roots_fails(shell: Shell, outside: Path) -> None:
    result = await shell.run(f"cat {outside / 'secret.txt'}")
    assert result.exit_code != 0
    assert SECRET not in result.output
    home = await shell.run("ls /root /home 2>&1; cat /etc/shadow 2>&1")
    assert "No such file" in home.output


async def test_writing_outside_the_roots_fails(shell: Shell, outside: Path) -> None:
    result = await shell.run(
        f"echo pwned > {outside / 'secret.txt'}; echo pwned > /usr/pwned; "
        f"mkdir -p {outside / 'new'} && echo x > {outside / 'new' / 'x'}; echo done"
    )
    assert result.output.endswith("done\n")
    assert (outside / "secret.txt").read_text() == SECRET + "\n"
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert not exists("/usr/pwned")


async def test_tmp_is_private(shell: Shell, tmp_path: Path) -> None:
    marker = tmp_path.parent / f"mainspring-sandbox-{os.getpid()}"
    result = await shell.run(f"echo x > /tmp/private && ls {tmp_path.parent} 2>&1 | head -3")
    assert result.exit_code == 0
    assert not exists("/tmp/private")
    assert not exists(marker)


async def test_no_capabilities_inside(shell: Shell) -> None:
    result = await shell.run("grep CapEff /proc/self/status; mknod dev c 1 3; echo rc=$?")
    assert "CapEff:\t0000000000000000" in result.output
    assert "rc=0" not in result.output


class Listener:
    """A TCP server on the host's loopback that counts connections."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.seen = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            self.seen.set()
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def connect_command(port: int) -> str:
    code = (
        f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); "
        "print('connected')"
    )
    return f'python3 -c "{code}"'


async def test_the_network_is_denied(shell: Shell, listener: Listener) -> None:
    result = await shell.run(connect_command(listener.port))
    assert result.exit_code != 0
    assert "connected" not in result.output
    assert listener.accepted == 0


async def test_the_network_can_be_allowed(root: Path, listener: Listener) -> None:
    sh = Shell(root, sandbox=SandboxPolicy.workspace(root, network=True))
    result = await sh.run(connect_command(listener.port))
    assert result.output == "connected\n"
    assert listener.seen.wait(timeout=5)
    assert listener.accepted == 1


async def test_a_host_secret_does_not_reach_the_sandbox(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAINSPRING_TEST_SECRET", "s3cr3t-value")
    sh = Shell(root)
    result = await sh.run("env; cat /proc/1/environ | tr '\\0' '\\n'")
    assert "s3cr3t-value" not in result.output
    assert f"HOME={root}" in result.output


async def test_a_runaway_sandboxed_command_dies_at_its_deadline(shell: Shell) -> None:
    marker = "sleep 987101"
    result = await shell.run(f"{marker} & {marker} & wait", timeout_seconds=1)
    assert result.status == "killed (deadline)"
    assert gone_eventually(lambda: live_with(marker))


async def test_a_stopped_sandboxed_session_leaves_nothing(shell: Shell) -> None:
    marker = "sleep 987102"
    report = await shell.start(f"{marker} & {marker}", wait=0.5)
    sid = report.split(":", 1)[0].removeprefix("session ")
    await shell.stop(sid)
    assert gone_eventually(lambda: live_with(marker))


async def test_a_missing_bwrap_is_an_error_never_an_unsandboxed_run(root: Path) -> None:
    policy = SandboxPolicy(kind="bubblewrap", writable=(root,), bwrap="no-such-bwrap-binary")
    sh = Shell(root, sandbox=policy)
    with pytest.raises(SandboxUnavailable, match="needs bwrap"):
        await sh.run("echo ran > ran.txt")
    assert not (root / "ran.txt").exists()


async def test_a_failing_sandbox_is_an_error_never_an_unsandboxed_run(
    root: Path, tmp_path: Path
) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    sh = Shell(root, sandbox=SandboxPolicy(kind="bubblewrap", writable=(root,), bwrap=str(fake)))
    with pytest.raises(SandboxUnavailable, match=r"did not start .*uid map"):
        await sh.run("echo ran > ran.txt")
    assert not (root / "ran.txt").exists()
