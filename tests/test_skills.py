"""Skills: bounded discovery, diagnostics, paging, resources, tools, resident block."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mainspring import Agent, ScriptedCall, ScriptedModel, ScriptedResponse, Session, ToolResult
from mainspring.skills import (
    Skill,
    SkillCatalog,
    SkillLimits,
    SkillNotFound,
    SkillPathError,
)
from tests.helpers import send
from tests.strategies import depths


def skill_text(
    name: str, description: str = "Does things.", body: str = "Step 1.\n", **extra: str
) -> str:
    fields = "".join(f"{k}: {v}\n" for k, v in extra.items())
    return f"---\nname: {name}\ndescription: {description}\n{fields}---\n{body}"


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def codes(catalog: SkillCatalog) -> list[str]:
    return [d.code for d in catalog.diagnostics]


def names(catalog: SkillCatalog) -> list[str]:
    return [s.name for s in catalog.skills]


# --- discovery -------------------------------------------------------------


def test_front_matter_fields_become_a_skill(tmp_path: Path) -> None:
    write(
        tmp_path,
        "pdf/SKILL.md",
        skill_text(
            "pdf-forms",
            "Fill PDF forms.",
            body="# Steps\nRead the form.\n",
            **{"allowed-tools": "[read_file, 'shell*']", "execution": "subagent"},
        ),
    )
    write(tmp_path, "plain/SKILL.md", skill_text("plain", **{"allowed-tools": "a, b c"}))
    catalog = SkillCatalog([tmp_path])
    assert catalog.diagnostics == ()
    pdf = catalog.get("pdf-forms")
    assert isinstance(pdf, Skill)
    assert pdf.id == "0:pdf"
    assert pdf.description == "Fill PDF forms."
    assert pdf.allowed_tools == ("read_file", "shell*")
    assert pdf.execution == "subagent"
    assert pdf.path == (tmp_path / "pdf" / "SKILL.md").resolve()
    assert pdf.root == tmp_path.resolve()
    assert pdf.body_bytes == len(b"# Steps\nRead the form.\n")
    assert pdf.file_bytes == (tmp_path / "pdf" / "SKILL.md").stat().st_size
    plain = catalog.get("plain")
    assert plain is not None
    assert plain.execution == "inline" and plain.allowed_tools == ("a", "b", "c")
    assert catalog.read("pdf-forms").text == "# Steps\nRead the form.\n"
    assert catalog.get("nope") is None


def test_skill_at_the_root_itself_and_stable_ids(tmp_path: Path) -> None:
    write(tmp_path, "SKILL.md", skill_text("top"))
    catalog = SkillCatalog([tmp_path])
    (skill,) = catalog.skills
    assert skill.id == "0:."
    assert catalog.reload().skills[0].id == "0:."


def test_earlier_root_wins_and_the_loser_is_a_diagnostic(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write(first, "a/SKILL.md", skill_text("shared", "From first."))
    write(second, "b/SKILL.md", skill_text("shared", "From second."))
    write(second, "c/SKILL.md", skill_text("only-second"))
    catalog = SkillCatalog([first, second])
    assert names(catalog) == ["shared", "only-second"]
    shared = catalog.get("shared")
    assert shared is not None and shared.description == "From first." and shared.id == "0:a"
    (diag,) = catalog.diagnostics
    assert diag.code == "duplicate"
    assert diag.path == (second / "b" / "SKILL.md").resolve()
    assert "0:a" in diag.message
    kept = catalog.get("only-second")
    assert kept is not None and kept.id == "1:c"


def test_missing_root_is_a_diagnostic(tmp_path: Path) -> None:
    write(tmp_path, "a/SKILL.md", skill_text("a"))
    catalog = SkillCatalog([tmp_path / "nowhere", tmp_path])
    assert names(catalog) == ["a"]
    assert codes(catalog) == ["root"]


def test_depth_bound(tmp_path: Path) -> None:
    write(tmp_path, "one/SKILL.md", skill_text("one"))
    write(tmp_path, "x/two/SKILL.md", skill_text("two"))
    write(tmp_path, "x/y/three/SKILL.md", skill_text("three"))
    catalog = SkillCatalog([tmp_path], limits=SkillLimits(max_depth=2))
    assert names(catalog) == ["one", "two"]
    (diag,) = catalog.diagnostics
    assert diag.code == "depth" and diag.path.name == "SKILL.md" and "three" in str(diag.path)


def test_file_count_bound(tmp_path: Path) -> None:
    for i in range(5):
        write(tmp_path, f"s{i}/SKILL.md", skill_text(f"s{i}"))
    catalog = SkillCatalog([tmp_path], limits=SkillLimits(max_files=3))
    assert names(catalog) == ["s0", "s1", "s2"]
    assert codes(catalog) == ["count"]


def test_per_file_byte_bound(tmp_path: Path) -> None:
    write(tmp_path, "big/SKILL.md", skill_text("big", body="x" * 5000))
    write(tmp_path, "small/SKILL.md", skill_text("small"))
    catalog = SkillCatalog([tmp_path], limits=SkillLimits(max_file_bytes=1000))
    assert names(catalog) == ["small"]
    (diag,) = catalog.diagnostics
    assert diag.code == "size" and diag.path.parent.name == "big"


def test_total_byte_bound(tmp_path: Path) -> None:
    for i in range(4):
        write(tmp_path, f"s{i}/SKILL.md", skill_text(f"s{i}", body="y" * 300))
    size = (tmp_path / "s0" / "SKILL.md").stat().st_size
    catalog = SkillCatalog([tmp_path], limits=SkillLimits(max_total_bytes=size * 2 + 10))
    assert names(catalog) == ["s0", "s1"]
    assert codes(catalog) == ["total", "total"]
    assert sum(s.file_bytes for s in catalog.skills) <= size * 2 + 10


def test_entry_bound_stops_discovery(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"d{i:02}").mkdir()
    catalog = SkillCatalog([tmp_path], limits=SkillLimits(max_entries=10))
    assert catalog.skills == ()
    assert codes(catalog) == ["entries"]


def test_symlinked_folder_and_file_are_rejected(tmp_path: Path) -> None:
    root = tmp_path / "root"
    real = write(root, "real/SKILL.md", skill_text("real"))
    outside = write(tmp_path, "outside/SKILL.md", skill_text("outside"))
    (root / "inner-link").symlink_to(root / "real", target_is_directory=True)
    (root / "outer-link").symlink_to(outside.parent, target_is_directory=True)
    (root / "file-link").mkdir()
    (root / "file-link" / "SKILL.md").symlink_to(real)
    catalog = SkillCatalog([root])
    assert names(catalog) == ["real"]
    found = {(d.path.name, d.code) for d in catalog.diagnostics}
    assert found == {("inner-link", "symlink"), ("outer-link", "escape"), ("SKILL.md", "symlink")}


def test_symlinked_skill_file_pointing_outside_is_an_escape(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = write(tmp_path, "elsewhere/SKILL.md", skill_text("elsewhere"))
    (root / "sneaky").mkdir(parents=True)
    (root / "sneaky" / "SKILL.md").symlink_to(outside)
    catalog = SkillCatalog([root])
    assert catalog.skills == ()
    assert codes(catalog) == ["escape"]


def test_malformed_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad/SKILL.md", "---\nname: bad\ndescription: [unclosed\n---\nbody\n")
    write(tmp_path, "good/SKILL.md", skill_text("good"))
    catalog = SkillCatalog([tmp_path])
    assert names(catalog) == ["good"]
    (diag,) = catalog.diagnostics
    assert diag.code == "yaml"
    assert diag.path == path.resolve()
    assert diag.line is not None and 3 <= diag.line <= 5
    assert str(diag).startswith(f"{path.resolve()}:{diag.line}: invalid YAML")


@pytest.mark.parametrize(
    ("text", "code", "needle"),
    [
        ("no front matter\n", "front_matter", "must start with '---'"),
        ("---\nname: x\ndescription: y\n", "front_matter", "not closed"),
        ("---\n- a list\n---\n", "front_matter", "mapping"),
        ("---\ndescription: y\n---\n", "field", "'name'"),
        ("---\nname: x\n---\n", "field", "'description'"),
        ("---\nname: x\ndescription: ''\n---\n", "field", "'description'"),
        ("---\nname: 'has space'\ndescription: y\n---\n", "field", "'name'"),
        ("---\nname: x\ndescription: y\nexecution: fork\n---\n", "field", "'execution'"),
        ("---\nname: x\ndescription: y\nallowed-tools: 3\n---\n", "field", "'allowed-tools'"),
        ("---\nname: x\ndescription: y\nwhen: 2001-13-45\n---\n", "yaml", "invalid YAML"),
    ],
)
def test_bad_front_matter_is_a_diagnostic(
    tmp_path: Path, text: str, code: str, needle: str
) -> None:
    write(tmp_path, "s/SKILL.md", text)
    catalog = SkillCatalog([tmp_path])
    assert catalog.skills == ()
    (diag,) = catalog.diagnostics
    assert diag.code == code and needle in diag.message
    assert diag.path.name == "SKILL.md"


def test_non_utf8_file_is_a_diagnostic(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "SKILL.md").write_bytes(b"---\nname: x\xff\n---\n")
    assert codes(SkillCatalog([tmp_path])) == ["unreadable"]


def test_dot_folders_and_skill_subfolders_are_not_searched(tmp_path: Path) -> None:
    write(tmp_path, ".git/SKILL.md", skill_text("hidden"))
    write(tmp_path, "outer/SKILL.md", skill_text("outer"))
    write(tmp_path, "outer/nested/SKILL.md", skill_text("nested"))
    catalog = SkillCatalog([tmp_path])
    assert names(catalog) == ["outer"]
    assert catalog.diagnostics == ()


def test_reload_and_invalidate_pick_up_changes(tmp_path: Path) -> None:
    path = write(tmp_path, "s/SKILL.md", skill_text("s", "Old.", body="old body"))
    catalog = SkillCatalog([tmp_path])
    assert catalog.read("s").text == "old body"
    path.write_text(skill_text("s", "New.", body="new body"), encoding="utf-8")
    write(tmp_path, "t/SKILL.md", skill_text("t"))
    assert catalog.read("s").text == "old body"  # loaded once, until told
    catalog.reload()
    assert catalog.read("s").text == "new body"
    assert names(catalog) == ["s", "t"]
    (tmp_path / "t" / "SKILL.md").unlink()
    catalog.invalidate()
    assert names(catalog) == ["s"]


# --- reading ---------------------------------------------------------------


def test_read_pages_the_body(tmp_path: Path) -> None:
    body = "".join(f"line {i}\n" for i in range(100))
    write(tmp_path, "s/SKILL.md", skill_text("s", body=body))
    catalog = SkillCatalog([tmp_path])
    pages: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = catalog.read("s", offset, 64)
        assert page.total == len(body) and len(page.text) <= 64
        pages.append(page.text)
        offset = page.next_offset
    assert "".join(pages) == body
    with pytest.raises(SkillNotFound):
        catalog.read("missing")
    with pytest.raises(ValueError, match="past the end"):
        catalog.read("s", len(body) + 1)


def test_resources_next_to_skill_md(tmp_path: Path) -> None:
    write(tmp_path, "s/SKILL.md", skill_text("s", body="the body"))
    write(tmp_path, "s/scripts/fill.py", "print('hi')\n")
    write(tmp_path, "secret.txt", "top secret")
    (tmp_path / "s" / "bin.dat").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "s" / "link.txt").symlink_to(tmp_path / "secret.txt")
    catalog = SkillCatalog([tmp_path], limits=SkillLimits(max_file_bytes=5000))
    assert catalog.read_resource("s", "scripts/fill.py").text == "print('hi')\n"
    assert catalog.read_resource("s", "./scripts/fill.py", offset=6, limit=4).text == "'hi'"
    assert catalog.read_resource("s", "SKILL.md").text == "the body"
    for bad in ("../secret.txt", "scripts/../../secret.txt", "/etc/passwd", "", "link.txt"):
        with pytest.raises(SkillPathError):
            catalog.read_resource("s", bad)
    for bad in ("missing.txt", "scripts", "bin.dat"):
        with pytest.raises(SkillPathError):
            catalog.read_resource("s", bad)
    write(tmp_path, "s/huge.txt", "z" * 6000)
    with pytest.raises(SkillPathError, match="over 5000 bytes"):
        catalog.read_resource("s", "huge.txt")
    with pytest.raises(SkillNotFound):
        catalog.read_resource("nope", "SKILL.md")


# --- tools -----------------------------------------------------------------


async def call(tool_name: str, catalog: SkillCatalog, **args: object) -> tuple[str, bool]:
    (found,) = [t for t in catalog.tools() if t.name == tool_name]
    assert found.policy.read_only
    out = await found.call(found.validate(args), None)
    return out.content, out.is_error


@pytest.fixture
def many(tmp_path: Path) -> SkillCatalog:
    for i in range(25):
        kind = "Invoice" if i % 5 == 0 else "Report"
        write(tmp_path, f"s{i:02}/SKILL.md", skill_text(f"skill-{i:02}", f"{kind} helper {i}."))
    return SkillCatalog([tmp_path])


@pytest.mark.anyio
async def test_skills_list_pages_and_queries(many: SkillCatalog) -> None:
    content, is_error = await call("skills_list", many)
    first = json.loads(content)
    assert not is_error
    assert first["total"] == 25 and first["next_offset"] == 20 and len(first["skills"]) == 20
    assert first["skills"][0] == {
        "name": "skill-00",
        "description": "Invoice helper 0.",
        "execution": "inline",
    }
    second = json.loads((await call("skills_list", many, offset=20))[0])
    assert [s["name"] for s in second["skills"]] == [f"skill-{i}" for i in range(20, 25)]
    assert second["next_offset"] is None
    found = json.loads((await call("skills_list", many, query="INVOICE", limit=2))[0])
    assert found["total"] == 5 and found["next_offset"] == 2
    assert [s["name"] for s in found["skills"]] == ["skill-00", "skill-05"]
    both = json.loads((await call("skills_list", many, query="invoice 15"))[0])
    assert [s["name"] for s in both["skills"]] == ["skill-15"]
    none = json.loads((await call("skills_list", many, query="zebra"))[0])
    assert none == {"total": 0, "offset": 0, "next_offset": None, "skills": []}


@pytest.mark.anyio
async def test_skills_read_pages_resources_and_errors(tmp_path: Path) -> None:
    write(tmp_path, "s/SKILL.md", skill_text("s", body="abcdefghij"))
    write(tmp_path, "s/ref/notes.md", "notes here")
    write(tmp_path, "outside.md", "secret")
    catalog = SkillCatalog([tmp_path])
    assert await call("skills_read", catalog, name="s") == ("abcdefghij", False)
    content, is_error = await call("skills_read", catalog, name="s", limit=4)
    assert not is_error
    assert content.startswith("abcd\n\n[SKILL.md: characters 0-4 of 10;")
    assert "offset=4" in content
    content, _ = await call("skills_read", catalog, name="s", offset=8, limit=4)
    assert content.startswith("ij\n\n") and "end of file" in content
    assert await call("skills_read", catalog, name="s", path="ref/notes.md") == (
        "notes here",
        False,
    )
    for args in (
        {"name": "ghost"},
        {"name": "s", "path": "../outside.md"},
        {"name": "s", "path": "/etc/passwd"},
        {"name": "s", "path": "ref/missing.md"},
        {"name": "s", "offset": 99},
    ):
        content, is_error = await call("skills_read", catalog, **args)
        assert is_error, args
        assert content


# --- resident block --------------------------------------------------------


def test_resident_block_fits_the_budget(many: SkillCatalog) -> None:
    full = many.resident_block(max_bytes=100_000)
    assert full.startswith("<skills>\n") and full.endswith("</skills>")
    assert "- skill-00: Invoice helper 0.\n" in full and "more not shown" not in full
    size = len(full.encode("utf-8"))
    assert many.resident_block(max_bytes=size) == full
    for budget in (150, 300, size // 2, size - 1):
        block = many.resident_block(max_bytes=budget)
        assert len(block.encode("utf-8")) <= budget
        shown = block.count("\n- ")
        assert f"(+{25 - shown} more not shown" in block
    assert many.resident_block(max_bytes=20) == ""


def test_resident_block_uses_one_line_descriptions(tmp_path: Path) -> None:
    write(tmp_path, "s/SKILL.md", skill_text("s", "|\n  First line.\n  Second line."))
    block = SkillCatalog([tmp_path]).resident_block()
    assert "- s: First line. Second line.\n" in block
    assert SkillCatalog([tmp_path / "empty"]).resident_block() == ""


# --- end to end ------------------------------------------------------------


@pytest.mark.anyio
async def test_model_lists_then_reads_a_skill(tmp_path: Path) -> None:
    write(tmp_path, "refund/SKILL.md", skill_text("refunds", "Issue a refund.", body="1. Check."))
    write(tmp_path, "other/SKILL.md", skill_text("other", "Unrelated."))
    catalog = SkillCatalog([tmp_path])
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=[ScriptedCall("skills_list", {"query": "refund"})]),
            ScriptedResponse(tool_calls=[ScriptedCall("skills_read", {"name": "refunds"})]),
            "Following the refunds skill.",
        ]
    )
    session = Session(Agent(model=model, tools=catalog.tools()))
    events = await send(session, "refund my order")
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.is_error for r in results] == [False, False]
    listed = json.loads(model.requests[1].messages[-1].tool_results_parts[0].content)
    assert [s["name"] for s in listed["skills"]] == ["refunds"]
    assert model.requests[2].messages[-1].tool_results_parts[0].content == "1. Check."
    assert {spec.name for spec in model.requests[0].tools} == {"skills_list", "skills_read"}


# --- invariants ------------------------------------------------------------

LIMITS = SkillLimits(max_depth=2, max_files=4, max_file_bytes=300, max_total_bytes=700)
segment = st.sampled_from(["a", "b", "c", ".h", "SKILL.md"])
content = st.one_of(
    st.text(max_size=400),
    st.builds(
        lambda n, d, extra, body: f"---\nname: {n}\ndescription: {d}\n{extra}---\n{body}",
        st.text(min_size=1, max_size=20),
        st.text(max_size=30),
        st.sampled_from(["", "execution: subagent\n", "execution: [\n", "allowed-tools: [x]\n"]),
        st.text(max_size=300),
    ),
)
tree = st.lists(
    st.tuples(st.lists(segment, min_size=0, max_size=4), content, st.booleans()), max_size=12
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree)
def test_random_trees_never_raise_and_stay_in_bounds(
    entries: list[tuple[list[str], str, bool]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root = base / "root"
        root.mkdir()
        (base / "outside").mkdir()
        for parts, text, link in entries:
            path = root.joinpath(*parts, "SKILL.md")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if link:
                    os.symlink(base / "outside", path.parent / "l", target_is_directory=True)
                path.write_text(text, encoding="utf-8", errors="surrogatepass")
            except (OSError, UnicodeError):
                continue  # a path segment collided with an existing file
        catalog = SkillCatalog([root, base / "outside"], limits=LIMITS)
        skills = catalog.skills
        assert len(skills) <= LIMITS.max_files
        assert sum(s.file_bytes for s in skills) <= LIMITS.max_total_bytes
        assert len({s.name for s in skills}) == len(skills)
        for s in skills:
            assert s.file_bytes <= LIMITS.max_file_bytes
            assert s.path.is_relative_to(s.root) and not s.path.is_symlink()
            depth = len(s.path.parent.relative_to(s.root).parts)
            assert depth <= LIMITS.max_depth
            assert not any(p.startswith(".") for p in s.path.relative_to(s.root).parts)
            assert catalog.read(s.name, 0, 10).total >= 0
        catalog.resident_block(max_bytes=200)


# --- hostile front matter and swapped files -----------------------------------

LAUGHS = "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" if i else "l0: &l0 [lol, lol]\n"
    for i in range(10)
)


@pytest.mark.parametrize(
    ("front", "needle"),
    [
        (LAUGHS, "aliases"),
        ("a: &x 1\nb: *x\n", "aliases"),
        ("x: " + "[" * 100 + "]" * 100 + "\n", "nested deeper than 32"),
        ("x: [" + ", ".join(["1"] * 3000) + "]\n", "more than 2000 values"),
        ("x: !!python/object/apply:os.system ['touch {marker}']\n", "python/object/apply"),
        ("x: !!python/name:os.system\n", "python/name"),
        ("x: !custom thing\n", "!custom"),
        ("x: !!binary 'not base64 @@'\n", "invalid YAML"),
        ("x: !!timestamp 'yesterday'\n", "invalid YAML"),
        ("x: !!int '0x'\n", "invalid YAML"),
        ("? [a, b]\n: c\n", "invalid YAML"),
        ("x: !!set {a, b}\ny: !!omap [1]\n", "invalid YAML"),
    ],
)
def test_hostile_front_matter_is_one_diagnostic_and_the_others_load(
    tmp_path: Path, front: str, needle: str
) -> None:
    marker = tmp_path / "pwned"
    front = front.replace("{marker}", str(marker))
    write(tmp_path, "bad/SKILL.md", f"---\nname: bad\ndescription: d\n{front}---\nbody\n")
    write(tmp_path, "good/SKILL.md", skill_text("good"))
    catalog = SkillCatalog([tmp_path])
    assert names(catalog) == ["good"]
    (diag,) = catalog.diagnostics
    assert diag.code == "yaml", diag
    assert needle in diag.message, diag.message
    assert not marker.exists()


def test_standard_tags_and_unused_anchors_are_fine(tmp_path: Path) -> None:
    text = "---\nname: !!str ok\ndescription: &d Does it.\nallowed-tools: !!seq [a]\n---\nb\n"
    write(tmp_path, "s/SKILL.md", text)
    catalog = SkillCatalog([tmp_path])
    assert names(catalog) == ["ok"] and catalog.diagnostics == ()


yaml_ish = st.lists(
    st.sampled_from(
        [*"ab:-[]{},&*!?|>'\"#\n \t%@`", "!!str ", "&a ", "*a", "!!python/", "!!timestamp "]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(yaml_ish)
def test_any_front_matter_is_a_skill_or_a_diagnostic(front: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write(root, "s/SKILL.md", f"---\nname: s\ndescription: d\n{front}\n---\nbody\n")
        catalog = SkillCatalog([root])
        assert len(catalog.skills) + len(catalog.diagnostics) == 1


def test_every_skill_too_deep_is_a_diagnostic(tmp_path: Path) -> None:
    write(tmp_path, "a/SKILL.md", skill_text("a"))
    write(tmp_path, "x/y/SKILL.md", skill_text("two-deep"))
    write(tmp_path, "x/q/r/s/t/SKILL.md", skill_text("five-deep"))
    catalog = SkillCatalog([tmp_path], limits=SkillLimits(max_depth=1))
    assert names(catalog) == ["a"]
    deep = sorted(str(d.path.relative_to(tmp_path)) for d in catalog.diagnostics)
    assert deep == ["x/q/r/s/t/SKILL.md", "x/y/SKILL.md"]
    assert codes(catalog) == ["depth", "depth"]


def test_a_big_tree_below_max_depth_does_not_stop_discovery(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / "first" / "deep" / f"d{i:02}").mkdir(parents=True)
    write(tmp_path, "second/SKILL.md", skill_text("later"))
    catalog = SkillCatalog(
        [tmp_path / "first", tmp_path / "second"], limits=SkillLimits(max_depth=0, max_entries=10)
    )
    assert names(catalog) == ["later"]
    (diag,) = catalog.diagnostics
    assert diag.code == "entries" and "below max_depth=0" in diag.message


def swap_on_first_lstat(
    monkeypatch: pytest.MonkeyPatch, target: Path, swap: Callable[[], None]
) -> None:
    """Swap ``target`` right after the check (its lstat), before the open."""
    real_lstat = os.lstat
    done: list[bool] = []

    def lstat(path: object, *args: object, **kw: object) -> os.stat_result:
        result = real_lstat(path, *args, **kw)  # type: ignore[arg-type]  # passthrough
        if not done and Path(str(path)) == target:
            done.append(True)
            swap()
        return result

    monkeypatch.setattr(os, "lstat", lstat)


def test_skill_md_swapped_for_a_fifo_after_the_check_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "s/SKILL.md", skill_text("s")).resolve()
    write(tmp_path, "t/SKILL.md", skill_text("t"))

    def to_fifo() -> None:
        path.unlink()
        os.mkfifo(path)

    swap_on_first_lstat(monkeypatch, path, to_fifo)
    catalog = SkillCatalog([tmp_path]).load()  # would block forever opening a FIFO
    assert names(catalog) == ["t"]
    (diag,) = catalog.diagnostics
    assert diag.code == "unreadable" and "not a regular file" in diag.message


def test_a_folder_swapped_for_a_symlink_after_the_check_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    path = write(root, "s/SKILL.md", skill_text("s")).resolve()
    write(tmp_path, "outside/SKILL.md", skill_text("outside", body="SECRET"))

    def to_link() -> None:
        (root / "s").rename(tmp_path / "moved")
        (root / "s").symlink_to(tmp_path / "outside", target_is_directory=True)

    swap_on_first_lstat(monkeypatch, path, to_link)
    catalog = SkillCatalog([root]).load()
    assert catalog.skills == ()
    (diag,) = catalog.diagnostics
    assert diag.code == "symlink" and "refused when opened" in diag.message


def test_resources_swapped_after_discovery_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root, "s/SKILL.md", skill_text("s"))
    write(root, "s/docs/guide.md", "guide")
    write(root, "s/notes.md", "notes")
    write(tmp_path, "outside/guide.md", "SECRET")
    catalog = SkillCatalog([root]).load()
    assert catalog.read_resource("s", "docs/guide.md").text == "guide"
    shutil.rmtree(root / "s" / "docs")
    (root / "s" / "docs").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(SkillPathError, match="passes a symlink"):
        catalog.read_resource("s", "docs/guide.md")
    (root / "s" / "notes.md").unlink()
    os.mkfifo(root / "s" / "notes.md")
    with pytest.raises(SkillPathError, match="is not a file of skill"):
        catalog.read_resource("s", "notes.md")  # not hung on the FIFO
    (root / "s").rename(tmp_path / "away")
    (root / "s").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(SkillPathError, match="passes a symlink"):
        catalog.read_resource("s", "guide.md")


# --- growth: front matter of any shape parses in time linear in its size ---------------------

FRONT_MATTER_SHAPES: dict[str, Callable[[int], str]] = {
    "long-description": lambda n: skill_text("s", description="word " * (n // 5)),
    "folded-description": lambda n: (
        "---\nname: s\ndescription: >\n" + "  word word\n" * (n // 12) + "---\nbody\n"
    ),
    "quoted-escapes": lambda n: '---\nname: s\ndescription: "' + "ab\\n" * (n // 4) + '"\n---\nb\n',
    "allowed-tools-list": lambda n: skill_text(
        "s", **{"allowed-tools": "[" + "t, " * (n // 3) + "t]"}
    ),
    "allowed-tools-block": lambda n: (
        "---\nname: s\ndescription: d\nallowed-tools:\n" + "  - tool\n" * (n // 9) + "---\nb\n"
    ),
    "comments": lambda n: "---\nname: s\ndescription: d\n" + "# c\n" * (n // 4) + "---\nbody\n",
    "many-keys": lambda n: "---\nname: s\ndescription: d\n"
    + "".join(f"k{i}: v\n" for i in range(n // 8)) + "---\nbody\n",
    "long-body": lambda n: skill_text("s", body="line\n" * (n // 5)),
    "unclosed": lambda n: "---\nname: s\ndescription: d\n" + "x: y\n" * (n // 5),
}  # fmt: skip
_BIG = SkillLimits(max_file_bytes=2_000_000, max_total_bytes=4_000_000)


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(FRONT_MATTER_SHAPES))
def test_front_matter_parses_in_time_linear_in_its_size(tmp_path: Path, shape: str) -> None:
    from tests.growth import assert_linear

    def make(size: int) -> Path:
        root = tmp_path / str(size)
        write(root, "s/SKILL.md", FRONT_MATTER_SHAPES[shape](size))
        return root

    def discover(root: Path) -> int:
        catalog = SkillCatalog([root], limits=_BIG)
        return len(catalog.skills) + len(catalog.diagnostics)

    assert_linear(discover, make)


@pytest.mark.slow
@depths(quick=1, nightly=20)  # the named shapes above run always; random ones are depth
def test_any_repeated_front_matter_shape_parses_in_linear_time(examples: int) -> None:
    from tests.growth import assert_linear

    @settings(max_examples=examples, deadline=None, derandomize=True)
    @given(unit=yaml_ish.filter(lambda s: bool(s.strip())))
    def check(unit: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:

            def make(size: int) -> Path:
                root = Path(tmp) / str(size)
                front = unit * max(1, size // len(unit.encode()))
                write(root, "s/SKILL.md", f"---\nname: s\ndescription: d\n{front}\n---\nbody\n")
                return root

            def discover(root: Path) -> int:
                catalog = SkillCatalog([root], limits=_BIG)
                return len(catalog.skills) + len(catalog.diagnostics)

            assert_linear(discover, make)

    check()
