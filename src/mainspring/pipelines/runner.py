"""Runner: each stage of a workspace as one agent run, in numeric order.

```python
runner = PipelineRunner(load_workspace("examples/blog-pipeline"), model=model)
async for event in runner.run():
    if isinstance(event, StageEvent):
        ...  # the engine's own events, tagged with the stage
```

A stage's system prompt holds layers 0-2 and only the layer-3 and layer-4
files its contract names. Its tools are limited to its ``## Tools`` list
(plus ``write_artifact``, which writes into its ``output/``); a call to
anything else gets the engine's "unknown tool" error result, never an
execution. When the run ends, the final assistant text becomes the first
artifact unless ``write_artifact`` wrote it. Between stages a review gate
decides whether to go on.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from mainspring.agent import Agent
from mainspring.events import ErrorEvent, Event, PendingAction, TurnComplete
from mainspring.models.base import Model
from mainspring.pipelines.workspace import PipelineError, Stage, Workspace, read_text
from mainspring.session import Session
from mainspring.tools.define import Tool, tool

__all__ = [
    "ContextLoaded",
    "Gate",
    "PipelineEvent",
    "PipelineHalted",
    "PipelineRunner",
    "StageEvent",
    "StageFinished",
    "stage_task",
]

Gate: TypeAlias = Callable[[Stage], "bool | Awaitable[bool]"]
"""Called after each stage but the last; returning ``False`` halts the pipeline."""


@dataclass(frozen=True, slots=True)
class StageEvent:
    """An engine event from one stage's run."""

    stage: str
    event: Event


@dataclass(frozen=True, slots=True)
class ContextLoaded:
    """A stage's context was built from these files (about ``token_estimate`` tokens)."""

    stage: str
    files: tuple[str, ...]
    token_estimate: int


@dataclass(frozen=True, slots=True)
class StageFinished:
    """A stage wrote all its artifacts."""

    stage: str
    artifacts: tuple[Path, ...]


@dataclass(frozen=True, slots=True)
class PipelineHalted:
    """The pipeline stopped before ``stage`` finished or after its gate said no."""

    stage: str
    reason: str


PipelineEvent: TypeAlias = StageEvent | ContextLoaded | StageFinished | PipelineHalted


def stage_task(stage: Stage) -> str:
    """The user message that starts a stage's run."""
    names = ", ".join(o.name for o in stage.outputs)
    return f"Run stage {stage.name}. Follow its Process and produce: {names}."


def _estimate(chars: int) -> int:
    return (chars + 3) // 4


def _artifact_tool(stage: Stage, written: set[str]) -> Tool:
    names = {o.name for o in stage.outputs}

    @tool(name="write_artifact")
    def write_artifact(name: str, content: str) -> str:
        """Write one of this stage's output artifacts.

        Args:
            name: The artifact's file name, as listed under Outputs.
            content: The full text of the artifact.
        """
        if name not in names:
            raise ValueError(f"{name!r} is not an output of this stage; outputs: {sorted(names)}")
        stage.output_dir.mkdir(parents=True, exist_ok=True)
        (stage.output_dir / name).write_text(content, encoding="utf-8")
        written.add(name)
        return f"wrote output/{name} ({len(content)} chars)"

    return write_artifact


