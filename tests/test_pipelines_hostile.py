"""Hostile workspaces: symlinks out, symlinks planted after load, caps, bad bytes, odd names.

Every file a pipeline touches is opened through the workspace's directory
handle without following symlinks, so a planted link is refused, never read
or written through; every refusal is a PipelineError naming file and line.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mainspring.events import ToolResult
from mainspring.models.base import ModelEvent, ModelRequest
from mainspring.pipelines import (
    PipelineError,
    PipelineEvent,
    PipelineHalted,
    PipelineRunner,
    StageEvent,
    load_workspace,
    scripted_pipeline_model,
)
from tests.strategies import depths

EXAMPLE = Path(__file__).parents[1] / "examples" / "blog-pipeline"
SECRET = "TOP-SECRET-OUTSIDE-THE-WORKSPACE"


class Recording:
    """The scripted pipeline model, keeping every request it was sent."""

    def __init__(self) -> None:
        self.inner = scripted_pipeline_model()
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        return self.inner.stream(request)

    def saw(self, text: str) -> bool:
        return any(
            text in r.system_text or any(text in m.text for m in r.messages) for r in self.requests
        )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "blog"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("output"))
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside" / "secret.md"
    secret.parent.mkdir()
    secret.write_text(f"# Secret\n\n{SECRET}\n")
    return secret


def collect(events: AsyncIterator[PipelineEvent]) -> list[PipelineEvent]:
    out: list[PipelineEvent] = []

    async def main() -> None:
        out.extend([event async for event in events])

    anyio.run(main)
    return out


def symlink_over(path: Path, target: Path) -> None:
    path.unlink()
    path.symlink_to(target)


# -- at load ---------------------------------------------------------------------------


@pytest.mark.parametrize("rel", ["AGENT.md", "CONTEXT.md", "stages/02_draft/CONTEXT.md"])
def test_a_layer_file_that_is_a_symlink_out_is_refused(ws: Path, outside: Path, rel: str) -> None:
    symlink_over(ws / rel, outside)
    with pytest.raises(PipelineError, match="symbolic link") as info:
        load_workspace(ws)
    assert info.value.path == ws / rel
    assert SECRET not in str(info.value)


def test_a_stage_folder_or_stages_itself_as_a_symlink_is_refused(ws: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.move(ws / "stages" / "03_polish", elsewhere)
    (ws / "stages" / "03_polish").symlink_to(elsewhere)
    with pytest.raises(PipelineError, match="is a symlink") as info:
        load_workspace(ws)
    assert info.value.path == ws / "stages" / "03_polish"

    (ws / "stages" / "03_polish").unlink()
    shutil.move(ws / "stages", tmp_path / "stages")
    (ws / "stages").symlink_to(tmp_path / "stages")
    with pytest.raises(PipelineError, match="symbolic link"):
        load_workspace(ws)


def test_a_reference_input_that_is_a_symlink_is_refused_at_its_line(
    ws: Path, outside: Path
) -> None:
    symlink_over(ws / "_config" / "voice.md", outside)
    with pytest.raises(PipelineError, match="symbolic link") as info:
        load_workspace(ws)
    assert info.value.path == ws / "stages" / "02_draft" / "CONTEXT.md"
    assert info.value.line == 6


def test_a_hard_link_to_an_outside_file_is_refused(ws: Path, outside: Path) -> None:
    (ws / "_config" / "voice.md").unlink()
    os.link(outside, ws / "_config" / "voice.md")
    with pytest.raises(PipelineError, match="hard links"):
        load_workspace(ws)


def test_a_fifo_input_is_refused_without_blocking(ws: Path) -> None:
    (ws / "_config" / "voice.md").unlink()
    os.mkfifo(ws / "_config" / "voice.md")
    with pytest.raises(PipelineError, match="FIFO"):
        load_workspace(ws)


# -- planted after load ------------------------------------------------------------


def test_an_input_swapped_for_a_symlink_after_load_is_never_read(ws: Path, outside: Path) -> None:
    model = Recording()
    runner = PipelineRunner(load_workspace(ws), model=model)
    symlink_over(ws / "_config" / "voice.md", outside)  # after the checks at load
    with pytest.raises(PipelineError, match=r"refused.*symbolic link") as info:
        collect(runner.run())
    assert info.value.path == ws / "stages" / "02_draft" / "CONTEXT.md"
    assert info.value.line == 6
    assert not model.saw(SECRET)
    assert (ws / "stages" / "01_research" / "output" / "notes.md").is_file()  # stage 01 ran


def test_a_layer_swapped_after_load_is_never_read(ws: Path, outside: Path) -> None:
    model = Recording()
    runner = PipelineRunner(load_workspace(ws), model=model)
    symlink_over(ws / "AGENT.md", outside)
    with pytest.raises(PipelineError, match="symbolic link"):
        collect(runner.run())
    assert model.requests == [] and not model.saw(SECRET)


def test_an_output_folder_planted_as_a_symlink_is_never_written_through(
    ws: Path, tmp_path: Path
) -> None:
    target = tmp_path / "victim"
    target.mkdir()
    runner = PipelineRunner(load_workspace(ws), model=scripted_pipeline_model())
    (ws / "stages" / "01_research" / "output").symlink_to(target)
    events = collect(runner.run())
    results = [
        e.event for e in events if isinstance(e, StageEvent) and isinstance(e.event, ToolResult)
    ]
    assert results and results[0].is_error and "symbolic link" in results[0].content
    assert isinstance(events[-1], PipelineHalted) and events[-1].stage == "01_research"
    assert list(target.iterdir()) == []


def test_an_artifact_planted_as_a_symlink_is_never_written_through(ws: Path, outside: Path) -> None:
    runner = PipelineRunner(load_workspace(ws), model=scripted_pipeline_model())
    output = ws / "stages" / "01_research" / "output"
    output.mkdir()
    (output / "notes.md").symlink_to(outside)
    events = collect(runner.run())
    assert isinstance(events[-1], PipelineHalted)
    assert outside.read_text() == f"# Secret\n\n{SECRET}\n"
    assert (output / "notes.md").is_symlink()


def test_a_working_input_planted_as_a_symlink_is_refused(ws: Path, outside: Path) -> None:
    runner = PipelineRunner(load_workspace(ws), model=Recording())
    collect(runner.run_stage(runner.workspace.stage(1)))
    symlink_over(ws / "stages" / "01_research" / "output" / "notes.md", outside)
    with pytest.raises(PipelineError, match="symbolic link") as info:
        collect(runner.run_stage(runner.workspace.stage(2)))
    assert info.value.line == 5
    assert runner.is_stale(runner.workspace.stage(2))  # a refused input is never "fresh"


# -- caps and bytes ----------------------------------------------------------------------


def test_inputs_have_a_size_cap(ws: Path) -> None:
    (ws / "_config" / "voice.md").write_text("x" * 5000)
    with pytest.raises(PipelineError, match="over the 4096-byte limit") as info:
        load_workspace(ws, max_input_bytes=4096)
    assert info.value.line == 6
    workspace = load_workspace(ws)  # the default cap is larger
    runner = PipelineRunner(workspace, model=scripted_pipeline_model())
    collect(runner.run_stage(workspace.stage(1)))
    notes = ws / "stages" / "01_research" / "output" / "notes.md"
    notes.write_text("y" * 5000)
    capped = PipelineRunner(
        load_workspace(ws, max_input_bytes=4096 * 2), model=scripted_pipeline_model()
    )
    (ws / "_config" / "voice.md").write_text("short")
    notes.write_text("y" * 9000)
    with pytest.raises(PipelineError, match="over the 8192-byte limit") as info:
        collect(capped.run_stage(capped.workspace.stage(2)))
    assert info.value.line == 5
    with pytest.raises(PipelineError, match="at least 1"):
        load_workspace(ws, max_input_bytes=0)


@pytest.mark.parametrize("rel", ["AGENT.md", "CONTEXT.md", "stages/02_draft/CONTEXT.md"])
def test_non_utf8_layers_name_the_file_and_line(ws: Path, rel: str) -> None:
    (ws / rel).write_bytes(b"# Title\n\nfine line\nbad \xff byte\n")
    with pytest.raises(PipelineError, match="not UTF-8") as info:
        load_workspace(ws)
    assert info.value.path == ws / rel and info.value.line == 4
    assert f"{ws / rel}:4" in str(info.value)


def test_a_non_utf8_input_names_its_file_and_line_and_the_contract(ws: Path) -> None:
    runner = PipelineRunner(load_workspace(ws), model=scripted_pipeline_model())
    collect(runner.run_stage(runner.workspace.stage(1)))
    notes = ws / "stages" / "01_research" / "output" / "notes.md"
    notes.write_bytes(b"ok\n\xc3\x28\n")
    with pytest.raises(PipelineError, match="not UTF-8") as info:
        collect(runner.run_stage(runner.workspace.stage(2)))
    assert info.value.path == notes and info.value.line == 2
    assert "stages/02_draft/CONTEXT.md:5" in str(info.value)


# -- odd folder names ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["1 research", "01-research", "01_", "notes", "01_r\u00e9sum\u00e9", "04_line\nbreak"]
)
def test_odd_stage_folder_names_are_clear_errors(ws: Path, name: str) -> None:
    shutil.copytree(ws / "stages" / "03_polish", ws / "stages" / name)
    with pytest.raises(PipelineError, match="is not named NN_verb") as info:
        load_workspace(ws)
    assert info.value.path == ws / "stages" / name
    assert repr(name) in str(info.value)


def test_hidden_and_underscore_folders_are_not_stages(ws: Path) -> None:
    (ws / "stages" / ".cache").mkdir()
    (ws / "stages" / "_shared").mkdir()
    (ws / "stages" / "README.md").write_text("notes")
    assert [s.name for s in load_workspace(ws).stages] == ["01_research", "02_draft", "03_polish"]


def test_a_non_utf8_folder_name_is_a_clear_error(ws: Path) -> None:
    os.mkdir(os.fsencode(ws / "stages") + b"/05_\xff")
    with pytest.raises(PipelineError, match="is not named NN_verb"):
        load_workspace(ws)


# -- linear parsing -----------------------------------------------------------------------


def test_a_large_contract_parses_with_every_line_right(ws: Path) -> None:
    n = 20_000
    contract = ws / "stages" / "01_research" / "CONTEXT.md"
    items = "\n".join(f"- out{i}.md -> output/ \u2014 artifact {i}" for i in range(n))
    items = f"- notes.md -> output/\n{items}"
    contract.write_text(
        "# Big\n\n## Inputs\n\n- `references/topic.md`\n\n## Process\n\nMany.\n\n"
        f"## Outputs\n\n{items}\n"
    )
    stage = load_workspace(ws).stage(1)
    assert len(stage.outputs) == n + 1
    assert (
        stage.outputs[-1].name == f"out{n - 1}.md" and stage.outputs[-1].note == f"artifact {n - 1}"
    )
    assert stage.outputs[-1].line == 13 + n


def test_the_item_scan_is_one_pass(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The items of a section are found in one walk over its tokens: count the visits."""
    from markdown_it.token import Token

    from mainspring.pipelines import workspace as module

    visits = 0
    original = module._items

    def counting(tokens: list[Token]) -> list[tuple[str, int]]:
        nonlocal visits

        class Counted(list[Token]):
            def __iter__(self) -> Iterator[Token]:
                nonlocal visits
                for tok in list.__iter__(self):
                    visits += 1
                    yield tok

        return original(Counted(tokens))

    monkeypatch.setattr(module, "_items", counting)
    sizes = {}
    for n in (500, 1000, 2000):
        visits = 0
        items = "\n".join(f"- {i}.md -> output/" for i in ["notes", *range(n)])
        (ws / "stages" / "01_research" / "CONTEXT.md").write_text(
            f"# S\n\n## Inputs\n\n## Process\n\nx\n\n## Outputs\n\n{items}\n"
        )
        load_workspace(ws)
        sizes[n] = visits
    assert sizes[2000] - sizes[1000] == 2 * (sizes[1000] - sizes[500])


