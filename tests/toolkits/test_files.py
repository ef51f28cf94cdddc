"""File tools: reading, listing, searching, writing and editing inside a workspace."""

from __future__ import annotations

import codecs
import os
import threading
from pathlib import Path

import pytest

from mainspring import (
    Agent,
    Approve,
    Reject,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
)
from mainspring.testing import collect, pending_of
from mainspring.toolkits import (
    PREVIEW_SOURCE,
    FileWorkspace,
    WorkspaceError,
    file_tools,
    readonly_file_tools,
)
from mainspring.toolkits.confine import Location
from mainspring.toolkits.files import (
    apply,
    edit_text,
    list_entries,
    read_text,
    search_files,
    write_text,
)
from mainspring.toolkits.patterns import Engine, compile_glob
from mainspring.toolkits.text import Text
from mainspring.tools import Tool


def tools_by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


@pytest.fixture
def ws(tmp_path: Path) -> FileWorkspace:
    root = tmp_path / "root"
    root.mkdir()
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / "notes.txt").write_text("one\ntwo\nthree\n")
    return FileWorkspace(root)


def test_read_a_range_of_lines(ws: FileWorkspace) -> None:
    assert read_text(ws, "notes.txt", start_line=2, end_line=3) == (
        "notes.txt: lines 2-3 of 3\ntwo\nthree\n"
    )
    assert read_text(ws, "./src/app.py").startswith("src/app.py: lines 1-2 of 2\ndef main")


def test_read_is_cut_at_the_output_limit_and_says_where_to_go_on(ws: FileWorkspace) -> None:
    text = read_text(ws, "notes.txt", max_chars=5)
    assert (
        text == "notes.txt: lines 1-1 of 3; cut at 5 characters, continue with start_line=2\none\n"
    )


def test_a_range_outside_the_file_is_an_error(ws: FileWorkspace) -> None:
    with pytest.raises(WorkspaceError, match="outside 1-3"):
        read_text(ws, "notes.txt", start_line=9)


def test_an_absolute_path_inside_the_root_is_accepted(ws: FileWorkspace) -> None:
    path = str(ws.roots[0] / "notes.txt")
    assert "of 3" in read_text(ws, path)


def test_a_second_root_takes_absolute_paths(tmp_path: Path, ws: FileWorkspace) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.txt").write_text("x\n")
    both = FileWorkspace([ws.roots[0], other])
    assert read_text(both, str(other / "x.txt")).startswith(f"{other / 'x.txt'}: lines 1-1")


def test_binary_files_are_not_read_as_text(ws: FileWorkspace) -> None:
    (ws.roots[0] / "blob.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(WorkspaceError, match="binary"):
        read_text(ws, "blob.bin")


def test_list_a_directory(ws: FileWorkspace) -> None:
    (ws.roots[0] / "link").symlink_to("/etc")
    listing = list_entries(ws, ".")
    assert listing.splitlines()[0] == ".: 3 entries"
    assert any(line.startswith("dir") and line.endswith("src/") for line in listing.splitlines())
    assert any(line.startswith("link") for line in listing.splitlines())


@pytest.mark.parametrize("using", ["re2", "re"])
def test_glob_patterns(using: Engine) -> None:
    assert compile_glob("*.py", using=using).matches("a/b/c.py")
    assert not compile_glob("src/*.py", using=using).matches("src/a/b.py")
    assert compile_glob("src/**/*.py", using=using).matches("src/a/b.py")
    assert compile_glob("src/**/*.py", using=using).matches("src/b.py")
    assert compile_glob("[!a]*.txt", using=using).matches("b.txt")
    assert not compile_glob("[!a]*.txt", using=using).matches("a.txt")


def test_search_by_glob_and_by_regex(ws: FileWorkspace) -> None:
    assert search_files(ws, glob="*.py") == "src/app.py\n(1 files)"
    found = search_files(ws, pattern=r"t\w+", glob="*.txt")
    assert found == "notes.txt:2: two\nnotes.txt:3: three\n(2 matches)"
    assert search_files(ws, pattern="RETURN", ignore_case=True).startswith("src/app.py:2:")


def test_search_is_bounded(ws: FileWorkspace) -> None:
    for i in range(30):
        (ws.roots[0] / f"f{i:02}.txt").write_text("hit\n")
    found = search_files(ws, pattern="hit", max_results=5)
    assert found.count("hit") == 5
    assert "stopped at a search bound" in found


def test_write_creates_directories_and_leaves_no_temporary_files(ws: FileWorkspace) -> None:
    apply(ws, "new/deep/file.txt", write_text("hello\n"))
    folder = ws.roots[0] / "new" / "deep"
    assert (folder / "file.txt").read_text() == "hello\n"
    assert os.listdir(folder) == ["file.txt"]
    assert oct((folder / "file.txt").stat().st_mode & 0o777) == "0o644"


def test_a_replaced_file_keeps_its_mode(ws: FileWorkspace) -> None:
    target = ws.roots[0] / "notes.txt"
    target.chmod(0o600)
    apply(ws, "notes.txt", write_text("x\n"))
    assert target.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("raw", "encoding"),
    [
        (b"a\r\nb\r\n", "utf-8"),
        (codecs.BOM_UTF8 + "é\r\nb\r\n".encode(), "utf-8-sig"),
        ("é\nb\n".encode("latin-1"), "latin-1"),
        ("é\r\nb\r\n".encode("utf-16"), "utf-16"),
        (b"a\r\nb\nmixed\r\n", "utf-8"),
    ],
)
def test_edits_keep_encoding_and_line_ends(ws: FileWorkspace, raw: bytes, encoding: str) -> None:
    target = ws.roots[0] / "enc.txt"
    target.write_bytes(raw)
    apply(ws, "enc.txt", edit_text("b", "B"), create_dirs=False)
    expected = raw.decode(encoding).replace("b", "B").encode(encoding)
    if encoding == "utf-16":  # the byte-order mark is written again, in the same order
        expected = raw[:2] + raw.decode(encoding).replace("b", "B").encode("utf-16")[2:]
    assert target.read_bytes() == expected


