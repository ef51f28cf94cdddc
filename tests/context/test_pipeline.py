"""Processor ordering, registration, session scope, modules and compiler lifecycle."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from mainspring.context import (
    BaseSystemPrompt,
    Compaction,
    ContextBlock,
    Microcompact,
    SkillRecipe,
    ToolResultBudget,
)
from mainspring.context.compiler import Compilation, CompiledContext, ContextCompiler
from mainspring.context.lifecycle import CompilerRegistry
from mainspring.context.pipeline import (
    PHASES,
    Module,
    Phase,
    Processor,
    SystemProcessor,
    order_processors,
)
from mainspring.context.transcript import PrefixChange
from mainspring.errors import (
    CompilerActiveError,
    CompilerDestroyedError,
    ContextError,
    PrefixMutationError,
    ProcessorCycleError,
    ProcessorScopeError,
)
from mainspring.messages import Message

pytestmark = pytest.mark.anyio


class Recorder(Processor):
    """Appends its id to a shared log at every run."""

    def __init__(
        self,
        id: str,
        log: list[str],
        *,
        phase: Phase = "transform",
        before: tuple[str, ...] = (),
        after: tuple[str, ...] = (),
    ) -> None:
        super().__init__(id, phase=phase, before=before, after=after)
        self.log = log

    async def process(self, ctx: Compilation[Any]) -> None:
        self.log.append(self.id)


class CountingSystem(SystemProcessor):
    """A session-scoped system block that counts how often it was computed."""

    def __init__(self, id: str = "counting", text: str = "stable instructions") -> None:
        super().__init__(id)
        self.calls = 0
        self.text_value = text

    async def text(self, ctx: Compilation[Any]) -> str:
        self.calls += 1
        return f"{self.text_value} #{self.calls}"


def conversation() -> list[Message]:
    return [Message.user("hello"), Message.assistant("hi"), Message.user("how are you")]


def ids(processors: list[Processor]) -> list[str]:
    return [p.id for p in processors]


# -- ordering ------------------------------------------------------------------


async def test_phases_run_in_phase_order_whatever_the_registration_order() -> None:
    log: list[str] = []
    procs: list[Processor] = [Recorder(phase, log, phase=phase) for phase in reversed(PHASES)]
    compiler = ContextCompiler(messages=conversation(), processors=procs)
    await compiler.compile(turn_index=0)
    assert log == list(PHASES)
    await compiler.compile(turn_index=0, step=2)
    assert log == list(PHASES) * 2


def test_before_and_after_order_processors_inside_a_phase() -> None:
    log: list[str] = []
    a = Recorder("a", log)
    b = Recorder("b", log, before=("a",))
    c = Recorder("c", log, after=("a",))
    d = Recorder("d", log, before=("b",))
    assert ids(order_processors([a, b, c, d])) == ["d", "b", "a", "c"]
    # Without constraints registration order holds.
    assert ids(order_processors([Recorder("x", log), Recorder("y", log)])) == ["x", "y"]


async def test_before_after_order_is_what_a_compile_runs() -> None:
    log: list[str] = []
    procs: list[Processor] = [
        Recorder("late", log, phase="finalize"),
        Recorder("second", log, after=("first",)),
        Recorder("first", log),
        Recorder("zero", log, before=("first",)),
        Recorder("early", log, phase="sanitize"),
    ]
    compiler = ContextCompiler(messages=conversation(), processors=procs)
    await compiler.compile(turn_index=0)
    assert log == ["early", "zero", "first", "second", "late"]


async def test_a_cycle_is_rejected_at_construction_and_names_the_cycle() -> None:
    log: list[str] = []
    procs: list[Processor] = [
        Recorder("a", log, before=("b",)),
        Recorder("b", log, before=("c",)),
        Recorder("c", log, before=("a",)),
        Recorder("free", log),
    ]
    with pytest.raises(ProcessorCycleError) as info:
        ContextCompiler(messages=conversation(), processors=procs)
    cycle = info.value.cycle
    assert set(cycle) == {"a", "b", "c"}
    assert cycle[0] == cycle[-1]
    assert len(cycle) == 4
    for name in ("a", "b", "c"):
        assert name in str(info.value)
    assert log == []  # nothing ran


def test_a_processor_ordered_against_itself_is_a_cycle() -> None:
    with pytest.raises(ProcessorCycleError) as info:
        order_processors([Recorder("self", [], before=("self",))])
    assert info.value.cycle == ("self",)


def test_duplicate_ids_are_rejected() -> None:
    log: list[str] = []
    with pytest.raises(ContextError, match="dup"):
        ContextCompiler(processors=[Recorder("dup", log), Recorder("dup", log, phase="system")])


def test_duplicate_ids_across_modules_are_rejected() -> None:
    log: list[str] = []
    with pytest.raises(ContextError):
        ContextCompiler(
            processors=[Recorder("same", log)],
            modules=[Module("m", [Recorder("same", log)])],
        )


def test_a_constraint_against_the_phase_order_is_rejected() -> None:
    log: list[str] = []
    with pytest.raises(ContextError, match="phases run in a fixed order") as info:
        ContextCompiler(
            processors=[
                Recorder("late", log, phase="finalize", before=("early",)),
                Recorder("early", log, phase="sanitize"),
            ]
        )
    assert not isinstance(info.value, ProcessorCycleError)
    with pytest.raises(ContextError):
        order_processors(
            [
                Recorder("early", log, phase="sanitize", after=("late",)),
                Recorder("late", log, phase="finalize"),
            ]
        )


def test_a_constraint_that_agrees_with_the_phase_order_is_fine() -> None:
    log: list[str] = []
    ordered = order_processors(
        [
            Recorder("late", log, phase="finalize", after=("early",)),
            Recorder("early", log, phase="sanitize", before=("late",)),
        ]
    )
    assert ids(ordered) == ["early", "late"]


async def test_constraints_naming_absent_processors_are_ignored() -> None:
    log: list[str] = []
    procs: list[Processor] = [
        Recorder("a", log, before=("ghost",), after=("phantom",)),
        Recorder("b", log, after=("nobody",)),
    ]
    compiler = ContextCompiler(messages=conversation(), processors=procs)
    await compiler.compile(turn_index=0)
    assert log == ["a", "b"]


# -- session scope -------------------------------------------------------------


async def test_a_session_processor_runs_once_and_is_replayed() -> None:
    proc = CountingSystem()
    compiler = ContextCompiler(messages=conversation(), processors=[proc])
    first = await compiler.compile(turn_index=0)
    outputs: list[CompiledContext[Message]] = [first]
    for turn in range(1, 6):
        compiler.append([Message.assistant(f"a{turn}"), Message.user(f"u{turn}")])
        outputs.append(await compiler.compile(turn_index=turn))
        outputs.append(await compiler.compile(turn_index=turn, step=2))
    assert proc.calls == 1
    for out in outputs:
        assert out.contributions == first.contributions
        assert out.system == first.system
    assert first.system[0].text == "stable instructions #1"


async def test_invalidate_recomputes_one_session_processor() -> None:
    proc = CountingSystem()
    other = CountingSystem("other")
    compiler = ContextCompiler(messages=conversation(), processors=[proc, other])
    await compiler.compile(turn_index=0)
    compiler.invalidate("counting")
    out = await compiler.compile(turn_index=0, step=2)
    assert (proc.calls, other.calls) == (2, 1)
    assert [b.text for b in out.system] == ["stable instructions #2", "stable instructions #1"]
    compiler.invalidate("not-a-processor")  # harmless
    await compiler.compile(turn_index=1)
    assert (proc.calls, other.calls) == (2, 1)


async def test_invalidate_prefix_recomputes_session_processors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    proc = CountingSystem()
    compiler = ContextCompiler(messages=conversation(), processors=[proc], strict=False)
    await compiler.compile(turn_index=0)
    with caplog.at_level(logging.WARNING):
        change = compiler.invalidate_prefix("host data changed")
    assert change.reason == "host data changed"
    out = await compiler.compile(turn_index=1)
    assert proc.calls == 2
    assert out.system[0].text.endswith("#2")
    assert list(out.messages) == conversation()


async def test_invalidate_prefix_in_strict_mode_is_refused_and_changes_nothing() -> None:
    proc = CountingSystem()
    changes: list[PrefixChange] = []
    compiler = ContextCompiler(
        messages=conversation(), processors=[proc], on_prefix_change=changes.append
    )
    first = await compiler.compile(turn_index=0)
    with pytest.raises(PrefixMutationError, match="strict mode"):
        compiler.invalidate_prefix("host data changed")
    assert changes == [] and compiler.transcript.generation == 0
    again = await compiler.compile(turn_index=1)
    assert proc.calls == 1  # the session-scoped contribution was not recomputed
    assert again.system == first.system and list(again.messages) == conversation()


async def test_relaxed_sync_with_a_changed_prefix_recomputes_session_processors() -> None:
    proc = CountingSystem()
    changes: list[object] = []
    compiler = ContextCompiler(
        messages=conversation(), processors=[proc], strict=False, on_prefix_change=changes.append
    )
    await compiler.compile(turn_index=0)
    compiler.sync([*conversation(), Message.assistant("fine")])  # append only: no recompute
    await compiler.compile(turn_index=1)
    assert proc.calls == 1
    edited = [Message.user("HELLO (edited)"), Message.assistant("hi")]
    compiler.sync(edited)
    out = await compiler.compile(turn_index=2)
    assert proc.calls == 2
    assert len(changes) == 1
    assert list(out.messages) == edited


async def test_a_prefix_change_made_on_the_transcript_directly_is_taken_in_at_next_read() -> None:
    proc = CountingSystem()
    changes: list[PrefixChange] = []
    compiler = ContextCompiler(
        messages=conversation(), processors=[proc], strict=False, on_prefix_change=changes.append
    )
    await compiler.compile(turn_index=0)
    edited = [Message.user("HELLO (edited)"), Message.assistant("hi")]
    compiler.transcript.sync(edited)  # past the compiler: it looks at the generation itself
    assert changes == []  # taken in at the compiler's next read
    compiler.view  # noqa: B018
    assert [c.generation for c in changes] == [1]
    out = await compiler.compile(turn_index=1)
    assert proc.calls == 2  # the session-scoped contribution was recomputed
    assert list(out.messages) == edited and len(changes) == 1
    compiler.transcript.invalidate_prefix("host data changed")
    await compiler.compile(turn_index=2)
    assert proc.calls == 3 and [c.reason for c in changes][-1] == "host data changed"


class Structural(Processor):
    def __init__(self, what: str, *, scope: Any = "session") -> None:
        super().__init__(f"structural-{what}", scope=scope)
        self.what = what

    async def process(self, ctx: Compilation[Any]) -> None:
        if self.what == "replace":
            ctx.replace_message(0, Message.user("replaced"))
        elif self.what == "edit":
            ctx.edit_history().replace(0, Message.user("edited"))
        else:
            ctx.rewrite(lambda c: c.text.upper())


@pytest.mark.parametrize("what", ["replace", "edit", "rewrite"])
async def test_a_session_processor_may_not_change_structure(what: str) -> None:
    compiler = ContextCompiler(messages=conversation(), processors=[Structural(what)])
    with pytest.raises(ProcessorScopeError, match=f"structural-{what}"):
        await compiler.compile(turn_index=0)
    assert list(compiler.view) == conversation()
    assert list(compiler.transcript.messages) == conversation()


@pytest.mark.parametrize("what", ["replace", "edit", "rewrite"])
async def test_a_turn_processor_may_change_structure(what: str) -> None:
    compiler = ContextCompiler(messages=conversation(), processors=[Structural(what, scope="turn")])
    await compiler.compile(turn_index=0)
    assert list(compiler.transcript.messages) == conversation()


# -- modules -------------------------------------------------------------------


class Tracked(Module):
    def __init__(self, name: str, events: list[str], *, fail_teardown: bool = False) -> None:
        super().__init__(name, [Recorder(f"{name}-proc", [])])
        self.events = events
        self.fail_teardown = fail_teardown
        self.setups: list[tuple[dict[str, Any], dict[str, Any]]] = []

    async def setup(self, services: Mapping[str, Any], config: Mapping[str, Any]) -> None:
        self.setups.append((dict(services), dict(config)))
        self.events.append(f"setup {self.name}")

    async def teardown(self) -> None:
        self.events.append(f"teardown {self.name}")
        if self.fail_teardown:
            raise RuntimeError(f"{self.name} cannot tear down")


async def test_modules_set_up_once_before_the_first_compile_with_their_config() -> None:
    events: list[str] = []
    one, two = Tracked("one", events), Tracked("two", events)
    seen_config: list[Mapping[str, Any]] = []

    class ReadsConfig(Processor):
        async def process(self, ctx: Compilation[Any]) -> None:
            events.append("compile")
            seen_config.append(ctx.config())

    three = Module("three", [ReadsConfig("reads-config")])
    compiler = ContextCompiler(
        messages=conversation(),
        modules=[one, two, three],
        services={"memory": "the store"},
        config={"one": {"k": 1}, "three": {"flag": True}},
    )
    assert events == []
    await compiler.compile(turn_index=0)
    await compiler.compile(turn_index=1)
    assert events == ["setup one", "setup two", "compile", "compile"]
    assert one.setups == [({"memory": "the store"}, {"k": 1})]
    assert two.setups == [({"memory": "the store"}, {})]
    assert seen_config == [{"flag": True}, {"flag": True}]
    assert [p.module for p in compiler.processors] == ["one", "two", "three"]


async def test_teardown_runs_in_reverse_order_and_destroy_twice_is_fine() -> None:
    events: list[str] = []
    compiler = ContextCompiler(
        messages=conversation(),
        modules=[Tracked("a", events), Tracked("b", events), Tracked("c", events)],
    )
    await compiler.compile(turn_index=0)
    events.clear()
    await compiler.destroy()
    assert events == ["teardown c", "teardown b", "teardown a"]
    assert compiler.destroyed
    await compiler.destroy()
    assert events == ["teardown c", "teardown b", "teardown a"]


async def test_modules_never_set_up_are_not_torn_down() -> None:
    events: list[str] = []
    compiler: ContextCompiler[Message] = ContextCompiler(modules=[Tracked("a", events)])
    await compiler.destroy()
    assert events == []


async def test_a_destroyed_compiler_refuses_work() -> None:
    compiler = ContextCompiler(messages=conversation())
    await compiler.compile(turn_index=0)
    await compiler.destroy()
    with pytest.raises(CompilerDestroyedError):
        await compiler.compile(turn_index=1)
    with pytest.raises(CompilerDestroyedError):
        compiler.append([Message.user("more")])
    with pytest.raises(CompilerDestroyedError):
        compiler.sync(conversation())
    with pytest.raises(CompilerDestroyedError):
        compiler.invalidate("x")
    with pytest.raises(CompilerDestroyedError):
        compiler.invalidate_prefix("x")
    with pytest.raises(CompilerDestroyedError):
        compiler.end_turn()


async def test_destroy_during_a_compile_aborts_it() -> None:
    started = anyio.Event()
    never = anyio.Event()

    class Waits(Processor):
        async def process(self, ctx: Compilation[Any]) -> None:
            started.set()
            await never.wait()

    after: list[str] = []
    compiler = ContextCompiler(
        messages=conversation(),
        processors=[Waits("waits"), Recorder("after", after, phase="finalize")],
    )
    errors: list[BaseException] = []

    async def run_compile() -> None:
        try:
            await compiler.compile(turn_index=0)
        except CompilerDestroyedError as exc:
            errors.append(exc)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_compile)
            await started.wait()
            await compiler.destroy()
    assert len(errors) == 1
    assert after == []
    assert compiler.destroyed


async def test_destroy_during_a_compile_aborts_it_after_processors_that_never_wait() -> None:
    # The cancel scope is opened only when some processor may wait; a
    # computing one before the waiting one does not change what destroy does.
    started = anyio.Event()
    never = anyio.Event()

    class Waits(Processor):
        async def process(self, ctx: Compilation[Any]) -> None:
            started.set()
            await never.wait()

    history = Microcompact()
    assert not history.waits and Waits("waits").waits
    compiler = ContextCompiler(messages=conversation(), processors=[history, Waits("waits")])
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:

            async def run_compile() -> None:
                with pytest.raises(CompilerDestroyedError):
                    await compiler.compile(turn_index=0)

            tg.start_soon(run_compile)
            await started.wait()
            await compiler.destroy()


def test_which_built_in_processors_may_wait() -> None:
    async def instructions() -> str:
        return "from a store"

    assert not BaseSystemPrompt("fixed").waits
    assert BaseSystemPrompt(instructions).waits  # a function's text may be awaited
    assert not ContextBlock("fixed").waits and ContextBlock(lambda: "x").waits
    assert not SkillRecipe("fixed").waits
    assert not ToolResultBudget().waits
    compaction = Compaction(1_000)
    assert not compaction.waits  # pruning only computes

    async def summarize(messages: Any) -> str:
        return "summary"

    compaction.summarizer = summarize
    assert compaction.waits  # a summarizer is a model call


async def test_a_compile_of_processors_that_never_wait_gives_the_same_request() -> None:
    plain = ContextCompiler(
        messages=conversation(), processors=[BaseSystemPrompt("be brief"), Microcompact()]
    )

    slow = BaseSystemPrompt("be brief")
    slow.waits = True  # compiled inside the cancel scope
    scoped = ContextCompiler(messages=conversation(), processors=[slow, Microcompact()])
    a = await plain.compile(turn_index=1)
    b = await scoped.compile(turn_index=1)
    assert a.system == b.system and list(a.messages) == list(b.messages)


async def test_a_failing_teardown_still_tears_down_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[str] = []
    compiler = ContextCompiler(
        messages=conversation(),
        modules=[
            Tracked("a", events),
            Tracked("b", events, fail_teardown=True),
            Tracked("c", events),
        ],
    )
    await compiler.compile(turn_index=0)
    events.clear()
    with caplog.at_level(logging.ERROR), pytest.raises(ContextError) as info:
        await compiler.destroy()
    assert isinstance(info.value.__cause__, RuntimeError)
    assert events == ["teardown c", "teardown b", "teardown a"]
    assert compiler.destroyed
    assert "'b' failed to tear down" in caplog.text
    await compiler.destroy()  # already destroyed: nothing more


# -- registry ------------------------------------------------------------------


async def test_registry_allows_one_live_compiler_per_key() -> None:
    registry: CompilerRegistry[Message] = CompilerRegistry()
    compiler = registry.create("s1", messages=conversation())
    assert compiler.session_id == "s1"
    assert "s1" in registry
    assert registry.get("s1") is compiler
    with pytest.raises(CompilerActiveError, match="s1"):
        registry.create("s1")
    other = registry.create("s2", factory=lambda: ContextCompiler(session_id="custom"))
    assert other.session_id == "custom"
    assert len(registry) == 2
    assert await registry.destroy("s1") is True
    assert compiler.destroyed
    assert "s1" not in registry
    assert await registry.destroy("s1") is False
    again = registry.create("s1")
    assert again is not compiler
    assert len(registry) == 2
    await registry.destroy_all()
    assert len(registry) == 0
    assert other.destroyed and again.destroyed


async def test_registry_key_is_free_once_the_compiler_destroys_itself() -> None:
    registry: CompilerRegistry[Message] = CompilerRegistry()
    compiler = registry.create("k")
    await compiler.destroy()
    assert registry.get("k") is None
    fresh = registry.create("k")
    assert not fresh.destroyed


async def test_a_slot_processor_without_text_names_its_class_and_the_method_to_write() -> None:
    class Forgetful(SystemProcessor):
        """Forgot to define text()."""

    compiler = ContextCompiler(messages=conversation(), processors=[Forgetful("forgetful")])
    with pytest.raises(Exception) as raised:
        await compiler.compile(turn_index=0)
    chain: list[BaseException] = []
    error: BaseException | None = raised.value
    while error is not None:
        chain.append(error)
        error = error.__cause__
    message = " | ".join(str(e) for e in chain)
    assert any(isinstance(e, NotImplementedError) for e in chain), message
    assert "Forgetful must define `async def text(self, ctx) -> str`" in message
    assert "to the system" in message
