"""Runner: each stage of a workspace as one agent run, in numeric order.

```python
runner = PipelineRunner(load_workspace("examples/blog-pipeline"), model=model)
async for event in runner.run():
    if isinstance(event, StageEvent):
        ...  # the engine's own events, tagged with the stage
```

A stage's system prompt holds layers 0-2 and only the layer-3 and layer-4
files its contract names, read through the workspace's directory handle
(a symlink planted since loading is refused, a file over the cap too). Its
tools are limited to its ``## Tools`` list (plus ``write_artifact``, which
writes into its ``output/``); a call to anything else gets the engine's
"unknown tool" error result, never an execution. Pipeline-wide permission
overlays (``deny`` patterns and a ``can_use_tool`` callback) apply to every
stage. A write that asks for approval is handed to ``on_approval``; its
decision resumes the stage (no handler, or ``None``, halts it). When the run
ends, the final assistant text becomes the first artifact unless
``write_artifact`` wrote it. After every stage, the last included, a review
gate given the stage's outputs (:class:`StageArtifact`: name, path, text)
decides whether to go on; each finished stage records what it was made from, so
:meth:`PipelineRunner.resume` restarts at the first stage whose contract,
``AGENT.md``, ``CONTEXT.md`` or inputs changed since.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import TypeAlias, TypeVar

import anyio.to_thread

from mainspring.agent import Agent, Limits
from mainspring.decisions import Decision
from mainspring.events import ErrorEvent, PendingAction, TurnComplete
from mainspring.models.base import Model
from mainspring.permissions import CanUseTool, PermissionRules
from mainspring.pipelines.events import (
    ContextLoaded,
    PipelineEvent,
    PipelineHalted,
    StageEvent,
    StageFinished,
    StageOutput,
    StageStart,
)
from mainspring.pipelines.manifest import is_stale, write_manifest
from mainspring.pipelines.workspace import InputRef, PipelineError, PipelineWorkspace, Stage
from mainspring.session import Session
from mainspring.tools.define import Tool, tool

__all__ = [
    "ApprovalHandler",
    "Gate",
    "PipelineRunner",
    "StageArtifact",
    "run_pipeline",
    "stage_task",
]


@dataclass(frozen=True, slots=True)
class StageArtifact:
    """One output a stage wrote, as the review gate sees it."""

    artifact: str
    """Its name, as the contract's Outputs list it (``draft.md``)."""
    path: str
    """Where it is, relative to the workspace (``stages/02_draft/output/draft.md``)."""
    text: str
    """What it holds (read after the stage, through the workspace's handle)."""


Gate: TypeAlias = Callable[..., "bool | Awaitable[bool]"]
"""The review gate: ``gate(stage, outputs)`` after every stage, the last included,
``outputs`` the :class:`StageArtifact` s it wrote; ``False`` halts the pipeline
(``pipeline_halted``; a later resume goes on after that stage). A gate of one
parameter is called with the stage alone, as before."""

ApprovalHandler: TypeAlias = Callable[
    [Stage, PendingAction], "Decision | Awaitable[Decision | None] | None"
]
"""Decides a write a stage paused on; ``None`` halts the stage."""

TurnLimits: TypeAlias = "int | Mapping[int | str, int] | None"


def stage_task(stage: Stage) -> str:
    """The user message that starts a stage's run."""
    names = ", ".join(o.name for o in stage.outputs)
    return f"Run stage {stage.name}. Follow its Process and produce: {names}."


def _bare(exc: PipelineError) -> str:
    prefix = f"{exc.path}:{exc.line}: " if exc.line is not None else f"{exc.path}: "
    return str(exc).removeprefix(prefix)


def _estimate(chars: int) -> int:
    return (chars + 3) // 4


T = TypeVar("T")


def _takes_outputs(gate: Gate) -> bool:
    """Whether ``gate`` takes the outputs beside the stage (else the stage alone)."""
    try:
        parameters = inspect.signature(gate).parameters.values()
    except (TypeError, ValueError):  # no signature to read: the documented form
        return True
    kinds = [p.kind for p in parameters]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return inspect.Parameter.VAR_POSITIONAL in kinds or sum(k in positional for k in kinds) >= 2


