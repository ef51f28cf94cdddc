"""Folder pipelines: contracts parse with file+line errors; stages run, gate, resume."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from mainspring.cli.commands import app
from mainspring.events import ToolResult
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.pipelines import (
    ContextLoaded,
    Gate,
    PipelineError,
    PipelineEvent,
    PipelineHalted,
    PipelineRunner,
    Stage,
    StageEvent,
    StageFinished,
    load_workspace,
    scripted_pipeline_model,
)
from mainspring.tools.define import tool

EXAMPLE = Path(__file__).parents[1] / "examples" / "blog-pipeline"
ARTIFACTS = (
    "stages/01_research/output/notes.md",
    "stages/02_draft/output/draft.md",
    "stages/03_polish/output/post.md",
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "blog"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("output"))
    return root


def collect(events: AsyncIterator[PipelineEvent]) -> list[PipelineEvent]:
    out: list[PipelineEvent] = []

    async def main() -> None:
        out.extend([event async for event in events])

    anyio.run(main)
    return out


def runner(
    root: Path, *, gate: Gate | None = None, context_budget: int | None = None
) -> PipelineRunner:
    return PipelineRunner(
        load_workspace(root),
        model=scripted_pipeline_model(),
        gate=gate,
        context_budget=context_budget,
    )


def test_example_runs_end_to_end_offline(ws: Path) -> None:
    events = collect(runner(ws).run())
    for rel in ARTIFACTS:
        assert (ws / rel).read_text().startswith("# ")
    finished = [e.stage for e in events if isinstance(e, StageFinished)]
    assert finished == ["01_research", "02_draft", "03_polish"]
    loaded = [e for e in events if isinstance(e, ContextLoaded)]
    assert loaded[1].files == (
        "AGENT.md",
        "CONTEXT.md",
        "stages/02_draft/CONTEXT.md",
        "stages/01_research/output/notes.md",
        "_config/voice.md",
    )
    assert "references/topic.md" not in loaded[1].files  # only what the contract names
    assert all(e.token_estimate > 0 for e in loaded)
    assert {e.stage for e in events if isinstance(e, StageEvent)} == set(finished)


def test_contract_parsing(ws: Path) -> None:
    workspace = load_workspace(ws)
    draft = workspace.stage(2)
    assert [(i.path, i.layer, i.note) for i in draft.inputs] == [
        ("stages/01_research/output/notes.md", 4, "the research notes"),
        ("_config/voice.md", 3, "the house voice"),
    ]
    assert draft.process.startswith("Turn the notes")
    assert [o.name for o in draft.outputs] == ["draft.md"]
    assert workspace.stage(3).tools == ("write_*",)


CONTRACT = """# Stage

## Inputs

- `references/topic.md` — topic

## Process

Do it.

## Outputs

