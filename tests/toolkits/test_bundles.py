"""The bundles and the coding demo (through the engine and through the CLI)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mainspring import Approve, Reject, Session
from mainspring.testing import collect, pending_of
from mainspring.toolkits import PREVIEW_SOURCE, builtin_tools, coding_tools
from mainspring.toolkits.demo import CODING_MESSAGE, coding_demo_agent, seed_workspace


def test_the_coding_bundle(tmp_path: Path) -> None:
    tools = {t.name: t for t in coding_tools(tmp_path)}
    assert list(tools) == [
        "read_file",
        "list_dir",
        "search_files",
        "apply_patch",
        "shell",
        "shell_session",
    ]
    assert tools["read_file"].policy.parallel
    assert tools["shell"].policy.permission == "confirm"


def test_the_torus_builtins(tmp_path: Path) -> None:
    assert [t.name for t in builtin_tools(tmp_path)] == ["read_file", "list_dir", "write_file"]


@pytest.mark.anyio
async def test_the_coding_demo_reads_proposes_asks_and_applies(tmp_path: Path) -> None:
    seed_workspace(tmp_path)
    session = Session(coding_demo_agent(tmp_path))
    pending = pending_of(await collect(session.send(CODING_MESSAGE)))
    assert pending.name == "apply_patch"
    preview = next(f.message for f in pending.findings if f.source == PREVIEW_SOURCE)
    assert "-    return a - b\n+    return a + b" in preview
    assert "a - b" in (tmp_path / "calc.py").read_text()
    await collect(session.resume(pending.attempt_id, Approve()))
    assert "return a + b" in (tmp_path / "calc.py").read_text()
    assert session.messages[-1].text == "Fixed: add now returns a + b."


@pytest.mark.anyio
async def test_a_rejected_patch_leaves_the_file(tmp_path: Path) -> None:
    seed_workspace(tmp_path)
    session = Session(coding_demo_agent(tmp_path))
    pending = pending_of(await collect(session.send(CODING_MESSAGE)))
    await collect(session.resume(pending.attempt_id, Reject(reason="not now")))
    assert "a - b" in (tmp_path / "calc.py").read_text()


def test_mainspring_demo_coding_runs_offline() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mainspring", "demo", "coding", "--yes"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "preview:" in done.stdout
    assert "Fixed: add now returns a + b." in done.stdout
    assert done.stdout.rstrip().endswith("return a + b")


def test_an_unknown_demo_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mainspring", "demo", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "unknown demo 'nope'" in done.stderr