# -- fuzzed contracts ------------------------------------------------------------------------

_PIECES = st.sampled_from(
    [
        "## Inputs",
        "## Process",
        "## Outputs",
        "## Tools",
        "- Layer 3 (reference): ../../_config/voice.md",
        "- Layer 4 (working): ../01_research/output/notes.md \u2014 note",
        "- Layer 4 (working): ../01_research/output/",
        "- Layer 9 (x): ../../../../etc/passwd",
        "- `references/topic.md` (topic)",
        "- notes.md -> output/",
        "- draft.md -> elsewhere/",
        "- mcp__search__*",
        "- `",
        "```",
        "    indented code",
        "> quote",
        "* [link](x)",
        "",
    ]
)
_LINE = st.one_of(_PIECES, st.text(max_size=40), _PIECES.map(lambda p: p + " \u00e9\u2014(x"))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(_LINE, max_size=30))
def test_any_contract_loads_or_fails_with_a_pipeline_error_naming_a_real_line(
    ws: Path, lines: list[str]
) -> None:
    contract = ws / "stages" / "01_research" / "CONTEXT.md"
    text = "\n".join(lines)
    contract.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        workspace = load_workspace(ws)
    except PipelineError as exc:
        if exc.path == contract and exc.line is not None:
            assert 1 <= exc.line <= text.count("\n") + 1
        return
    stage = workspace.stage(1)
    assert stage.outputs  # a loaded contract always names an artifact
    for ref in stage.inputs:
        assert not ref.path.startswith(("/", "..")) and ref.layer in (3, 4)