class PipelineRunner:
    """Runs a workspace's stages through the engine; see the module docstring."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        model: Model,
        tools: Sequence[Tool] = (),
        gate: Gate | None = None,
        context_budget: int | None = None,
    ) -> None:
        """Prepare a runner.

        Args:
            workspace: The loaded workspace.
            model: The model every stage runs on.
            tools: Tools a stage may be given; each stage's ``## Tools`` picks among them.
            gate: Review between stages; ``None`` always goes on.
            context_budget: Most tokens (characters / 4) a stage's system prompt may hold.
        """
        if context_budget is not None and context_budget < 1:
            raise PipelineError("context_budget must be at least 1", path=workspace.root)
        self.workspace = workspace
        self.model = model
        self.tools = tuple(tools)
        self.gate = gate
        self.context_budget = context_budget

    def context(self, stage: Stage) -> tuple[str, tuple[str, ...]]:
        """The stage's system prompt and the files it was built from."""
        ws = self.workspace
        files = ["AGENT.md", "CONTEXT.md", f"stages/{stage.name}/CONTEXT.md"]
        parts = [
            f"# Layer 0: AGENT.md\n\n{ws.agent_md.strip()}",
            f"# Layer 1: CONTEXT.md\n\n{ws.context_md.strip()}",
            f"# Layer 2: stage {stage.name}\n\n{read_text(stage.contract).strip()}",
        ]
        for ref in stage.inputs:
            path = ws.root / ref.path
            if not path.is_file():
                raise PipelineError(
                    f"input file {ref.path!r} does not exist (run the stage that writes it first)",
                    path=stage.contract,
                    line=ref.line,
                )
            note = f" ({ref.note})" if ref.note else ""
            body = read_text(path).strip()
            parts.append(f"# Layer {ref.layer}: {ref.path}{note}\n\n{body}")
            files.append(ref.path)
        prompt = "\n\n".join(parts)
        tokens = _estimate(len(prompt))
        if self.context_budget is not None and tokens > self.context_budget:
            raise PipelineError(
                f"stage {stage.name} context is ~{tokens} tokens ({len(prompt)} chars), "
                f"over its budget of {self.context_budget}; files: {', '.join(files)}",
                path=stage.contract,
            )
        return prompt, tuple(files)

    def is_stale(self, stage: Stage) -> bool:
        """Whether an output is missing or older than one of the stage's inputs."""
        outputs = stage.artifact_paths()
        if not all(p.is_file() for p in outputs):
            return True
        oldest = min(p.stat().st_mtime for p in outputs)
        inputs = [self.workspace.root / ref.path for ref in stage.inputs]
        return any(p.is_file() and p.stat().st_mtime > oldest for p in inputs)

    def first_stale(self) -> Stage | None:
        """The first stage a resume must start from (``None`` when all are done)."""
        return next((s for s in self.workspace.stages if self.is_stale(s)), None)

    async def run(self, *, start: int | None = None) -> AsyncIterator[PipelineEvent]:
        """Run the stages in order, from stage ``start`` (default: the first)."""
        for stage in self.workspace.stages:
            if start is not None and stage.number < start:
                continue
            async for event in self.run_stage(stage):
                yield event
                if isinstance(event, PipelineHalted):
                    return
            if stage is self.workspace.stages[-1] or self.gate is None:
                continue
            verdict = self.gate(stage)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if not verdict:
                yield PipelineHalted(stage.name, "the review gate halted the pipeline")
                return

    async def resume(self) -> AsyncIterator[PipelineEvent]:
        """Run from the first stage whose outputs are missing or older than its inputs."""
        stage = self.first_stale()
        if stage is None:
            return
        async for event in self.run(start=stage.number):
            yield event

    async def run_stage(self, stage: Stage) -> AsyncIterator[PipelineEvent]:
        """Run one stage alone (its inputs must already exist)."""
        prompt, files = self.context(stage)
        yield ContextLoaded(stage.name, files, _estimate(len(prompt)))
        written: set[str] = set()
        writer = _artifact_tool(stage, written)
        agent = Agent(
            model=self.model,
            name=stage.name,
            instructions=prompt,
            tools=[writer, *self.tools],
            allowed_tools=["write_artifact", *stage.tools],
        )
        session = Session(agent)
        problem: str | None = None
        async for event in session.send(stage_task(stage)):
            yield StageEvent(stage.name, event)
            if isinstance(event, ErrorEvent):
                problem = f"stage failed ({event.code}): {event.message}"
            elif isinstance(event, PendingAction):
                problem = f"stage needs approval for {event.name}, which pipelines cannot give"
            elif isinstance(event, TurnComplete) and event.stop_reason not in (
                "end_turn",
                "pending_action",
            ):
                problem = f"stage stopped early ({event.stop_reason})"
        if problem is not None:
            yield PipelineHalted(stage.name, problem)
            return
        first = stage.outputs[0].name
        if first not in written:
            final = next((m.text for m in reversed(session.messages) if m.role == "assistant"), "")
            if final.strip():
                stage.output_dir.mkdir(parents=True, exist_ok=True)
                (stage.output_dir / first).write_text(final.strip() + "\n", encoding="utf-8")
                written.add(first)
        missing = [o.name for o in stage.outputs if o.name not in written]
        if missing:
            yield PipelineHalted(
                stage.name,
                f"{stage.contract}:{stage.outputs_line}: stage did not write {', '.join(missing)}",
            )
            return
        yield StageFinished(stage.name, stage.artifact_paths())
