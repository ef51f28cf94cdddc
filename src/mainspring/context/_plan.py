"""An agent's context compilers: what its sessions share, worked out once.

Every session of an agent builds a context compiler from the same options:
the five layers, microcompact, compaction and the agent's own modules. A
:class:`ContextPlan` does the part that is the same for all of them once,
at the first session: it checks the options, makes the layers that hold no
state (the base system prompt, the context block, the skill recipe: text, or
a function giving it), works out the processors' run order and keeps the
compiler's :class:`~mainspring.context._shape.CompilerShape`. Each session
then gets only what it changes: its transcript and view, its turn records,
and new instances of the processors that keep state (memory recall counts
its failures, microcompact notes calls, compaction its progress) and of the
modules the agent gives as factories.

Microcompact and compaction act only near the budget, which most sessions
never reach: when they are the only processors that keep state (no memory,
no modules of the agent's own), a session makes its instances of them only
once its history passes their thresholds (a
:class:`~mainspring.context._shape.Deferral`, shared), and runs the shared
layers until then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING

from mainspring.context._shape import CORE_MODULE, CompilerShape, Deferral, Made, run_order
from mainspring.context.compaction import Compaction
from mainspring.context.compiler import ContextCompiler
from mainspring.context.history import Microcompact
from mainspring.context.layers import BaseSystemPrompt, ContextBlock, MemoryRecall, SkillRecipe
from mainspring.context.options import ContextOptions
from mainspring.context.pipeline import Module, Processor
from mainspring.messages import Message

if TYPE_CHECKING:
    from mainspring.context.layers import TextSource
    from mainspring.memory import MemoryStore

__all__ = ["ContextPlan"]


class ContextPlan:
    """How every session of one agent builds its context compiler."""

    __slots__ = (
        "_deferral",
        "_in_place",
        "_modules",
        "_order",
        "_parts",
        "_processors",
        "options",
        "shape",
    )

    def __init__(
        self,
        *,
        options: ContextOptions,
        model: str,
        instructions: str = "",
        context_block: TextSource | None = None,
        skill_recipe: TextSource | None = None,
        memory: MemoryStore | None = None,
        agent: str = "",
    ) -> None:
        """Check the options and make what the sessions share (ConfigError when invalid)."""
        self.options = options
        self.shape: CompilerShape[Message] = CompilerShape(
            accounting=options.accounting, model=model, retain_turns=options.retain_turns
        )
        parts: list[Processor | Callable[[], Processor]] = []
        """The core module's processors as registered: shared ones, or how to make one."""
        if instructions:
            parts.append(BaseSystemPrompt(instructions))
        if context_block is not None:
            parts.append(ContextBlock(context_block))
        if skill_recipe is not None:
            parts.append(SkillRecipe(skill_recipe))
        if memory is not None:
            parts.append(
                partial(
                    MemoryRecall,
                    memory,
                    k=options.memory_k,
                    scope=options.memory_scope,
                    agent=agent,
                    timeout=options.memory_timeout,
                )
            )
        if options.microcompact and options.budget is not None:
            # Collapse repeats only where compaction would start to act anyway: below
            # that, the cache hits they would cost are worth more than their tokens.
            parts.append(partial(Microcompact, over_tokens=int(0.85 * options.budget)))
        if options.budget is not None:
            parts.append(partial(Compaction, options.budget, summarizer=options.summarizer))
        made = [p if isinstance(p, Processor) else p() for p in parts]  # checks the arguments
        ordered = run_order((Module(CORE_MODULE, made),))
        position = {id(p): i for i, p in enumerate(made)}
        self._parts = tuple(parts)
        self._order = tuple(position[id(p)] for p in ordered)
        """Registration index of each processor, in run order."""
        self._in_place = self._order == tuple(range(len(parts)))
        """Whether they run in the order they are registered (one tuple serves both)."""
        self._processors: tuple[Processor, ...] | None = None
        self._modules: tuple[Module, ...] | None = None
        self._deferral: Deferral | None = None
        """With budget processors the only ones keeping state: how sessions make them."""
        if all(isinstance(p, Processor) for p in parts):  # none keeps state: one module for all
            self._processors = tuple(made[i] for i in self._order)
            self._modules = (Module(CORE_MODULE, self._processors),)
        elif not options.modules:
            self._defer(made)

    def _defer(self, made: list[Processor]) -> None:
        """Share the processors that keep no state; make the budget ones when needed."""
        within: float | None = None
        for part, proc in zip(self._parts, made, strict=True):
            if isinstance(part, Processor):
                if proc.maps_messages:  # (the deferred ones would not see its mapping)
                    return
                continue
            threshold = _inert_within(proc)
            if threshold is None:  # a processor that keeps state and may act at any size
                return
            within = threshold if within is None else min(within, threshold)
        assert within is not None, "some part keeps state"
        self._processors = tuple(
            made[i] for i in self._order if isinstance(self._parts[i], Processor)
        )
        self._deferral = Deferral(within, partial(_make, self._parts, self._order, self._in_place))

    def compiler(
        self, messages: Iterable[Message] = (), *, session_id: str = ""
    ) -> ContextCompiler[Message]:
        """A new compiler for one session (its own transcript, view and stateful processors)."""
        processors = self._processors
        modules: tuple[Module, ...] | None = self._modules
        deferral = self._deferral
        if deferral is not None:
            assert processors is not None
            return ContextCompiler.shaped(
                self.shape,
                None,
                messages,
                session_id=session_id,
                processors=processors,
                deferred=deferral,
            )
        if processors is None or modules is None:
            processors, modules = _make(self._parts, self._order, self._in_place)
        extra = self.options.modules
        if extra:  # the agent's own modules: ordered with the core one, per session
            core = (Module(CORE_MODULE, processors),) if modules is None else modules
            modules = (*core, *(m if isinstance(m, Module) else m() for m in extra))
            return ContextCompiler.shaped(self.shape, modules, messages, session_id=session_id)
        return ContextCompiler.shaped(
            self.shape, modules, messages, session_id=session_id, processors=processors
        )


def _make(
    parts: tuple[Processor | Callable[[], Processor], ...],
    order: tuple[int, ...],
    in_place: bool,
) -> Made:
    """One session's processors (in run order) and, unless they are in place, its module."""
    made = [p if isinstance(p, Processor) else p() for p in parts]
    processors = tuple(made[i] for i in order)
    for proc in processors:
        proc.module = CORE_MODULE
    # (in run order: the compiler makes the plain module only if it is asked for)
    return processors, None if in_place else (Module(CORE_MODULE, made),)


def _inert_within(proc: Processor) -> float | None:
    """The history tokens up to which ``proc`` does nothing (``None``: it may act at any size).

    Microcompact with a threshold only keeps the runs it is handed until then,
    and compaction only checks its trigger.
    """
    if type(proc) is Microcompact:
        return proc.over_tokens
    if type(proc) is Compaction:
        return proc.trigger * proc.budget
    return None
