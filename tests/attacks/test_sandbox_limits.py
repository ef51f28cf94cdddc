"""Resource exhaustion inside the shell sandbox: every runaway command meets a limit.

Before, a sandboxed command could start 96k processes, map all memory, spin
forever within its wall-clock deadline and fill a 12 GB in-memory ``/tmp``.
Each test runs the runaway for real under a small :class:`SandboxLimits`
and shows the limit stop it, its process group gone after, and the shell
still working. Tests need ``bwrap`` (skipped with a reason without it; under
``MAINSPRING_CI=1`` such a skip fails). No test waits on a clock: each
runaway ends at a limit long before its (hour-long) deadline.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mainspring.errors import ConfigError
from mainspring.toolkits import SandboxLimits, SandboxPolicy, Shell
from mainspring.toolkits import cgroup as cgroup_module
from mainspring.toolkits.cgroup import process_bound
from tests.toolkits.test_shell import gone_eventually, live_with

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        shutil.which("bwrap") is None, reason="needs bwrap (apt-get install bubblewrap)"
    ),
]

HOUR = 3600.0
PYTHON = "/usr/bin/python3"
needs_python = pytest.mark.skipif(
    not os.path.exists(PYTHON), reason=f"needs {PYTHON} (the sandbox's system python)"
)
MiB = 1024 * 1024


def limited(root: Path, **limits: int | None) -> Shell:
    policy = SandboxPolicy.workspace(root, limits=SandboxLimits(**limits))
    return Shell(root, sandbox=policy)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    return folder


@pytest.fixture
def shells() -> Iterator[list[Shell]]:
    made: list[Shell] = []
    yield made
    for sh in made:
        sh.close()


def can_bound_processes() -> bool:
    cgroup, nproc = process_bound(32)
    if cgroup is not None:
        cgroup.remove()
    return cgroup is not None or nproc is not None


def limits_of(output: str) -> dict[str, str]:
    """``/proc/self/limits`` as {name: hard limit}."""
    rows: dict[str, str] = {}
    for line in output.splitlines()[1:]:
        name, soft_hard = line[:26].strip(), line[26:].split()
        if len(soft_hard) >= 2:
            rows[name] = soft_hard[1]
    return rows


def test_limits_are_validated() -> None:
    with pytest.raises(ConfigError, match="non-negative"):
        SandboxLimits(memory_bytes=-1)
    with pytest.raises(ConfigError, match="must be >= 1"):
        SandboxLimits(processes=0)
    assert SandboxLimits.unlimited().rlimits(nproc=None) == ()


def test_without_a_cgroup_the_rlimit_sits_above_the_users_own_tasks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert cgroup_module.user_tasks(os.getuid()) >= 1  # this test's own process at least
    monkeypatch.setattr(cgroup_module, "pids_cgroup", lambda limit: None)
    monkeypatch.setattr(os, "getuid", lambda: 0)
    assert cgroup_module.process_bound(32) == (None, None)  # root: the kernel ignores it
    unused = 2**31 - 7  # a uid with no tasks
    monkeypatch.setattr(os, "getuid", lambda: unused)
    assert cgroup_module.process_bound(32) == (None, 32)


async def test_the_default_sandbox_has_documented_limits(root: Path, shells: list[Shell]) -> None:
    sh = Shell(root)
    shells.append(sh)
    defaults = SandboxLimits()
    assert sh.sandbox.limits == defaults
    result = await sh.run("cat /proc/self/limits; df -B1 /tmp | tail -1")
    assert result.exit_code == 0, result.output
    seen = limits_of(result.output)
    assert seen["Max address space"] == str(defaults.memory_bytes)
    assert seen["Max cpu time"] == str(defaults.cpu_seconds)
    assert seen["Max open files"] == str(defaults.open_files)
    assert seen["Max file size"] == str(defaults.file_bytes)
    assert seen["Max core file size"] == "0"
    tmp_size = int(result.output.strip().splitlines()[-1].split()[1])
    assert tmp_size == defaults.tmp_bytes


async def test_unsandboxed_commands_get_the_limits_too(root: Path, shells: list[Shell]) -> None:
    sh = Shell(root, sandbox=SandboxPolicy.unsandboxed(limits=SandboxLimits(open_files=77)))
    shells.append(sh)
    result = await sh.run("cat /proc/self/limits")
    assert limits_of(result.output)["Max open files"] == "77"


async def test_a_process_flood_stops_at_the_limit_and_leaves_nothing(
    root: Path, shells: list[Shell]
) -> None:
    if not can_bound_processes():
        pytest.skip("needs a pids cgroup: Linux does not apply RLIMIT_NPROC to root")
    sh = limited(root, processes=32)
    shells.append(sh)
    marker = "4242.4242"
    flood = f"i=0; while [ $i -lt 200 ]; do sleep {marker} & i=$((i+1)); echo started $i; done"
    result = await sh.run(flood, timeout_seconds=HOUR)
    started = [line for line in result.output.splitlines() if line.startswith("started")]
    assert 0 < len(started) < 32, result.output
    assert "fork" in result.output.lower()  # the shell says why it stopped
    assert gone_eventually(lambda: live_with(marker))  # the group died with the leader
    assert (await sh.run("echo still here")).output == "still here\n"


async def test_a_fork_bomb_is_contained_and_killed_with_its_group(
    root: Path, shells: list[Shell]
) -> None:
    if not can_bound_processes():
        pytest.skip("needs a pids cgroup: Linux does not apply RLIMIT_NPROC to root")
    sh = limited(root, processes=32)
    shells.append(sh)
    # the flood above proved the bound holds before a real bomb is let loose
    probe = await sh.run("for i in 1 2 3 4 5 6 7 8; do sleep 1 & done; wait; echo probe ok")
    assert "probe ok" in probe.output
    bomb = "bomb() { bomb | bomb & }; bomb; sleep 2; echo bomb-done"
    result = await sh.run(bomb, timeout_seconds=HOUR)
    assert result.status != "running"
    assert gone_eventually(lambda: live_with("bomb"))
    assert (await sh.run("echo still here")).output == "still here\n"


@needs_python
async def test_a_memory_hog_fails_its_allocation(root: Path, shells: list[Shell]) -> None:
    sh = limited(root, memory_bytes=256 * MiB)
    shells.append(sh)
    hog = f"{PYTHON} -c \"b = bytearray(1024 ** 3); print('allocated')\""
    result = await sh.run(hog, timeout_seconds=HOUR)
    assert result.exit_code != 0
    assert "MemoryError" in result.output and "allocated" not in result.output
    small = f"{PYTHON} -c \"b = bytearray(16 * 1024 ** 2); print('allocated')\""
    assert (await sh.run(small)).output == "allocated\n"


async def test_an_endless_loop_is_killed_at_its_cpu_limit(root: Path, shells: list[Shell]) -> None:
    sh = limited(root, cpu_seconds=1)
    shells.append(sh)
    result = await sh.run("while :; do :; done", timeout_seconds=HOUR)
    assert result.exit_code != 0
    assert result.status != "killed (deadline)"  # the CPU limit ended it, not the clock


@needs_python
async def test_opening_files_stops_at_the_limit(root: Path, shells: list[Shell]) -> None:
    sh = limited(root, open_files=32)
    shells.append(sh)
    opener = (
        f'{PYTHON} -c "import os\nfds = []\ntry:\n    while len(fds) < 1000: '
        f"fds.append(os.open('/dev/null', 0))\nexcept OSError as e: print(len(fds), e.strerror)\""
    )
    result = await sh.run(opener, timeout_seconds=HOUR)
    count, _, reason = result.output.strip().partition(" ")
    assert int(count) < 32 and reason == "Too many open files"


async def test_filling_tmp_stops_at_its_size(root: Path, shells: list[Shell]) -> None:
    sh = limited(root, tmp_bytes=8 * MiB)
    shells.append(sh)
    result = await sh.run(
        "head -c 64M /dev/zero > /tmp/fill; echo status $?; du -k /tmp/fill", timeout_seconds=HOUR
    )
    assert "No space left on device" in result.output
    kib = int(result.output.strip().splitlines()[-1].split()[0])
    assert kib <= 8 * 1024


async def test_a_huge_file_write_stops_at_the_file_size_limit(
    root: Path, shells: list[Shell]
) -> None:
    sh = limited(root, file_bytes=1 * MiB)
    shells.append(sh)
    result = await sh.run("head -c 50M /dev/zero > big.bin; echo status $?", timeout_seconds=HOUR)
    assert "status 0" not in result.output
    assert (root / "big.bin").stat().st_size <= 1 * MiB
