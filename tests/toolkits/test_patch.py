"""apply_patch: the format, exact unique matching, prevalidation, versions, properties."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mainspring import (
    Agent,
    Approve,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
)
from mainspring.testing import collect, pending_of
from mainspring.toolkits import PREVIEW_SOURCE, FileWorkspace, WorkspaceError
from mainspring.toolkits.patch import apply_patch_text, patch_tools
from mainspring.toolkits.patch_format import (
    AddFile,
    Chunk,
    DeleteFile,
    PatchError,
    PatchLimits,
    UpdateFile,
    apply_chunks,
    parse_patch,
)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def patch_of(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"]) + "\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text("def main():\n    x = 1\n    return x\n")
    (tmp_path / "old.txt").write_text("bye\n")
    return tmp_path


@pytest.fixture
def ws(root: Path) -> FileWorkspace:
    return FileWorkspace(root)


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


# ------------------------------------------------------------------ parsing


def test_parse_every_operation() -> None:
    parsed = parse_patch(
        patch_of(
            "*** Add File: new.md",
            "+hello",
            "+",
            "*** Delete File: old.txt",
            "*** Update File: app.py",
            "*** Move to: main.py",
            "@@ def main():",
            "-    x = 1",
            "+    x = 2",
            "     return x",
            "*** End of File",
        )
    )
    assert parsed.operations == (
        AddFile("new.md", ("hello", "")),
        DeleteFile("old.txt"),
        UpdateFile(
            "app.py",
            (
                Chunk(
                    "def main():",
                    ("    x = 1", "    return x"),
                    ("    x = 2", "    return x"),
                    True,
                    8,
                ),
            ),
            "main.py",
        ),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "starts with"),
        ("*** Begin Patch\n*** Add File: a\n+x\n", "ends with"),
        ("*** Begin Patch\n*** End Patch\n", "no operations"),
        ("*** Begin Patch\nhello\n*** End Patch\n", "line 2: expected a file operation"),
        ("*** Begin Patch\n*** Add File: a\nx\n*** End Patch\n", "line 3: every line"),
        ("*** Begin Patch\n*** Update File: a\n*** End Patch\n", "no chunks"),
        ("*** Begin Patch\n*** Update File: a\n@@\n?x\n*** End Patch\n", "line 4: a chunk line"),
        ("*** Begin Patch\n*** Update File: a\n x\n y\nzz\n*** End Patch\n", "a chunk line"),
        ("*** Begin Patch\n*** Add File: \n*** End Patch\n", "needs a path"),
    ],
)
def test_malformed_patches_name_the_line(text: str, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        parse_patch(text)


def test_a_crlf_patch_parses_like_an_lf_one() -> None:
    lf = patch_of("*** Update File: a", "@@", "-x", "+y")
    assert parse_patch(lf.replace("\n", "\r\n")) == parse_patch(lf)


def test_parsing_is_bounded() -> None:
    with pytest.raises(PatchError, match="over 10 characters"):
        parse_patch(patch_of("*** Delete File: a"), PatchLimits(max_chars=10))
    many = patch_of(*(f"*** Delete File: f{i}" for i in range(3)))
    with pytest.raises(PatchError, match="at most 2 files"):
        parse_patch(many, PatchLimits(max_files=2))
    chunks = patch_of("*** Update File: a", *("@@\n-x\n+y" for _ in range(3)))
    with pytest.raises(PatchError, match="at most 2 chunks"):
        parse_patch(chunks, PatchLimits(max_chunks=2))


MARKERS = st.sampled_from(
    [
        "*** Begin Patch",
        "*** End Patch",
        "*** Add File: a",
        "*** Update File: a",
        "*** Delete File: a",
        "*** Move to: b",
        "*** End of File",
        "@@",
        "@@ x",
        "+x",
        "-x",
        " x",
        "",
        "junk",
    ]
)


@pytest.mark.slow
@settings(max_examples=400)
@given(st.lists(st.one_of(MARKERS, st.text(max_size=12)), max_size=30))
def test_the_parser_only_ever_raises_patch_error(lines: list[str]) -> None:
    try:
        parse_patch("\n".join(lines))
    except PatchError:
        pass


# ----------------------------------------------------------------- matching


def test_a_chunk_must_match_exactly_one_place() -> None:
    lines = ["a", "x", "b", "x", "c"]
    with pytest.raises(PatchError, match="matches 2 places"):
        apply_chunks(lines, (Chunk(None, ("x",), ("y",)),))
    assert apply_chunks(lines, (Chunk(None, ("b", "x"), ("b", "y")),)) == ["a", "x", "b", "y", "c"]
    with pytest.raises(PatchError, match="not found"):
        apply_chunks(lines, (Chunk(None, ("q",), ("y",)),))


def test_anchors_and_the_end_of_file() -> None:
    lines = ["def f():", "  x", "def g():", "  x"]
    anchored = apply_chunks(lines, (Chunk("def g():", ("  x",), ("  y",)),))
    assert anchored == ["def f():", "  x", "def g():", "  y"]
    assert apply_chunks(lines, (Chunk(None, ("  x",), ("  z",), at_eof=True),))[-1] == "  z"
    assert apply_chunks(lines, (Chunk(None, (), ("tail",), at_eof=True),))[-1] == "tail"
    with pytest.raises(PatchError, match="needs an '@@' anchor"):
        apply_chunks(lines, (Chunk(None, (), ("y",)),))


def test_chunks_apply_in_order_after_each_other() -> None:
    lines = ["x", "a", "x"]
    out = apply_chunks(lines, (Chunk(None, ("x", "a"), ("X", "a")), Chunk(None, ("x",), ("Y",))))
    assert out == ["X", "a", "Y"]


# ------------------------------------------------------------ on the files


def test_apply_every_operation(ws: FileWorkspace, root: Path) -> None:
    report = apply_patch_text(
        ws,
        patch_of(
            "*** Add File: docs/new.md",
            "+# New",
            "*** Delete File: old.txt",
            "*** Update File: app.py",
            "*** Move to: src/main.py",
            "@@ def main():",
            "-    x = 1",
            "+    x = 2",
        ),
    )
    assert report.splitlines()[0] == "applied 3 operation(s):"
    assert report.splitlines()[1].startswith("A docs/new.md (+1) [missing ")
    assert report.splitlines()[2].startswith("D old.txt [")
    assert "R app.py -> src/main.py (1 chunk(s), +0 lines)" in report
    assert snapshot(root) == {
        "docs/new.md": b"# New\n",
        "src/main.py": b"def main():\n    x = 2\n    return x\n",
    }


def test_a_dry_run_writes_nothing(ws: FileWorkspace, root: Path) -> None:
    before = snapshot(root)
    report = apply_patch_text(ws, patch_of("*** Delete File: old.txt"), dry_run=True)
    assert report.startswith("dry run: would apply 1 operation(s):")
    assert snapshot(root) == before


def test_nothing_is_written_when_any_operation_fails(ws: FileWorkspace, root: Path) -> None:
    before = snapshot(root)
    bad = patch_of(
        "*** Add File: fine.txt",
        "+ok",
        "*** Update File: app.py",
        "@@",
        "-    nothing like this",
        "+    y",
    )
    with pytest.raises(PatchError, match="context was not found"):
        apply_patch_text(ws, bad)
    assert snapshot(root) == before


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (("*** Add File: app.py", "+x"), "exists; Add File never overwrites"),
        (("*** Update File: old.txt", "*** Move to: app.py"), "exists; Move to never overwrites"),
        (("*** Delete File: nope.txt",), "no such file"),
        (("*** Delete File: old.txt", "*** Delete File: ./old.txt"), "touched twice"),
        (("*** Delete File: ../escape.txt",), "'..' is not allowed"),
    ],
)
def test_refused_operations(
    ws: FileWorkspace, root: Path, body: tuple[str, ...], message: str
) -> None:
    before = snapshot(root)
    with pytest.raises((PatchError, WorkspaceError), match=message):
        apply_patch_text(ws, patch_of(*body))
    assert snapshot(root) == before


def test_patches_go_through_the_same_confinement(
    ws: FileWorkspace, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    outside.mkdir()
    (outside / "s.txt").write_text("secret\n")
    (root / "link.txt").symlink_to(outside / "s.txt")
    patch = patch_of("*** Update File: link.txt", "@@", "-secret", "+pwned")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        apply_patch_text(ws, patch)
    assert (outside / "s.txt").read_text() == "secret\n"


def test_expected_versions(ws: FileWorkspace, root: Path) -> None:
    current = sha((root / "old.txt").read_bytes())
    delete = patch_of("*** Delete File: old.txt")
    with pytest.raises(PatchError, match="expected version 000000000000"):
        apply_patch_text(ws, delete, expected_versions={"old.txt": "0" * 64})
    with pytest.raises(PatchError, match="expected version missing"):
        apply_patch_text(ws, delete, expected_versions={"app.py": "missing"})
    assert (root / "old.txt").exists()
    apply_patch_text(ws, delete, expected_versions={"old.txt": current, "new.txt": "missing"})
    assert not (root / "old.txt").exists()


def test_crlf_and_encoding_survive_a_patch(ws: FileWorkspace, root: Path) -> None:
    (root / "win.txt").write_bytes("é one\r\ntwo\r\n".encode("latin-1"))
    apply_patch_text(ws, patch_of("*** Update File: win.txt", "@@", " é one", "-two", "+deux"))
    assert (root / "win.txt").read_bytes() == "é one\r\ndeux\r\n".encode("latin-1")


def test_a_missing_final_newline_is_kept(ws: FileWorkspace, root: Path) -> None:
    (root / "n.txt").write_text("a\nb")
    apply_patch_text(ws, patch_of("*** Update File: n.txt", "@@", "-b", "+c"))
    assert (root / "n.txt").read_text() == "a\nc"


def test_a_file_changed_after_the_check_stops_the_write(ws: FileWorkspace, root: Path) -> None:
    from mainspring.toolkits import patch as patch_module

    plan = patch_module.plan_patch(ws, patch_of("*** Update File: old.txt", "@@", "-bye", "+hi"))
    (root / "old.txt").write_text("changed\n")
    with pytest.raises(PatchError, match="changed since the patch was checked"):
        patch_module._write(ws, plan)
    assert (root / "old.txt").read_text() == "changed\n"


# --------------------------------------------------------------- properties

LINES = st.lists(st.sampled_from(["a", "b", "c", "", "  d"]), max_size=24)


@st.composite
def file_and_patch(draw: st.DrawFn) -> tuple[list[str], str, list[str]]:
    """A file, a patch of non-overlapping chunks over it, and the file the patch means."""
    lines = draw(LINES)
    chunks: list[str] = []
    expected: list[str] = []
    cursor = 0
    while cursor <= len(lines) and draw(st.booleans()):
        start = draw(st.integers(cursor, len(lines)))
        end = draw(st.integers(start, min(len(lines), start + 3)))
        before = draw(st.integers(0, min(3, start - cursor)))
        after = draw(st.integers(0, min(3, len(lines) - end)))
        new = draw(st.lists(st.sampled_from(["a", "b", "z", ""]), max_size=3))
        if before + (end - start) + after == 0:
            continue  # a chunk with nothing to match cannot be placed
        body = [" " + x for x in lines[start - before : start]]
        body += ["-" + x for x in lines[start:end]]
        body += ["+" + x for x in new]
        body += [" " + x for x in lines[end : end + after]]
        at_eof = end + after == len(lines) and draw(st.booleans())
        chunks.append("\n".join(["@@", *body, *(["*** End of File"] if at_eof else [])]))
        expected += lines[cursor:start] + new
        cursor = end
        if after:  # the next chunk starts after this one's trailing context
            expected += lines[end : end + after]
            cursor = end + after
    expected += lines[cursor:]
    text = patch_of("*** Update File: f.txt", *chunks) if chunks else ""
    return lines, text, expected


@pytest.mark.slow
@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(file_and_patch())
def test_a_generated_patch_gives_exactly_the_expected_file_or_changes_nothing(
    case: tuple[list[str], str, list[str]],
) -> None:
    lines, patch, expected = case
    if not patch:
        return
    original = "".join(x + "\n" for x in lines)
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "f.txt"
        target.write_text(original)
        try:
            apply_patch_text(FileWorkspace(folder), patch)
        except PatchError as exc:
            assert "matches" in str(exc) or "end of the file" in str(exc), exc
            assert target.read_text() == original
            assert os.listdir(folder) == ["f.txt"]
            return
        assert target.read_text() == "".join(x + "\n" for x in expected)


# ------------------------------------------------------------- the tool


@pytest.mark.anyio
async def test_the_tool_pauses_with_a_preview_and_a_dry_run_does_not(
    ws: FileWorkspace, root: Path
) -> None:
    patch = patch_of("*** Update File: app.py", "@@", "-    x = 1", "+    x = 3")
    calls: list[str | ScriptedResponse] = [
        ScriptedResponse(
            tool_calls=[ScriptedCall("apply_patch", {"patch": patch, "dry_run": True})]
        ),
        ScriptedResponse(tool_calls=[ScriptedCall("apply_patch", {"patch": patch})]),
        "Done.",
    ]
    agent = Agent(model=ScriptedModel(calls), tools=patch_tools(ws))
    session = Session(agent)
    pending = pending_of(await collect(session.send("patch it")))
    assert pending.input["dry_run"] is False
    preview = next(f.message for f in pending.findings if f.source == PREVIEW_SOURCE)
    assert preview.startswith("M app.py (1 chunk(s), +0 lines)\n--- a/app.py")
    assert "+    x = 3" in preview
    assert "x = 1" in (root / "app.py").read_text()
    await collect(session.resume(pending.attempt_id, Approve()))
    assert "x = 3" in (root / "app.py").read_text()


@pytest.mark.anyio
async def test_a_patch_that_cannot_apply_is_refused_before_anyone_is_asked(
    ws: FileWorkspace,
) -> None:
    patch = patch_of("*** Update File: app.py", "@@", "-nope", "+x")
    model = ScriptedModel(
        [ScriptedResponse(tool_calls=[ScriptedCall("apply_patch", {"patch": patch})]), "ok"]
    )
    events = await collect(Session(Agent(model=model, tools=patch_tools(ws))).send("go"))
    assert not any(e.type == "pending_action" for e in events)
    result = next(e for e in events if e.type == "tool_result")
    assert isinstance(result, ToolResult)
    assert result.is_error and "context was not found" in result.content