# -- growth: contracts near the 1 MiB cap parse in time linear in their size -----------------


def contract_workspace(root: Path, shape: str, size: int) -> Path:
    """The example workspace with stage contracts grown to about ``size`` bytes of ``shape``."""
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("output"))
    first = root / "stages" / "01_research" / "CONTEXT.md"
    second = root / "stages" / "02_draft" / "CONTEXT.md"

    def grow(path: Path, marker: str, line: str, share: float = 1.0) -> None:
        text = path.read_text()
        count = int(size * share / len(line.encode()))
        path.write_text(text.replace(marker, marker + line * count, 1))

    if shape == "headings":
        grow(first, "## Process\n", "## h\n### h\nh\n=\n")
    elif shape == "outputs":
        text = first.read_text()
        items = "".join(f"- o{i}.md -> output/ - n\n" for i in range(size // 32))
        first.write_text(text.replace("## Outputs\n", "## Outputs\n" + items, 1))
    elif shape == "reference-inputs":
        grow(second, "## Inputs\n", "- `_config/voice.md` - again\n")
    elif shape == "folder-inputs":
        text = first.read_text()
        items = "".join(f"- o{i}.md\n" for i in range(size // 20))
        first.write_text(text.replace("## Outputs\n", "## Outputs\n" + items, 1))
        grow(second, "## Inputs\n", "- `stages/01_research/output/`\n", share=0.5)
    elif shape == "process-text":
        grow(first, "## Process\n", "Do *this*, then `that` [x](y).\n\n")
    else:  # pragma: no cover
        raise AssertionError(shape)
    return root


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape",
    [
        "headings",
        "outputs",
        "reference-inputs",
        "folder-inputs",
        "process-text",
    ],
)
def test_contract_loading_grows_linearly_up_to_the_cap(tmp_path: Path, shape: str) -> None:
    from tests.growth import assert_linear

    def make(size: int) -> Path:
        return contract_workspace(tmp_path / f"{shape}-{size}", shape, size)

    assert_linear(load_workspace, make, rounds=1)  # (a large load takes seconds: one is enough)


@pytest.mark.slow
@depths(quick=1, nightly=10)  # the named shapes above run always; random ones are depth
def test_any_repeated_contract_shape_loads_in_linear_time(tmp_path: Path, examples: int) -> None:
    from tests.growth import assert_linear

    made: list[Path] = []

    def make_for(unit: str) -> Callable[[int], Path]:
        def make(size: int) -> Path:
            root = tmp_path / f"unit-{len(made)}"
            made.append(root)
            shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("output"))
            contract = root / "stages" / "01_research" / "CONTEXT.md"
            contract.write_text(contract.read_text() + "\n" + unit * max(1, size // len(unit)))
            return root

        return make

    def load(root: Path) -> None:
        try:
            load_workspace(root)
        except PipelineError:
            pass

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(unit=st.lists(_PIECES, min_size=1, max_size=4).map(lambda ls: "\n".join(ls) + "\n"))
    def check(unit: str) -> None:
        try:
            assert_linear(load, make_for(unit), rounds=1)
        finally:
            for root in made:
                shutil.rmtree(root, ignore_errors=True)

    check()
