"""Skills that act on their settings: ``execution: subagent``, ``allowed-tools``, dependencies.

```python
runner = SkillRunner(SkillCatalog(["skills/"]), agent=base, servers=manager.servers)
host = runner.host()  # base + skills_list, skills_read, skills_run
```

- **Dependencies.** :meth:`SkillRunner.preflight` checks every skill against
  the tools the host agent has and the MCP servers it is connected to
  (:meth:`~mainspring.skills.SkillCatalog.preflight`); ``skills_list`` marks a
  skill that lacks something, and ``skills_run`` refuses it, naming what is
  missing. Nothing is installed.
- **``execution: subagent``.** ``skills_run(name, task)`` runs the skill as a
  subagent (:class:`~mainspring.subagents.SubagentHandle`): the host agent
  with the skill's body as its instructions, under the host's permission
  rules, guards, hooks and limits, its spend counted against the host's
  budget, its approvals surfaced like any subagent's.
- **``allowed-tools``.** That subagent has only the host's tools the skill's
  ``allowed-tools`` match, plus ``skills_read`` for the skill's own files; a
  call to any other tool is refused by its allowlist. A skill that does not
  say gets all the host's tools (but never ``skills_run``: no recursion).
  An ``inline`` skill is read with ``skills_read`` and followed by the host
  model itself; ``skills_run`` refuses it. Once the host model has read an
  inline skill that names ``allowed-tools`` (its ``SKILL.md``), the rest of
  that turn's calls to other tools (``skills_list`` and ``skills_read``
  aside) return an error result instead of running. Limits: the check is made
  when the tool would run, after its judging (a confirm-tier tool outside the
  list is asked about, then refused); a call the model made in the same step
  as the ``skills_read`` may run before the skill is active; and the active
  skill lives in the session's turn cache, so a turn resumed by another
  process (from the store) forgets it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mainspring.agent import Agent
from mainspring.errors import ConfigError, SkillNotFound
from mainspring.skills import SKILL_FILE, Skill, SkillCatalog, SkillNeeds
from mainspring.stores.base import SharedRecords
from mainspring.subagents import SubagentHandle
from mainspring.tools.context import ToolContext
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import ToolPolicy
from mainspring.tools.registry import matches_any

__all__ = ["SkillRunner"]

_RUN = "skills_run"
_READ = "skills_read"
_ALWAYS = frozenset({"skills_list", _READ})
"""Tools an active inline skill never shuts off."""
_ACTIVE = "mainspring.skills.active"
"""Turn-cache key of the active inline skill: ``(name, allowed-tools)``."""
_CTX = "__mainspring_skill_context__"


def _limited(tool: Tool) -> Tool:
    """``tool``, refused while an inline skill whose ``allowed-tools`` omit it is active."""
    if tool.fn is None or tool.name in _ALWAYS:
        return tool
    if tool.ctx_param is not None:
        key = tool.ctx_param
    else:
        key = _CTX

    async def limited(**kwargs: Any) -> ToolOutput:
        ctx = kwargs[key] if tool.ctx_param is not None else kwargs.pop(key)
        active = ctx.cache.get(_ACTIVE) if isinstance(ctx, ToolContext) else None
        if active is not None and not matches_any(active[1], tool.name):
            allowed = ", ".join(active[1]) or "none"
            return ToolOutput(
                content=(
                    f"not run: the active skill {active[0]!r} allows only these tools: {allowed}"
                ),
                is_error=True,
            )
        if tool.ctx_param is not None:
            kwargs.pop(key)
        return await tool.call({}, ctx if tool.ctx_param is not None else None, kwargs=kwargs)

    return dataclasses.replace(tool, fn=limited, is_async=True, ctx_param=key)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64]


class _RunInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="The skill's name, as skills_list gives it.")
    task: str = Field(description="The task for the skill, with everything it needs to know.")


class SkillRunner:
    """Runs a catalog's skills for a host agent, as their front matter says."""

    def __init__(
        self,
        catalog: SkillCatalog,
        *,
        agent: Agent,
        servers: Sequence[str] = (),
        budget_usd: float | None = None,
        max_steps: int | None = None,
        records: SharedRecords | None = None,
    ) -> None:
        """Skills of ``catalog`` for ``agent`` (the host, without the skills tools).

        ``servers`` are the MCP servers the host is connected to (for
        ``dependencies.mcp-servers``); ``budget_usd`` and ``max_steps`` bound
        every subagent run of a skill; ``records`` is where a paused one
        waits for its decision (``SubagentHandle(records=…)``: a store every
        worker shares; this process's memory by default).
        """
        self.catalog = catalog
        self.agent = agent
        self.servers = tuple(servers)
        self._budget_usd = budget_usd
        self._max_steps = max_steps
        self._records = records
        self._handles: dict[str, SubagentHandle] = {}
        self._catalog_tools = catalog.tools(needs=self.preflight())

    def preflight(self) -> dict[str, SkillNeeds]:
        """Skills that need tools or MCP servers the host lacks, by name."""
        return self.catalog.preflight(self.agent.tool_names, self.servers)

    def tools(self) -> list[Tool]:
        """``skills_list``, ``skills_read`` and ``skills_run``."""
        return [*self._catalog_tools, self._run_tool()]

    def host(self) -> Agent:
        """The host agent with the skills tools added, its tools under inline ``allowed-tools``."""
        own = [t for n in self.agent.tool_names if (t := self.agent.tool(n)) is not None]
        skills = [self._activating(t) if t.name == _READ else t for t in self.tools()]
        return dataclasses.replace(
            self.agent,
            tools=[*(_limited(t) for t in own), *(_limited(t) for t in skills)],
            allowed_tools=None,
        )

    def _activating(self, reader: Tool) -> Tool:
        """``skills_read`` that makes an inline skill with ``allowed-tools`` active."""
        catalog = self.catalog

        async def read(**kwargs: Any) -> ToolOutput:
            ctx = kwargs.pop(_CTX)
            output = await reader.call({}, None, kwargs=kwargs)
            skill = catalog.get(str(kwargs.get("name", "")))
            if (
                not output.is_error
                and isinstance(ctx, ToolContext)
                and skill is not None
                and skill.execution == "inline"
                and skill.allowed_tools is not None
                and catalog.is_instructions(str(kwargs.get("path", SKILL_FILE)))
            ):
                ctx.cache[_ACTIVE] = (skill.name, skill.allowed_tools)
                allowed = ", ".join(skill.allowed_tools) or "none"
                note = f"\n\n[skill {skill.name!r} is active: until this turn ends only "
                output = dataclasses.replace(
                    output, content=output.content + note + f"these tools run: {allowed}]"
                )
            return output

        return dataclasses.replace(reader, fn=read, is_async=True, ctx_param=_CTX)

    def handle(self, name: str) -> SubagentHandle:
        """The subagent that runs skill ``name`` (resume its paused runs through it).

        Raises:
            SkillNotFound: No skill has this name.
            ConfigError: The skill is not ``execution: subagent``.
        """
        skill = self.catalog.get(name)
        if skill is None:
            raise SkillNotFound(f"no skill named {name!r}", name=name)
        if skill.execution != "subagent":
            raise ConfigError(f"skill {name!r} is inline: it is read, not run")
        handle = self._handles.get(name)
        if handle is None:
            handle = self._handles[name] = self._subagent(skill)
        return handle

    def _subagent(self, skill: Skill) -> SubagentHandle:
        base = self.agent
        own = [t for n in base.tool_names if (t := base.tool(n)) is not None and n != _RUN]
        if skill.allowed_tools is not None:
            own = [t for t in own if matches_any(skill.allowed_tools, t.name)]
        reader = next(t for t in self._catalog_tools if t.name == _READ)
        tools = [*(t for t in own if t.name != _READ), reader]
        body = self.catalog.read(skill.name, 0, max(1, skill.body_bytes)).text
        instructions = (
            f"You are running the skill {skill.name!r}: {skill.description}\n"
            f"Follow it. Files of the skill are read with {_READ}(name={skill.name!r}, "
            f"path=...).\n\n{body}"
        )
        agent = dataclasses.replace(
            base,
            name=_safe(f"skill-{skill.name}"),
            instructions=instructions,
            tools=tools,
            allowed_tools=[t.name for t in tools],
            skill_recipe=None,
        )
        return SubagentHandle(
            agent,
            name=_safe(f"skill-{skill.name}"),
            description=skill.description,
            budget_usd=self._budget_usd,
            max_steps=self._max_steps,
            records=self._records,
        )

    def _run_tool(self) -> Tool:
        runner = self

        async def skills_run(name: str, task: str, ctx: ToolContext) -> ToolOutput:
            skill = runner.catalog.get(name)
            if skill is None:
                return ToolOutput(content=f"no skill named {name!r}", is_error=True)
            if skill.execution != "subagent":
                return ToolOutput(
                    content=f"skill {name!r} is inline: read it with {_READ} and follow it",
                    is_error=True,
                )
            needs = runner.preflight().get(name)
            if needs is not None:
                return ToolOutput(content=str(needs), is_error=True)
            result = await runner.handle(name).run(task, ctx)
            return result.output()

        schema = _RunInput.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return Tool(
            name=_RUN,
            description=(
                "Run a skill whose execution is 'subagent' on a task; it works with only "
                "the tools the skill allows and returns its final answer."
            ),
            input_schema=schema,
            policy=ToolPolicy(read_only=True, concurrency_safe=False),
            fn=skills_run,
            input_model=_RunInput,
            ctx_param="ctx",
            is_async=True,
            meta={"skills": "run"},
        )
