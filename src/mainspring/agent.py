"""Agent: a declarative definition of what runs a conversation.

An agent names its model, instructions, tools (and an allowlist over them),
permission rules, guards, guardrails, hooks and limits. It holds no conversation state;
a :class:`~mainspring.session.Session` does.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field, replace
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from mainspring._lowlevel.frozen import dataclass
from mainspring.context.options import ContextOptions
from mainspring.errors import ConfigError
from mainspring.guardrails import Guardrail, GuardrailCheck, as_guardrails
from mainspring.hooks import AutoExecuted, Hooks
from mainspring.models.base import Model, ModelSettings, ToolSpec
from mainspring.permissions import PermissionRules
from mainspring.tools.define import Tool
from mainspring.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from mainspring.audit.log import AuditLog
    from mainspring.context._plan import ContextPlan
    from mainspring.context.accounting import Accounting
    from mainspring.context.compaction import Summarizer
    from mainspring.context.compiler import ContextCompiler
    from mainspring.context.layers import TextSource
    from mainspring.context.pipeline import Module
    from mainspring.cost import ModelPrice
    from mainspring.guards import Guard
    from mainspring.memory import MemoryStore
    from mainspring.messages import Message
    from mainspring.output import OutputSpec, OutputValidator

__all__ = ["Agent", "Limits"]

_FLAT_CONTEXT = {
    "microcompact": "microcompact",
    "memory_k": "memory_k",
    "memory_scope": "memory_scope",
    "budget": "context_budget",
    "summarizer": "summarizer",
    "modules": "context_modules",
    "accounting": "accounting",
}
"""ContextOptions fields by the deprecated flat Agent field that held them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What one turn may use: model steps, money, and time for a cancelled write.

    ```python
    Agent(model=..., limits=Limits(max_steps=10, budget_usd=0.50))
    ```
    """

    max_steps: int = 25
    """Model calls allowed in one turn (the turn then ends with ``stop_reason="max_turns"``)."""
    budget_usd: float | None = None
    """Per-session spend limit; the run stops cleanly once it is reached."""
    write_cancel_grace: float = 30.0
    """Seconds a running write may keep going after ``Session.cancel()``."""
    tool_timeout: float = 600.0
    """Seconds a tool call may run when its own ``timeout`` is unset; past it the call
    is an error result and the turn goes on (a synchronous read's thread is abandoned)."""

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ConfigError("max_steps must be at least 1")
        if self.budget_usd is not None and self.budget_usd < 0:
            raise ConfigError("budget_usd must not be negative")
        if self.write_cancel_grace < 0:
            raise ConfigError("write_cancel_grace must not be negative")
        if not self.tool_timeout > 0:
            raise ConfigError("tool_timeout must be positive")


@dataclass(frozen=True, kw_only=True)
class Agent:
    """What an agent is: model, instructions, tools, policies and limits."""

    model: Model | str
    """The model, or a model string such as ``"anthropic:claude-sonnet-4-5"`` (built
    by :func:`~mainspring.models.model_from_string`)."""
    name: str = "agent"
    instructions: str = ""
    tools: Sequence[Tool] | ToolRegistry = ()
    allowed_tools: Sequence[str] | None = None
    """Allowlist of tool names (trailing ``*`` wildcards); ``None`` allows all."""
    permissions: PermissionRules = PermissionRules()
    guards: Sequence[Guard] = ()
    """Checks on each tool call before it runs (see :mod:`mainspring.guards`)."""
    input_guardrails: Sequence[Guardrail | GuardrailCheck] = ()
    """Checks on each turn's user message, run beside the turn's first model call; one
    that trips ends the turn before any of its tools runs (see :mod:`mainspring.guardrails`)."""
    output_guardrails: Sequence[Guardrail | GuardrailCheck] = ()
    """Checks on each turn's final answer; one that trips ends the turn
    (``stop_reason="guardrail_tripped"``)."""
    hooks: Hooks = Hooks()
    on_auto_executed: AutoExecuted | None = None
    """Called after every auto-tier write."""
    audit: AuditLog | None = None
    """The tamper-evident log of decisions, writes, refusals and guard findings
    (:mod:`mainspring.audit`); ``None`` records nothing."""
    limits: Limits = Limits()
    """Steps per turn, budget, write grace."""
    max_turns: int | None = None
    """Deprecated: ``limits=Limits(max_steps=…)`` (it counts model steps, not turns)."""
    budget_usd: float | None = None
    """Deprecated: ``limits=Limits(budget_usd=…)``."""
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    """USD per million tokens by model name."""
    model_settings: ModelSettings = ModelSettings()
    context_block: TextSource | None = None
    """Layer 2: a host-supplied block (text, or a function returning it)."""
    skill_recipe: TextSource | None = None
    """Layer 4: a skill block, e.g. ``SkillCatalog.resident_block()``."""
    memory: MemoryStore | None = None
    """Layer 3: recall the top ``context.memory_k`` items for each turn's user message."""
    context: ContextOptions = ContextOptions()
    """The context pipeline's knobs: compaction budget, microcompact, summarizer,
    memory recall, more modules, token accounting."""
    microcompact: bool | None = None
    """Deprecated: ``context=ContextOptions(microcompact=…)``."""
    memory_k: int | None = None
    """Deprecated: ``context=ContextOptions(memory_k=…)``."""
    memory_scope: str | None = None
    """Deprecated: ``context=ContextOptions(memory_scope=…)``."""
    context_budget: int | EllipsisType | None = ...
    """Deprecated: ``context=ContextOptions(budget=…)`` (``...``: not given)."""
    summarizer: Summarizer | None = None
    """Deprecated: ``context=ContextOptions(summarizer=…)``."""
    context_modules: Sequence[Module | Callable[[], Module]] | None = None
    """Deprecated: ``context=ContextOptions(modules=…)``."""
    accounting: Accounting | None = None
    """Deprecated: ``context=ContextOptions(accounting=…)``."""
    write_cancel_grace: float | None = None
    """Deprecated: ``limits=Limits(write_cancel_grace=…)``."""
    output_type: object = str
    """What a turn's answer is: ``str`` (text), or a type pydantic validates (a model, a
    ``TypedDict``, a dataclass, a union of them…): then ``RunResult.output`` is an
    instance of it (see :mod:`mainspring.output`)."""
    output_validators: Sequence[OutputValidator] = ()
    """``fn(output, context)``, sync or async, run on each valid typed output; raising
    :class:`~mainspring.errors.OutputRejected` sends the model back with the reason."""
    output_retries: int = 2
    """Answers of one turn that may be sent back (invalid or rejected) before the run
    fails with :class:`~mainspring.errors.OutputInvalid`."""
    _tool_map: dict[str, Tool] = field(init=False, repr=False, compare=False)
    _specs: tuple[ToolSpec, ...] = field(init=False, repr=False, compare=False)
    _context_plan: ContextPlan | None = field(default=None, init=False, repr=False, compare=False)
    """How its sessions build their context compilers (made at the first one)."""
    _output: OutputSpec | None = field(default=None, init=False, repr=False, compare=False)
    _request_tools: tuple[ToolSpec, ...] = field(init=False, repr=False, compare=False)
    _request_settings: ModelSettings = field(init=False, repr=False, compare=False)
    _output_native: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.model, str):
            from mainspring.models.registry import model_from_string

            object.__setattr__(self, "model", model_from_string(self.model))
        self._fold_deprecated_limits()
        self._fold_deprecated_context()
        object.__setattr__(self, "input_guardrails", as_guardrails(self.input_guardrails))
        object.__setattr__(self, "output_guardrails", as_guardrails(self.output_guardrails))
        registry = self.tools if isinstance(self.tools, ToolRegistry) else ToolRegistry(self.tools)
        allowed = registry.allowed(self.allowed_tools)
        object.__setattr__(self, "_tool_map", {t.name: t for t in allowed})
        object.__setattr__(self, "_specs", tuple(t.spec for t in allowed))
        self._check_refreshes()
        self._plan_output()

    def _plan_output(self) -> None:
        """How the model is asked for the typed output: its schema, or the final-answer tool."""
        tools, settings = self._specs, self.model_settings
        if self.output_retries < 0:
            raise ConfigError("output_retries must not be negative")
        if self.output_type is not str:
            from mainspring.output import FINAL_RESULT_TOOL, OutputSpec, native_output

            if settings.output_schema is not None:
                raise ConfigError(
                    "give output_type or model_settings.output_schema, not both "
                    "(output_type sets the schema)"
                )
            if FINAL_RESULT_TOOL in self._tool_map:
                raise ConfigError(f"a tool may not be named {FINAL_RESULT_TOOL!r} with output_type")
            spec = OutputSpec(self.output_type)
            object.__setattr__(self, "_output", spec)
            if native_output(self.resolved_model, tools=bool(tools)):
                settings = replace(settings, output_schema=spec.schema)
                object.__setattr__(self, "_output_native", True)
            else:
                tools = (*tools, spec.tool_spec())
        elif self.output_validators:
            raise ConfigError("output_validators need an output_type other than str")
        object.__setattr__(self, "_request_tools", tools)
        object.__setattr__(self, "_request_settings", settings)

    def _check_refreshes(self) -> None:
        for tool in self._tool_map.values():
            for name in tool.policy.post_write_refresh:
                read = self._tool_map.get(name)
                if read is None or not read.policy.read_only:
                    raise ConfigError(
                        f"tool {tool.name!r}: post_write_refresh names {name!r}, which is not "
                        "a read-only tool of this agent"
                    )

    def _fold_deprecated_limits(self) -> None:
        given = [
            name
            for name, value in (
                ("max_turns", self.max_turns),
                ("budget_usd", self.budget_usd),
                ("write_cancel_grace", self.write_cancel_grace),
            )
            if value is not None
        ]
        if not given:
            return
        warnings.warn(
            f"Agent({'=…, '.join(given)}=…) is deprecated: use Agent(limits=Limits(...)) "
            "(max_turns is Limits.max_steps)",
            DeprecationWarning,
            stacklevel=4,
        )
        limits = self.limits
        if self.max_turns is not None:
            limits = replace(limits, max_steps=self.max_turns)
        if self.budget_usd is not None:
            limits = replace(limits, budget_usd=self.budget_usd)
        if self.write_cancel_grace is not None:
            limits = replace(limits, write_cancel_grace=self.write_cancel_grace)
        object.__setattr__(self, "limits", limits)
        for field_name in ("max_turns", "budget_usd", "write_cancel_grace"):
            object.__setattr__(self, field_name, None)  # folded: a replace() does not repeat it

    def _fold_deprecated_context(self) -> None:
        given: dict[str, Any] = {
            option: value
            for option, value in (
                ("microcompact", self.microcompact),
                ("memory_k", self.memory_k),
                ("memory_scope", self.memory_scope),
                ("budget", self.context_budget),
                ("summarizer", self.summarizer),
                ("modules", self.context_modules),
                ("accounting", self.accounting),
            )
            if value is not None and value is not ...
        }
        if self.context_budget is None:
            given["budget"] = None  # "no compaction" given the old way
        if not given:
            return
        warnings.warn(
            f"Agent({'=…, '.join(_FLAT_CONTEXT[k] for k in given)}=…) is deprecated: use "
            "Agent(context=ContextOptions(...))",
            DeprecationWarning,
            stacklevel=4,
        )
        object.__setattr__(self, "context", replace(self.context, **given))
        for flat in _FLAT_CONTEXT.values():  # folded: a replace() does not repeat it
            object.__setattr__(self, flat, ... if flat == "context_budget" else None)

    def context_compiler(
        self, messages: Iterable[Message] = (), *, session_id: str = ""
    ) -> ContextCompiler[Message]:
        """A new context compiler for one session of this agent.

        It holds the five layers, microcompact, compaction and the agent's own
        modules. What is the same for every session (the checked options, the
        layers that keep no state, the processors' order, the sizing) is
        worked out once, at the first call; each compiler gets its own
        transcript, view and turn records, and new instances of the processors
        and module factories that keep per-session state.
        """
        plan = self._context_plan
        if plan is None:  # worked out at the first session
            # (a function-level import: the context pipeline loads with the first session)
            import mainspring.context._plan as _plan

            plan = _plan.ContextPlan(
                options=self.context,
                model=self.resolved_model.name,
                instructions=self.instructions,
                context_block=self.context_block,
                skill_recipe=self.skill_recipe,
                memory=self.memory,
                agent=self.name,
            )
            object.__setattr__(self, "_context_plan", plan)
        return plan.compiler(messages, session_id=session_id)

    @property
    def resolved_model(self) -> Model:
        """The model (a model string given to the constructor is built by then)."""
        model = self.model
        assert not isinstance(model, str), "built in __post_init__"
        return model

    def tool(self, name: str) -> Tool | None:
        """The tool this agent may use under ``name``, if any."""
        return self._tool_map.get(name)

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Names of the tools this agent may use."""
        return tuple(self._tool_map)

    @property
    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """What the model is told about the tools."""
        return self._specs

    @property
    def output_spec(self) -> OutputSpec | None:
        """The typed output's schema and validation (``None`` for ``output_type=str``)."""
        return self._output

    @property
    def output_native(self) -> bool:
        """Whether the typed output is asked for as a schema (else: the final-answer tool)."""
        return self._output_native

    @property
    def request_tools(self) -> tuple[ToolSpec, ...]:
        """The tools each request offers (with the final-answer tool of a typed output)."""
        return self._request_tools

    @property
    def request_settings(self) -> ModelSettings:
        """Each request's settings (with a typed output's schema, when taken natively)."""
        return self._request_settings
