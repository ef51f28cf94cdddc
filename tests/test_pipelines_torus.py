"""The torus SDK's blog example, as its README writes it, loads and runs unchanged.

Also the SDK's run surface: ``query``, ``run_pipeline`` with a review gate,
``stage_start`` / ``context_loaded`` / ``stage_output`` events, per-stage turn
limits, pipeline-wide permission overlays and approvals inside a stage.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import pytest

from mainspring.decisions import Approve, Reject
from mainspring.events import PendingAction, ToolResult
from mainspring.messages import Message
from mainspring.models.base import ToolSpec
from mainspring.models.scripted import ScriptedCall, ScriptedModel, ScriptedResponse
from mainspring.permissions import Allow, Deny
from mainspring.pipelines import (
    ContextLoaded,
    PipelineError,
    PipelineEvent,
    PipelineHalted,
    QueryResult,
    Stage,
    StageArtifact,
    StageEvent,
    StageFinished,
    StageOutput,
    StageStart,
    load_workspace,
    query,
    run_pipeline,
    scripted_pipeline_model,
)
from mainspring.tools.define import tool
from mainspring.tools.policy import ToolInput

TORUS_BLOG = Path(__file__).parent / "pipeline_workspaces" / "torus-blog"


@pytest.fixture
def blog(tmp_path: Path) -> Path:
    root = tmp_path / "blog"
    shutil.copytree(TORUS_BLOG, root)
    return root


def collect(events: AsyncIterator[PipelineEvent]) -> list[PipelineEvent]:
    out: list[PipelineEvent] = []

    async def main() -> None:
        out.extend([event async for event in events])

    anyio.run(main)
    return out


def test_the_contracts_load_as_written(blog: Path) -> None:
    ws = load_workspace(blog)
    assert [s.name for s in ws.stages] == ["01_research", "02_draft", "03_edit"]
    research, draft, edit = ws.stages
    assert [(i.path, i.layer, i.note) for i in research.inputs] == [
        ("_config/audience.md", 3, "who the post is for"),
        ("stages/01_research/references/sources.md", 3, "where to look first"),
    ]
    assert research.tools == ("mcp__search__*",)
    assert [o.name for o in research.outputs] == ["research-output.md"]
    assert [(i.path, i.layer, i.note) for i in draft.inputs] == [
        ("stages/01_research/output/research-output.md", 4, "the research notes"),
        ("_config/voice.md", 3, ""),
        ("stages/02_draft/references/structure.md", 3, "the post's shape"),
    ]
    assert draft.process.startswith("Write a first draft based on the research output.")
    assert draft.tools == ()
    # a folder input stands for every artifact the earlier stage declares
    assert [(i.path, i.layer) for i in edit.inputs] == [
        ("stages/02_draft/output/draft.md", 4),
        ("_config/voice.md", 3),
    ]
    assert [(o.name, o.note) for o in edit.outputs] == [
        ("final-post.md", ""),
        ("edit-notes.md", "what changed, and why"),
    ]


def test_the_blog_runs_unchanged_with_the_scripted_model(blog: Path) -> None:
    gated: list[str] = []

    async def review(stage: Stage) -> bool:
        gated.append(stage.name)
        return True

    events = collect(
        run_pipeline(load_workspace(blog), model=scripted_pipeline_model(), gate=review)
    )
    for rel in (
        "stages/01_research/output/research-output.md",
        "stages/02_draft/output/draft.md",
        "stages/03_edit/output/final-post.md",
        "stages/03_edit/output/edit-notes.md",
    ):
        assert (blog / rel).read_text().startswith("# "), rel
    assert gated == ["01_research", "02_draft", "03_edit"]  # after every stage, the last too
    starts = [e for e in events if isinstance(e, StageStart)]
    assert [(e.stage, e.index, e.total) for e in starts] == [
        ("01_research", 1, 3),
        ("02_draft", 2, 3),
        ("03_edit", 3, 3),
    ]
    loaded = {e.stage: e.files for e in events if isinstance(e, ContextLoaded)}
    assert loaded["02_draft"] == (
        "AGENT.md",
        "CONTEXT.md",
        "stages/02_draft/CONTEXT.md",
        "stages/01_research/output/research-output.md",
        "_config/voice.md",
        "stages/02_draft/references/structure.md",
    )
    outputs = [(e.stage, e.path) for e in events if isinstance(e, StageOutput)]
    assert outputs == [
        ("01_research", "stages/01_research/output/research-output.md"),
        ("02_draft", "stages/02_draft/output/draft.md"),
        ("03_edit", "stages/03_edit/output/final-post.md"),
        ("03_edit", "stages/03_edit/output/edit-notes.md"),
    ]
    # each stage: start, context, engine events with its outputs, complete
    for name in ("01_research", "02_draft", "03_edit"):
        kinds = [e.type for e in events if getattr(e, "stage", None) == name]
        assert kinds[:2] == ["stage_start", "context_loaded"]
        assert kinds[-1] == "stage_complete"
        assert "stage_output" in kinds and set(kinds[2:-1]) <= {"stage_event", "stage_output"}


def test_the_review_gate_gets_each_stages_outputs_and_runs_after_the_last(blog: Path) -> None:
    reviewed: dict[str, Sequence[StageArtifact]] = {}

    async def review(stage: Stage, outputs: Sequence[StageArtifact]) -> bool:
        reviewed[stage.name] = outputs
        return stage.name != "03_edit"  # the final post is not accepted

    events = collect(
        run_pipeline(load_workspace(blog), model=scripted_pipeline_model(), gate=review)
    )
    assert list(reviewed) == ["01_research", "02_draft", "03_edit"]
    final = reviewed["03_edit"]
    assert [(o.artifact, o.path) for o in final] == [
        ("final-post.md", "stages/03_edit/output/final-post.md"),
        ("edit-notes.md", "stages/03_edit/output/edit-notes.md"),
    ]
    for output in (*final, *reviewed["01_research"]):  # the text as written, read after the stage
        assert output.text == (blog / output.path).read_text() and output.text.startswith("# ")
    halted = events[-1]
    assert isinstance(halted, PipelineHalted) and halted.stage == "03_edit"
    assert halted.reason == "the review gate halted the pipeline"


def test_a_gate_saying_no_halts_and_resume_picks_up(blog: Path) -> None:
    events = collect(
        run_pipeline(load_workspace(blog), model=scripted_pipeline_model(), gate=lambda s: False)
    )
    assert isinstance(events[-1], PipelineHalted) and events[-1].stage == "01_research"
    resumed = collect(
        run_pipeline(load_workspace(blog), model=scripted_pipeline_model(), resume=True)
    )
    assert [e.stage for e in resumed if isinstance(e, StageFinished)] == ["02_draft", "03_edit"]


CONTRACT = """# Stage