- `out.md` — result
"""


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (CONTRACT.replace("## Process\n\nDo it.\n", ""), 1, "missing section '## Process'"),
        (CONTRACT.replace("references/topic.md", "../../../etc/passwd"), 5, "escapes"),
        (CONTRACT.replace("references/topic.md", "references/nope.md"), 5, "does not exist"),
        (CONTRACT.replace("`out.md`", "`../out.md`"), 13, "plain file name"),
    ],
)
def test_malformed_contract_names_file_and_line(
    ws: Path, text: str, line: int, message: str
) -> None:
    contract = ws / "stages" / "01_research" / "CONTEXT.md"
    contract.write_text(text)
    with pytest.raises(PipelineError, match=message) as info:
        load_workspace(ws)
    assert info.value.path == contract and info.value.line == line
    assert f"{contract}:{line}" in str(info.value)


def test_working_input_no_earlier_stage_writes(ws: Path) -> None:
    contract = ws / "stages" / "02_draft" / "CONTEXT.md"
    contract.write_text(contract.read_text().replace("notes.md", "missing.md", 1))
    with pytest.raises(PipelineError, match="does not exist") as info:
        load_workspace(ws)
    assert info.value.path == contract and info.value.line == 5


def test_two_stages_with_one_number(ws: Path) -> None:
    shutil.copytree(ws / "stages" / "02_draft", ws / "stages" / "02_rewrite")
    with pytest.raises(PipelineError, match="two stages numbered 02") as info:
        load_workspace(ws)
    assert info.value.path == ws / "stages" / "02_rewrite" / "CONTEXT.md"
    assert info.value.line == 1


def test_context_budget_exceeded_is_a_clear_error(ws: Path) -> None:
    with pytest.raises(PipelineError, match="over its budget of 10") as info:
        collect(runner(ws, context_budget=10).run())
    assert info.value.path == ws / "stages" / "01_research" / "CONTEXT.md"


def test_tool_outside_the_stage_list_is_denied(ws: Path) -> None:
    ran: list[str] = []

    @tool
    def publish(text: str) -> str:
        """Publish the post."""
        ran.append(text)
        return "published"

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str | ScriptedResponse:
        if any(m.role == "tool" for m in messages):
            return "final text"
        return ScriptedResponse(tool_calls=[ScriptedCall("publish", {"text": "x"})])

    r = PipelineRunner(load_workspace(ws), model=ScriptedModel(script), tools=[publish])
    events = collect(r.run_stage(r.workspace.stage(1)))
    results = [e.event for e in events if isinstance(e, StageEvent)]
    denied = [e for e in results if isinstance(e, ToolResult)]
    assert len(denied) == 1 and denied[0].is_error and "unknown tool" in denied[0].content
    assert ran == []
    # the final text became the first artifact
    assert (ws / ARTIFACTS[0]).read_text() == "final text\n"


def test_gate_halts_and_resume_continues(ws: Path) -> None:
    seen: list[str] = []

    def gate(stage: Stage) -> bool:
        seen.append(stage.name)
        return False

    events = collect(runner(ws, gate=gate).run())
    assert isinstance(events[-1], PipelineHalted) and events[-1].stage == "01_research"
    assert seen == ["01_research"]
    assert (ws / ARTIFACTS[0]).is_file() and not (ws / ARTIFACTS[1]).exists()

    again = runner(ws)
    stale = again.first_stale()
    assert stale is not None and stale.number == 2
    resumed = collect(again.resume())
    assert [e.stage for e in resumed if isinstance(e, StageFinished)] == ["02_draft", "03_polish"]
    assert all((ws / rel).is_file() for rel in ARTIFACTS)
    assert again.first_stale() is None
    assert collect(again.resume()) == []


def test_rerun_one_stage_then_resume_follows_changed_inputs(ws: Path) -> None:
    r = runner(ws)
    collect(r.run())
    assert r.first_stale() is None
    later = 2_000_000_000
    for rel in ARTIFACTS:  # times do not matter, contents do
        os.utime(ws / rel, (later, later))
    os.utime(ws / "_config" / "voice.md", (later + 10, later + 10))
    assert r.first_stale() is None
    notes = ws / ARTIFACTS[0]
    notes.write_text("# Research notes\n\n- edited by hand\n")  # a human edits a hand-off
    stale = r.first_stale()
    assert stale is not None and stale.number == 2
    resumed = collect(r.resume())
    assert [e.stage for e in resumed if isinstance(e, StageFinished)] == ["02_draft", "03_polish"]
    assert notes.read_text().endswith("edited by hand\n")  # stage 01 did not run again
    assert r.first_stale() is None
    events = collect(r.run_stage(r.workspace.stage(1)))
    assert [e.stage for e in events if isinstance(e, StageFinished)] == ["01_research"]
    assert notes.read_text().startswith("# Research notes\n\n- A finding")
    stale = r.first_stale()
    assert stale is not None and stale.number == 2


@pytest.mark.parametrize(
    ("edited", "first"),
    [
        ("AGENT.md", 1),
        ("CONTEXT.md", 1),
        ("stages/02_draft/CONTEXT.md", 2),
        ("stages/03_polish/CONTEXT.md", 3),
        ("_config/voice.md", 2),
    ],
)
def test_editing_a_contract_or_a_layer_makes_outputs_stale(
    ws: Path, edited: str, first: int
) -> None:
    collect(runner(ws).run())
    path = ws / edited
    path.write_text(path.read_text() + "\nOne more line.\n")
    stale = runner(ws).first_stale()
    assert stale is not None and stale.number == first


def test_a_damaged_manifest_makes_a_stage_stale(ws: Path) -> None:
    collect(runner(ws).run())
    manifest = ws / "stages" / "02_draft" / "output" / ".mainspring-stage.json"
    manifest.write_text("{not json")
    stale = runner(ws).first_stale()
    assert stale is not None and stale.number == 2


def test_stage_alone_needs_its_inputs(ws: Path) -> None:
    r = runner(ws)
    with pytest.raises(PipelineError, match="does not exist") as info:
        collect(r.run_stage(r.workspace.stage(2)))
    assert info.value.line == 5


def test_cli_pipeline_run(ws: Path) -> None:
    cli = CliRunner()
    result = cli.invoke(app, ["pipeline", "run", str(ws), "--yes"])
    assert result.exit_code == 0, result.output
    assert result.output.count("accepted automatically") == 3  # after every stage
    assert f"{ARTIFACTS[-1]} (" in result.output  # each output named for review
    assert all((ws / rel).is_file() for rel in ARTIFACTS)

    result = cli.invoke(app, ["pipeline", "run", str(ws), "--stage", "3"])
    assert result.exit_code == 0, result.output
    assert "stage 03_polish" in result.output and "01_research" not in result.output


def test_cli_gate_without_terminal_halts(ws: Path) -> None:
    result = CliRunner().invoke(app, ["pipeline", "run", str(ws)])
    assert result.exit_code == 1
    assert "pass --yes" in result.output and "halted at 01_research" in result.output
    assert not (ws / ARTIFACTS[1]).exists()


def test_cli_reports_a_malformed_workspace(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["pipeline", "run", str(tmp_path)])
    assert result.exit_code == 2  # a configuration error, as for every command
    assert "has no AGENT.md" in result.output


def test_cli_pipeline_with_a_model_missing_its_key_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from mainspring.cli.commands import app

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = CliRunner().invoke(app, ["pipeline", "run", str(tmp_path), "--model", "openai:gpt-5"])
    assert result.exit_code == 2 and "needs OPENAI_API_KEY" in result.output