async def _maybe_await(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


class _Artifacts:
    """The stage's ``write_artifact`` tool and what it wrote (reported as events)."""

    def __init__(self, workspace: PipelineWorkspace, stage: Stage) -> None:
        self.workspace = workspace
        self.stage = stage
        self.names = {o.name for o in stage.outputs}
        self.written: dict[str, int] = {}
        self.reported: set[str] = set()

    def write(self, name: str, content: str) -> None:
        self.workspace.files.write_text(self.stage.artifact_rel(name), content)
        self.written[name] = len(content)

    def tool(self) -> Tool:
        artifacts = self

        @tool(name="write_artifact")
        def write_artifact(name: str, content: str) -> str:
            """Write one of this stage's output artifacts.

            Args:
                name: The artifact's file name, as listed under Outputs.
                content: The full text of the artifact.
            """
            if name not in artifacts.names:
                raise ValueError(
                    f"{name!r} is not an output of this stage; outputs: {sorted(artifacts.names)}"
                )
            artifacts.write(name, content)
            return f"wrote output/{name} ({len(content)} chars)"

        return write_artifact

    def news(self) -> list[StageOutput]:
        fresh = [n for n in self.written if n not in self.reported]
        self.reported.update(fresh)
        return [
            StageOutput(self.stage.name, n, self.stage.artifact_rel(n), self.written[n])
            for n in fresh
        ]


class PipelineRunner:
    """Runs a workspace's stages through the engine; see the module docstring."""

    def __init__(
        self,
        workspace: PipelineWorkspace,
        *,
        model: Model,
        tools: Sequence[Tool] = (),
        gate: Gate | None = None,
        context_budget: int | None = None,
        max_turns: TurnLimits = None,
        deny: Sequence[str] = (),
        can_use_tool: CanUseTool | None = None,
        on_approval: ApprovalHandler | None = None,
    ) -> None:
        """Prepare a runner.

        Args:
            workspace: The loaded workspace.
            model: The model every stage runs on.
            tools: Tools a stage may be given; each stage's ``## Tools`` picks among them.
            gate: The review after every stage (see :data:`Gate`); ``None`` always goes on.
            context_budget: Most tokens (characters / 4) a stage's system prompt may hold.
            max_turns: Model calls a stage may make: one number for every
                stage, or a mapping from stage number or folder name.
            deny: Tool-name patterns denied in every stage.
            can_use_tool: A permission callback consulted in every stage.
            on_approval: Decides writes a stage pauses on (the CLI asks at the terminal).
        """
        if context_budget is not None and context_budget < 1:
            raise PipelineError("context_budget must be at least 1", path=workspace.root)
        self.workspace = workspace
        self.model = model
        self.tools = tuple(tools)
        self.gate = gate
        self.context_budget = context_budget
        self.permissions = PermissionRules(deny=tuple(deny), can_use_tool=can_use_tool)
        self.on_approval = on_approval
        self._turns = self._check_turns(max_turns)

    def _check_turns(self, max_turns: TurnLimits) -> dict[int, int]:
        stages = self.workspace.stages
        if max_turns is None:
            return {}
        given = {s.number: max_turns for s in stages} if isinstance(max_turns, int) else max_turns
        out: dict[int, int] = {}
        for key, value in given.items():
            match = [s for s in stages if key in (s.number, s.name)]
            if not match:
                raise PipelineError(f"max_turns names no stage {key!r}", path=self.workspace.root)
            if isinstance(value, bool) or value < 1:
                raise PipelineError(
                    f"max_turns for {key!r} must be a positive number", path=self.workspace.root
                )
            out[match[0].number] = value
        return out

    def max_turns(self, stage: Stage) -> int | None:
        """The model calls ``stage`` may make (``None``: the engine's default)."""
        return self._turns.get(stage.number)

    def context(self, stage: Stage) -> tuple[str, tuple[str, ...]]:
        """The stage's system prompt and the files it was built from.

        Every file is read again, through the workspace's handle, at this moment.
        """
        ws = self.workspace
        files = ["AGENT.md", "CONTEXT.md", stage.contract_rel]
        parts = [
            f"# Layer {n}: {rel}\n\n{ws.files.read_text(rel).strip()}"
            for n, rel in ((0, "AGENT.md"), (1, "CONTEXT.md"))
        ]
        parts.append(
            f"# Layer 2: stage {stage.name}\n\n{ws.files.read_text(stage.contract_rel).strip()}"
        )
        for ref in stage.inputs:
            data = self._input(stage, ref)
            note = f" ({ref.note})" if ref.note else ""
            parts.append(f"# Layer {ref.layer}: {ref.path}{note}\n\n{data.strip()}")
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

    def _input(self, stage: Stage, ref: InputRef) -> str:
        """One input's text; a refusal names the contract line that asked for it."""
        try:
            return self.workspace.files.read_text(ref.path, what="input file")
        except PipelineError as exc:
            named = f"{stage.contract}:{ref.line}"
            if exc.line is not None:  # bad bytes: the input's own file and line
                raise PipelineError(
                    f"{_bare(exc)} (an input named at {named})", path=exc.path, line=exc.line
                ) from None
            reason = _bare(exc)
            if reason == "input file does not exist":
                reason = "does not exist (run the stage that writes it first)"
            else:
                reason = f"is refused: {reason}"
            raise PipelineError(
                f"input file {ref.path!r} {reason}", path=stage.contract, line=ref.line
            ) from None

    def is_stale(self, stage: Stage) -> bool:
        """Whether an output is missing, or what it was made from changed since."""
        return is_stale(self.workspace.files, stage)

    def first_stale(self) -> Stage | None:
        """The first stage a resume must start from (``None`` when all are done)."""
        return next((s for s in self.workspace.stages if self.is_stale(s)), None)

    async def run(self, *, start: int | None = None) -> AsyncGenerator[PipelineEvent, None]:
        """Run the stages in order, from stage ``start`` (default: the first)."""
        todo = [s for s in self.workspace.stages if start is None or s.number >= start]
        for index, stage in enumerate(todo, start=1):
            yield StageStart(stage.name, stage.number, index, len(todo))
            async for event in self._run_stage(stage):
                yield event
                if isinstance(event, PipelineHalted):
                    return
            if self.gate is None:
                continue
            why = await self._review(self.gate, stage)
            if why is not None:
                yield PipelineHalted(stage.name, why)
                return

    async def _review(self, gate: Gate, stage: Stage) -> str | None:
        """The gate on a finished stage's outputs; why the pipeline halts, or ``None``."""
        if not _takes_outputs(gate):
            passed = await _maybe_await(gate(stage))
        else:
            try:
                outputs = await anyio.to_thread.run_sync(self.outputs, stage)
            except PipelineError as exc:
                return f"cannot read the outputs for review: {exc}"
            passed = await _maybe_await(gate(stage, outputs))
        return None if passed else "the review gate halted the pipeline"

    def outputs(self, stage: Stage) -> tuple[StageArtifact, ...]:
        """What ``stage`` wrote, read now (what the review gate is given).

        Raises:
            PipelineError: An output is missing, refused, over the input cap or not UTF-8.
        """
        files = self.workspace.files
        return tuple(
            StageArtifact(o.name, rel, files.read_text(rel, what="output"))
            for o in stage.outputs
            for rel in (stage.artifact_rel(o.name),)
        )

    async def resume(self) -> AsyncGenerator[PipelineEvent, None]:
        """Run from the first stage whose outputs are missing or stale."""
        stage = await anyio.to_thread.run_sync(self.first_stale)
        if stage is None:
            return
        async for event in self.run(start=stage.number):
            yield event

    async def run_stage(self, stage: Stage) -> AsyncGenerator[PipelineEvent, None]:
        """Run one stage alone (its inputs must already exist)."""
        yield StageStart(stage.name, stage.number, 1, 1)
        async for event in self._run_stage(stage):
            yield event

    async def _run_stage(self, stage: Stage) -> AsyncGenerator[PipelineEvent, None]:
        prompt, files = await anyio.to_thread.run_sync(self.context, stage)
        yield ContextLoaded(stage.name, files, _estimate(len(prompt)))
        artifacts = _Artifacts(self.workspace, stage)
        turns = self.max_turns(stage)
        agent = Agent(
            model=self.model,
            name=stage.name,
            instructions=prompt,
            tools=[artifacts.tool(), *self.tools],
            allowed_tools=["write_artifact", *stage.tools],
            permissions=self.permissions,
            limits=Limits(max_steps=turns) if turns is not None else Limits(),
        )
        session = Session(agent)
        problem: str | None = None
        try:
            async for event in self._converse(session, stage, artifacts):
                if isinstance(event, str):
                    problem = event
                else:
                    yield event
        finally:
            with anyio.CancelScope(shield=True):
                await session.aclose()
        if problem is None:
            problem = await self._finish(session, stage, artifacts)
        for output in artifacts.news():
            yield output
        if problem is not None:
            yield PipelineHalted(stage.name, problem)
            return
        yield StageFinished(stage.name, stage.artifact_paths())

    async def _converse(
        self, session: Session, stage: Stage, artifacts: _Artifacts
    ) -> AsyncGenerator[PipelineEvent | str, None]:
        """The stage's turn, resumed past each approval; a ``str`` is why it halted."""
        stream = session.send(stage_task(stage))
        while True:
            pending: PendingAction | None = None
            async with aclosing(stream) as events:
                async for event in events:
                    yield StageEvent(stage.name, event)
                    for output in artifacts.news():
                        yield output
                    if isinstance(event, ErrorEvent):
                        yield f"stage failed ({event.code}): {event.message}"
                        return
                    if isinstance(event, PendingAction):
                        pending = event
                    elif isinstance(event, TurnComplete) and event.stop_reason not in (
                        "end_turn",
                        "pending_action",
                    ):
                        yield f"stage stopped early ({event.stop_reason})"
                        return
            if pending is None:
                return
            decision = None
            if self.on_approval is not None:
                decision = await _maybe_await(self.on_approval(stage, pending))
            if decision is None:
                yield (
                    f"stage needs approval for {pending.name} and no decision was given "
                    "(pass on_approval)"
                )
                return
            stream = session.resume(pending.attempt_id, decision)

    async def _finish(self, session: Session, stage: Stage, artifacts: _Artifacts) -> str | None:
        first = stage.outputs[0].name
        if first not in artifacts.written:
            final = next((m.text for m in reversed(session.messages) if m.role == "assistant"), "")
            if final.strip():
                try:
                    await anyio.to_thread.run_sync(artifacts.write, first, final.strip() + "\n")
                except PipelineError as exc:
                    return f"cannot write {first}: {exc}"
        missing = [o.name for o in stage.outputs if o.name not in artifacts.written]
        if missing:
            return (
                f"{stage.contract}:{stage.outputs_line}: stage did not write {', '.join(missing)}"
            )
        await anyio.to_thread.run_sync(write_manifest, self.workspace.files, stage)
        return None


async def run_pipeline(
    workspace: PipelineWorkspace,
    *,
    model: Model,
    gate: Gate | None = None,
    tools: Sequence[Tool] = (),
    resume: bool = False,
    stage: int | None = None,
    context_budget: int | None = None,
    max_turns: TurnLimits = None,
    deny: Sequence[str] = (),
    can_use_tool: CanUseTool | None = None,
    on_approval: ApprovalHandler | None = None,
) -> AsyncGenerator[PipelineEvent, None]:
    """Run a workspace's stages and yield their events (the SDK's ``runPipeline``).

    ```python
    async for event in run_pipeline(load_workspace("blog"), model=m, gate=review):
        ...
    ```

    ``resume`` starts at the first stale stage, ``stage`` runs one stage
    alone; the other keywords are :class:`PipelineRunner`'s. Cancelling stops
    the current stage's run; artifacts already written stay.
    """
    runner = PipelineRunner(
        workspace,
        model=model,
        gate=gate,
        tools=tools,
        context_budget=context_budget,
        max_turns=max_turns,
        deny=deny,
        can_use_tool=can_use_tool,
        on_approval=on_approval,
    )
    if stage is not None:
        events = runner.run_stage(workspace.stage(stage))
    elif resume:
        events = runner.resume()
    else:
        events = runner.run()
    async with aclosing(events) as stream:
        async for event in stream:
            yield event