## Inputs
{item}

## Process
Do it.

## Outputs
{output}
"""


def write_contract(blog: Path, item: str, output: str = "- draft.md -> output/") -> Path:
    contract = blog / "stages" / "02_draft" / "CONTEXT.md"
    contract.write_text(CONTRACT.format(item=item, output=output))
    return contract


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("- Layer 4 (working): ../../_config/voice.md", "tagged Layer 4 but lives in a reference"),
        (
            "- Layer 3 (reference): ../01_research/output/research-output.md",
            "tagged Layer 3 but lives in an earlier stage's output/",
        ),
        ("- Layer 3 (reference): ../../../outside.md", "escapes the workspace"),
        ("- Layer 3 (reference): /etc/passwd", "escapes the workspace"),
        ("- Layer 3 (reference): ../../_config/missing.md", "does not exist"),
        ("- Layer 3 (reference): ../../AGENT.md", "must be a file under"),
        ("- Layer 4 (working): ../03_edit/output/final-post.md", "no earlier stage writes it"),
        ("- Layer 4 (working): ../09_nope/output/", "no earlier stage's output/"),
        ("- Layer 1 (routing): ../../CONTEXT.md", "must be a file under"),
    ],
)
def test_a_bad_input_item_names_the_contract_and_line(blog: Path, item: str, message: str) -> None:
    contract = write_contract(blog, item)
    with pytest.raises(PipelineError, match=message) as info:
        load_workspace(blog)
    assert info.value.path == contract and info.value.line == 4


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("- draft.md -> elsewhere/", "artifacts go to output/"),
        ("- ../draft.md -> output/", "plain file name"),
        ("- .hidden -> output/", "plain file name"),
        ("- draft.md -> output/\n- draft.md -> output/", "listed twice"),
    ],
)
def test_a_bad_output_item_names_the_contract_and_line(
    blog: Path, output: str, message: str
) -> None:
    contract = write_contract(blog, "- Layer 3 (reference): ../../_config/voice.md", output=output)
    with pytest.raises(PipelineError, match=message) as info:
        load_workspace(blog)
    assert info.value.path == contract and info.value.line is not None and info.value.line >= 10


def test_notes_after_a_dash_or_in_parentheses(blog: Path) -> None:
    write_contract(
        blog,
        "- Layer 3 (reference): ../../_config/voice.md \u2014 the voice\n"
        "- Layer 3: ../../_config/audience.md (who reads it)\n"
        "- Layer 4 (working): `../01_research/output/research-output.md` - notes",
    )
    draft = load_workspace(blog).stage(2)
    assert [(i.path, i.note) for i in draft.inputs] == [
        ("_config/voice.md", "the voice"),
        ("_config/audience.md", "who reads it"),
        ("stages/01_research/output/research-output.md", "notes"),
    ]


# -- tools, overlays, approvals, turn limits -------------------------------------


def calling(name: str, args: ToolInput) -> ScriptedModel:
    """Calls ``name`` once in each stage, then ends the stage with its final text."""

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str | ScriptedResponse:
        if any(m.role == "tool" for m in messages):
            return "# Result\n\nDone.\n"
        return ScriptedResponse(tool_calls=[ScriptedCall(name, dict(args))])

    return ScriptedModel(script)


def single_stage(blog: Path) -> Path:
    """Keep only stage 01 (its one output is written from the final text)."""
    for name in ("02_draft", "03_edit"):
        shutil.rmtree(blog / "stages" / name)
    return blog


def tool_results(events: Sequence[PipelineEvent]) -> list[ToolResult]:
    return [
        e.event for e in events if isinstance(e, StageEvent) and isinstance(e.event, ToolResult)
    ]


def test_the_tools_allowlist_takes_mcp_wildcards(blog: Path) -> None:
    ran: list[str] = []

    @tool(name="mcp__search__web", read_only=True)
    def search(q: str) -> str:
        """Search the web."""
        ran.append(q)
        return "three results"

    @tool(name="mcp__mail__send", read_only=True)
    def send(q: str) -> str:
        """Send mail."""
        ran.append("sent " + q)
        return "sent"

    single_stage(blog)
    ws = load_workspace(blog)
    events = collect(
        run_pipeline(ws, model=calling("mcp__search__web", {"q": "x"}), tools=[search, send])
    )
    assert ran == ["x"] and isinstance(events[-1], StageFinished)
    events = collect(
        run_pipeline(ws, model=calling("mcp__mail__send", {"q": "x"}), tools=[search, send])
    )
    (denied,) = tool_results(events)
    assert denied.is_error and "unknown tool" in denied.content
    assert ran == ["x"]


def test_a_pipeline_wide_deny_list_and_callback_cover_every_stage(blog: Path) -> None:
    ran: list[str] = []

    @tool(name="mcp__search__web", read_only=True)
    def search(q: str) -> str:
        """Search the web."""
        ran.append(q)
        return "found"

    ws = load_workspace(blog)
    events = collect(
        run_pipeline(
            ws,
            model=calling("mcp__search__web", {"q": "x"}),
            tools=[search],
            deny=["mcp__search__*"],
            stage=1,
        )
    )
    (denied,) = tool_results(events)
    assert denied.is_error and ran == []

    asked: list[str] = []

    def policy(name: str, args: ToolInput) -> Allow | Deny | None:
        asked.append(name)
        return Deny("not in this pipeline") if name == "write_artifact" else Allow()

    model = scripted_pipeline_model()
    events = collect(run_pipeline(ws, model=model, can_use_tool=policy))
    # the callback saw every stage's writes: one artifact each in 01 and 02, two in 03
    assert asked == ["write_artifact"] * 4
    results = tool_results(events)
    assert len(results) == 4
    assert all(r.is_error and "not in this pipeline" in r.content for r in results)
    # the final text stood in for each first artifact; 03's second one was never written
    assert isinstance(events[-1], PipelineHalted) and events[-1].stage == "03_edit"
    assert "did not write edit-notes.md" in events[-1].reason


def test_an_approval_inside_a_stage_goes_to_the_caller(blog: Path) -> None:
    published: list[str] = []

    @tool(name="mcp__search__publish", permission="confirm")
    def publish(q: str) -> str:
        """Publish a post."""
        published.append(q)
        return "published"

    single_stage(blog)
    ws = load_workspace(blog)
    seen: list[tuple[str, str]] = []

    def approve(stage: Stage, action: PendingAction) -> Approve:
        seen.append((stage.name, action.name))
        return Approve()

    model = calling("mcp__search__publish", {"q": "post"})
    events = collect(run_pipeline(ws, model=model, tools=[publish], on_approval=approve))
    assert seen == [("01_research", "mcp__search__publish")]
    assert published == ["post"] and isinstance(events[-1], StageFinished)

    async def reject(stage: Stage, action: PendingAction) -> Reject:
        return Reject("not today")

    events = collect(run_pipeline(ws, model=model, tools=[publish], on_approval=reject))
    assert published == ["post"] and isinstance(events[-1], StageFinished)
    (refused,) = tool_results(events)
    assert refused.is_error and "not today" in refused.content

    events = collect(run_pipeline(ws, model=model, tools=[publish]))
    assert isinstance(events[-1], PipelineHalted)
    assert "needs approval for mcp__search__publish" in events[-1].reason
    assert published == ["post"]


def test_per_stage_turn_limits(blog: Path) -> None:
    ws = load_workspace(blog)
    events = collect(run_pipeline(ws, model=scripted_pipeline_model(), max_turns={"02_draft": 1}))
    assert [e.stage for e in events if isinstance(e, StageFinished)] == ["01_research"]
    assert isinstance(events[-1], PipelineHalted)
    assert events[-1].stage == "02_draft" and "max_turns" in events[-1].reason
    with pytest.raises(PipelineError, match="names no stage 7"):
        collect(run_pipeline(ws, model=scripted_pipeline_model(), max_turns={7: 1}))
    with pytest.raises(PipelineError, match="must be a positive number"):
        collect(run_pipeline(ws, model=scripted_pipeline_model(), max_turns=0))


# -- query ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_query_yields_events_then_a_result() -> None:
    model = ScriptedModel(["Hello there."])
    items = [item async for item in query("hi", model=model, instructions="Be brief.")]
    result = items[-1]
    assert isinstance(result, QueryResult) and result.type == "result"
    assert result.text == "Hello there." and result.stop_reason == "end_turn"
    assert result.turns == 1 and not result.is_error
    assert all(not isinstance(i, QueryResult) for i in items[:-1])
    assert [i.type for i in items[:-1]][-1] == "turn_complete"


@pytest.mark.anyio
async def test_query_surfaces_an_approval_and_continues() -> None:
    done: list[str] = []

    @tool(permission="confirm")
    def pay(to: str) -> str:
        """Pay someone."""
        done.append(to)
        return "paid"

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str | ScriptedResponse:
        if any(m.role == "tool" for m in messages):
            return "Paid Alice."
        return ScriptedResponse(tool_calls=[ScriptedCall("pay", {"to": "alice"})])

    asked: list[str] = []

    def approve(action: PendingAction) -> Approve:
        asked.append(action.name)
        return Approve()

    items = [
        i async for i in query("pay", model=ScriptedModel(script), tools=[pay], on_approval=approve)
    ]
    result = items[-1]
    assert isinstance(result, QueryResult)
    assert asked == ["pay"] and done == ["alice"]
    assert result.stop_reason == "end_turn" and result.pending is None and result.turns == 2

    items = [i async for i in query("pay", model=ScriptedModel(script), tools=[pay])]
    paused = items[-1]
    assert isinstance(paused, QueryResult)
    assert paused.stop_reason == "pending_action" and paused.pending is not None
    assert done == ["alice"]


@pytest.mark.anyio
async def test_query_limits_turns_and_denies() -> None:
    @tool(read_only=True)
    def look() -> str:
        """Look around."""
        return "nothing"

    def forever(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ScriptedResponse:
        return ScriptedResponse(tool_calls=[ScriptedCall("look", {})])

    items = [i async for i in query("go", model=ScriptedModel(forever), tools=[look], max_turns=2)]
    result = items[-1]
    assert isinstance(result, QueryResult) and result.stop_reason == "max_turns"
    assert result.turns == 2

    items = [
        i
        async for i in query(
            "go", model=ScriptedModel(forever), tools=[look], deny=["look"], max_turns=1
        )
    ]
    denied = [i for i in items if isinstance(i, ToolResult)]
    assert denied and denied[0].is_error


# -- the CLI asks at the terminal --------------------------------------------------------


@pytest.mark.parametrize(("answer", "ran"), [(True, ["post"]), (False, [])])
def test_the_cli_asks_at_the_terminal_for_an_approval_inside_a_stage(
    blog: Path, monkeypatch: pytest.MonkeyPatch, answer: bool, ran: list[str]
) -> None:
    from rich.console import Console

    from mainspring.cli import commands as cli
    from mainspring.pipelines import PipelineRunner

    published: list[str] = []

    @tool(name="mcp__search__publish", permission="confirm")
    def publish(q: str) -> str:
        """Publish a post."""
        published.append(q)
        return "published"

    asked: list[str] = []
    monkeypatch.setattr(cli, "_interactive", lambda: True)

    def confirm(question: str, console: Console, *, default: bool) -> bool:
        asked.append(question)
        return answer

    monkeypatch.setattr(cli, "_confirm", confirm)
    console = Console(record=True, width=100)
    runner = PipelineRunner(
        load_workspace(single_stage(blog)),
        model=calling("mcp__search__publish", {"q": "post"}),
        tools=[publish],
        on_approval=cli._pipeline_approval(console, yes=False),
    )
    code = anyio.run(lambda: cli._run_pipeline(runner, console, stage=None, resume=False))
    assert code == 0 and asked == ["Approve?"] and published == ran
    shown = console.export_text()
    assert "stage 01_research asks for approval" in shown and "mcp__search__publish" in shown


def test_the_cli_without_a_terminal_halts_the_stage_instead_of_approving(
    blog: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    from mainspring.cli import commands as cli
    from mainspring.pipelines import PipelineRunner

    @tool(name="mcp__search__publish", permission="confirm")
    def publish(q: str) -> str:
        """Publish a post."""
        raise AssertionError("never runs")

    monkeypatch.setattr(cli, "_interactive", lambda: False)
    console = Console(record=True, width=100)
    runner = PipelineRunner(
        load_workspace(single_stage(blog)),
        model=calling("mcp__search__publish", {"q": "post"}),
        tools=[publish],
        on_approval=cli._pipeline_approval(console, yes=False),
    )
    code = anyio.run(lambda: cli._run_pipeline(runner, console, stage=None, resume=False))
    assert code == 1
    shown = console.export_text()
    assert "pass --yes" in shown and "halted at 01_research" in shown