def test_writing_lf_content_into_a_crlf_file_keeps_crlf(ws: FileWorkspace) -> None:
    target = ws.roots[0] / "win.txt"
    target.write_bytes(b"one\r\ntwo\r\n")
    apply(ws, "win.txt", write_text("uno\ndos\n"))
    assert target.read_bytes() == b"uno\r\ndos\r\n"


def test_an_edit_must_match_exactly_once(ws: FileWorkspace) -> None:
    target = ws.roots[0] / "notes.txt"
    with pytest.raises(WorkspaceError, match="not found"):
        apply(ws, "notes.txt", edit_text("four", "4"))
    with pytest.raises(WorkspaceError, match="found 2 times"):
        apply(ws, "notes.txt", edit_text("t", "T"))
    assert target.read_text() == "one\ntwo\nthree\n"
    apply(ws, "notes.txt", edit_text("two\n", "2\n"))
    assert target.read_text() == "one\n2\nthree\n"


def test_content_the_encoding_cannot_hold_is_refused(ws: FileWorkspace) -> None:
    target = ws.roots[0] / "latin.txt"
    target.write_bytes("é\n".encode("latin-1"))
    with pytest.raises(WorkspaceError, match="cannot be stored as latin-1"):
        apply(ws, "latin.txt", edit_text("é", "€ and 🙂"))
    assert target.read_bytes() == "é\n".encode("latin-1")


def test_cooperating_writers_are_serialized(ws: FileWorkspace) -> None:
    (ws.roots[0] / "counter.txt").write_text("")

    def append_line(i: int) -> None:
        def transform(before: Text | None, location: Location) -> str:
            assert before is not None
            return before.content + f"{i}\n"

        apply(ws, "counter.txt", transform)

    threads = [threading.Thread(target=append_line, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    lines = (ws.roots[0] / "counter.txt").read_text().splitlines()
    assert sorted(lines, key=int) == [str(i) for i in range(40)]


def test_read_tools_run_in_parallel_and_writes_ask(ws: FileWorkspace) -> None:
    tools = tools_by_name(file_tools(ws))
    for name in ("read_file", "list_dir", "search_files"):
        assert tools[name].policy.parallel, name
    for name in ("write_file", "edit_file"):
        assert tools[name].policy.permission == "confirm", name
        assert not tools[name].policy.read_only
    assert set(tools_by_name(readonly_file_tools(ws))) == {"read_file", "list_dir", "search_files"}


def agent_writing(ws: FileWorkspace, call: ScriptedCall) -> Agent:
    model = ScriptedModel([ScriptedResponse(tool_calls=[call]), "Done."])
    return Agent(model=model, tools=file_tools(ws))


@pytest.mark.anyio
async def test_a_write_pauses_with_the_path_and_a_diff_then_runs_when_approved(
    ws: FileWorkspace,
) -> None:
    call = ScriptedCall(
        "edit_file", {"path": "notes.txt", "old_string": "two", "new_string": "deux"}
    )
    session = Session(agent_writing(ws, call))
    pending = pending_of(await collect(session.send("edit")))
    assert (ws.roots[0] / "notes.txt").read_text() == "one\ntwo\nthree\n"
    preview = next(f for f in pending.findings if f.source == PREVIEW_SOURCE)
    assert preview.message.splitlines()[:3] == [
        "modify notes.txt",
        "--- a/notes.txt",
        "+++ b/notes.txt",
    ]
    assert "-two" in preview.message and "+deux" in preview.message
    events = await collect(session.resume(pending.attempt_id, Approve()))
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.content == "updated notes.txt (3 lines)"
    assert (ws.roots[0] / "notes.txt").read_text() == "one\ndeux\nthree\n"


@pytest.mark.anyio
async def test_a_rejected_write_changes_nothing(ws: FileWorkspace) -> None:
    call = ScriptedCall("write_file", {"path": "fresh.txt", "content": "hi\n"})
    session = Session(agent_writing(ws, call))
    pending = pending_of(await collect(session.send("write")))
    preview = next(f for f in pending.findings if f.source == PREVIEW_SOURCE)
    assert preview.message.startswith("create fresh.txt\n")
    await collect(session.resume(pending.attempt_id, Reject(reason="no")))
    assert not (ws.roots[0] / "fresh.txt").exists()


@pytest.mark.anyio
async def test_an_edit_that_cannot_apply_fails_without_asking(ws: FileWorkspace) -> None:
    call = ScriptedCall(
        "edit_file", {"path": "notes.txt", "old_string": "absent", "new_string": "x"}
    )
    events = await collect(Session(agent_writing(ws, call)).send("edit"))
    assert not any(e.type == "pending_action" for e in events)
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "old_string not found" in result.content


@pytest.mark.anyio
async def test_an_auto_tier_write_is_not_made_to_pause(ws: FileWorkspace) -> None:
    call = ScriptedCall("write_file", {"path": "auto.txt", "content": "a\n"})
    model = ScriptedModel([ScriptedResponse(tool_calls=[call]), "Done."])
    agent = Agent(model=model, tools=file_tools(ws, write_permission="auto"))
    events = await collect(Session(agent).send("write"))
    assert not any(e.type == "pending_action" for e in events)
    assert (ws.roots[0] / "auto.txt").read_text() == "a\n"
