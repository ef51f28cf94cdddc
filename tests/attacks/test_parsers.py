"""Pipeline contracts whose cost would grow faster than their size.

A contract near the 1 MiB cap must load in time linear in its size. Two
lines repeated do the damage: a folder input (``stages/01_x/output/``)
expands to every output of that stage, once per line that lists it (a
thousand lines of it over a thousand outputs is a million inputs, and
contracts near the cap reach billions), and a reference input is read from
disk once per line that names it (a megabyte file named on ten thousand
lines is ten gigabytes read, then put in the stage's prompt as often). An
input is now listed once per stage however often its lines repeat it, and
each reference file is read once per contract. (The growth checks that
compare 10 KB and 1 MB contracts of every shape sit beside the contract
fuzzing, in ``tests/test_pipelines_hostile.py``.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mainspring.pipelines import load_workspace
from mainspring.pipelines._files import WorkspaceFiles

EXAMPLE = Path(__file__).parents[2] / "examples" / "blog-pipeline"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "blog"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("output"))
    return root


def add_items(contract: Path, section: str, lines: str) -> None:
    text = contract.read_text()
    contract.write_text(text.replace(f"## {section}\n", f"## {section}\n{lines}", 1))


def test_a_folder_input_repeated_on_every_line_expands_once(ws: Path) -> None:
    outputs, repeats = 400, 400
    add_items(
        ws / "stages" / "01_research" / "CONTEXT.md",
        "Outputs",
        "".join(f"- o{i}.md\n" for i in range(outputs)),
    )
    add_items(
        ws / "stages" / "02_draft" / "CONTEXT.md",
        "Inputs",
        "- `stages/01_research/output/`\n" * repeats,
    )
    stage = load_workspace(ws).stage(2)
    paths = [ref.path for ref in stage.inputs]
    assert len(paths) == len(set(paths)), "an input is listed once, however often it repeats"
    # notes.md (listed by file and by folder) and o0..o399 from the folder, voice.md
    assert len(paths) == outputs + 2
    assert f"stages/01_research/output/o{outputs - 1}.md" in paths


def test_a_reference_named_on_every_line_is_read_once(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "_config" / "voice.md").write_text("plain words\n" * 1000)
    reads: list[str] = []
    original = WorkspaceFiles.read_bytes

    def counted(self: WorkspaceFiles, rel: str) -> bytes | None:
        reads.append(rel)
        return original(self, rel)

    monkeypatch.setattr(WorkspaceFiles, "read_bytes", counted)
    load_workspace(ws)
    plain = reads.count("_config/voice.md")  # once per contract that names it
    reads.clear()
    add_items(
        ws / "stages" / "02_draft" / "CONTEXT.md",
        "Inputs",
        "- `_config/voice.md` - again\n" * 2_000,
    )
    stage = load_workspace(ws).stage(2)
    assert reads.count("_config/voice.md") == plain
    assert [ref.path for ref in stage.inputs].count("_config/voice.md") == 1


def test_a_missing_reference_is_still_refused_at_its_first_line(ws: Path) -> None:
    from mainspring.pipelines import PipelineError

    add_items(
        ws / "stages" / "02_draft" / "CONTEXT.md",
        "Inputs",
        "- `_config/voice.md`\n" * 3 + "- `_config/missing.md`\n" * 3,
    )
    with pytest.raises(PipelineError, match=r"missing\.md") as info:
        load_workspace(ws)
    assert info.value.line is not None and info.value.line > 3
