"""ReDoS against the file search: catastrophic patterns, glob bombs and oversize input.

Each input here froze the whole process before: Python's ``re`` backtracks
on it for hours while holding the GIL, so the tool's worker thread stopped
the event loop too. Now patterns and globs run on RE2 (linear time), or,
without RE2, in a child process killed at the search's deadline. Every test
shows a clear result or a clear error, and the loop still ticking.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, Session, ToolResult
from mainspring.toolkits import FileWorkspace
from mainspring.toolkits import search as search_module
from mainspring.toolkits.confine import WorkspaceError
from mainspring.toolkits.files import readonly_file_tools, search_files
from mainspring.toolkits.patterns import MAX_GLOB_CHARS, MAX_PATTERN_CHARS, compile_glob, engine
from tests.helpers import send

pytestmark = pytest.mark.anyio

EVIL_LINE = "a" * 40 + "!"
"""``(a+)+$`` over this line: 2^40 ways to fail under a backtracking engine."""
EVIL_PATTERNS = ["(a+)+$", "(a|aa)+$", "(a|a)+$", "(aa|a)+b", "(?m)^(a+)+b"]
GLOB_BOMB = "**a" * 20 + "b"
"""As a backtracking regex: ``.*a`` twenty times, then a ``b`` that never comes."""


@pytest.fixture
def ws(tmp_path: Path) -> FileWorkspace:
    (tmp_path / "evil.txt").write_text(f"first line\n{EVIL_LINE}\nlast line\n")
    (tmp_path / ("a" * 80 + ".txt")).write_text("plain\n")
    (tmp_path / "good.py").write_text("def ok():\n    return 'aaa'\n")
    return FileWorkspace(tmp_path)


def test_re2_is_the_engine_here() -> None:
    # The test extra installs google-re2: the suite runs the engine users should run.
    assert engine() == "re2"


@pytest.mark.parametrize("pattern", EVIL_PATTERNS)
def test_a_catastrophic_pattern_is_answered_at_once(ws: FileWorkspace, pattern: str) -> None:
    assert search_files(ws, pattern=pattern) == "(0 matches)"


def test_a_catastrophic_pattern_still_finds_what_it_matches(ws: FileWorkspace) -> None:
    found = search_files(ws, pattern="(?m)(a+)+!$")
    assert found == f"evil.txt:2: {EVIL_LINE}\n(1 matches)"


def test_a_glob_bomb_is_answered_at_once(ws: FileWorkspace) -> None:
    assert search_files(ws, glob=GLOB_BOMB) == "(0 files)"
    assert search_files(ws, glob=GLOB_BOMB, pattern="plain") == "(0 matches)"
    # the same shape that does match still matches
    assert search_files(ws, glob="**a" * 20 + ".txt").startswith("a" * 80 + ".txt\n")


def test_runs_of_stars_collapse() -> None:
    matcher = compile_glob("*" * 400 + ".py", using="re2")
    assert matcher.matches("src/deep/x.py") and not matcher.matches("src/x.pyc")


def test_pattern_and_glob_lengths_are_capped(ws: FileWorkspace) -> None:
    with pytest.raises(WorkspaceError, match=f"at most {MAX_PATTERN_CHARS} characters"):
        search_files(ws, pattern="a" * (MAX_PATTERN_CHARS + 1))
    with pytest.raises(WorkspaceError, match=f"at most {MAX_GLOB_CHARS} characters"):
        search_files(ws, glob="*" + "a" * MAX_GLOB_CHARS)
    assert search_files(ws, glob="*" + "a" * 80 + ".txt").endswith("(1 files)")


def test_what_re2_cannot_run_is_a_clear_error(ws: FileWorkspace) -> None:
    with pytest.raises(WorkspaceError, match="invalid search pattern for RE2"):
        search_files(ws, pattern=r"(a)\1")
    with pytest.raises(WorkspaceError, match="invalid search pattern for RE2"):
        search_files(ws, pattern=r"def (?=ok)")
    with pytest.raises(WorkspaceError, match="invalid search glob for RE2"):
        search_files(ws, glob="[z-a].txt")


async def test_the_loop_keeps_ticking_through_a_hostile_search(ws: FileWorkspace) -> None:
    calls = [
        ScriptedCall("search_files", {"pattern": pattern, "glob": GLOB_BOMB.replace("b", "*")})
        for pattern in EVIL_PATTERNS
    ] + [ScriptedCall("search_files", {"glob": GLOB_BOMB})]
    model = ScriptedModel([ScriptedResponse(tool_calls=calls), "searched"])
    session = Session(Agent(model=model, tools=readonly_file_tools(ws)))
    ticks = 0
    done = anyio.Event()

    async def heartbeat() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        events = await send(session, "search")
        done.set()
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.is_error for r in results] == [False] * len(calls)
    expected = ["(0 matches)"] * len(EVIL_PATTERNS) + ["(0 files)"]
    assert sorted(r.content for r in results) == sorted(expected)  # (reads end in any order)
    assert session.messages[-1].text == "searched"
    assert ticks > len(calls)


# ------------------------------------------------- without RE2: a child process


@pytest.fixture
def no_re2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_module, "engine", lambda: "re")


@pytest.mark.usefixtures("no_re2")
def test_without_re2_ordinary_searches_work(ws: FileWorkspace) -> None:
    assert search_files(ws, pattern=r"return '(a+)'") == "good.py:2:     return 'aaa'\n(1 matches)"
    found = search_files(ws, pattern=r"(a)\1", glob="*.py")
    assert found == "good.py:2:     return 'aaa'\n(1 matches)"
    with pytest.raises(WorkspaceError, match="at most 1000 characters"):
        search_files(ws, pattern="a" * 1001)
    with pytest.raises(WorkspaceError, match="invalid search pattern"):
        search_files(ws, pattern="(unclosed")


@pytest.mark.usefixtures("no_re2")
def test_asking_for_re2_without_it_names_the_extra(ws: FileWorkspace) -> None:
    with pytest.raises(ImportError, match=r"mainspring\[re2\]"):
        search_files(ws, pattern="x", using="re2")


def test_re_can_be_chosen_for_what_re2_refuses(ws: FileWorkspace) -> None:
    found = search_files(ws, pattern=r"(a)\1", glob="*.py", using="re")
    assert found == "good.py:2:     return 'aaa'\n(1 matches)"
    with pytest.raises(WorkspaceError, match="ran past its 1s limit"):
        search_files(ws, pattern="(a+)+$", using="re", max_seconds=1.0)


@pytest.mark.usefixtures("no_re2")
async def test_without_re2_a_hostile_search_is_killed_while_the_loop_ticks(
    ws: FileWorkspace,
) -> None:
    ticks = 0
    done = anyio.Event()
    failure: list[BaseException] = []

    async def heartbeat() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async def search() -> None:
        try:
            await anyio.to_thread.run_sync(
                lambda: search_files(ws, pattern="(a+)+$", max_seconds=1.0)
            )
        except WorkspaceError as exc:
            failure.append(exc)
        finally:
            done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        tg.start_soon(search)
    (error,) = failure
    assert "ran past its 1s limit and was stopped" in str(error)
    assert "google-re2" in str(error)
    assert ticks > 100  # the child backtracked; the loop went on
    # the workspace is as it was, and the next search works
    assert search_files(ws, pattern="last") == "evil.txt:3: last line\n(1 matches)"
