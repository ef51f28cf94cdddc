"""An engine's roster: the agents and tools it holds, and which of them a caller reaches.

The :class:`~mainspring.engine.Engine` holds one :class:`Roster`. The roster
knows what was registered (each agent with its export flag, description and
the members it ``uses``; each tool with its export flag; the default agent)
and answers, under the engine's :class:`~mainspring.engine.ManagementPolicy`,
what a caller may see (:meth:`Roster.information`) and call
(:meth:`Roster.callable_tool`, :meth:`Roster.runnable_agent`). Running what it
hands out is the engine's business.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from mainspring.agent import Agent
from mainspring.engine.members import MemberSessions, member_tool
from mainspring.engine.policy import ManagementPolicy
from mainspring.engine.results import EngineInfo
from mainspring.errors import AccessDenied, ConfigError
from mainspring.principals import Caller
from mainspring.tools.define import Tool

__all__ = ["Roster"]


@dataclass(frozen=True, slots=True)
class _Member:
    agent: Agent
    export: bool
    description: str
    uses: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Entry:
    tool: Tool
    export: bool


class Roster:
    """The agents and tools of engine ``engine``; engine agents it ``uses`` run in ``members``."""

    def __init__(self, engine: str, members: MemberSessions) -> None:
        """An empty roster of engine ``engine``."""
        self.engine = engine
        self._members = members
        self._agents: dict[str, _Member] = {}
        self._tools: dict[str, _Entry] = {}
        self._default: str | None = None

    @property
    def tools(self) -> list[Tool]:
        """Every registered tool, exported or not."""
        return [e.tool for e in self._tools.values()]

    def add_agent(
        self, agent: Agent, *, export: bool, default: bool, description: str, uses: Sequence[str]
    ) -> None:
        """Register ``agent`` (see :meth:`Engine.add_agent`)."""
        self._check_new(agent.name)
        self._agents[agent.name] = _Member(agent, export, description, tuple(uses))
        if default or self._default is None:
            self._default = agent.name

    def add_tool(self, tool: Tool, *, export: bool) -> None:
        """Register ``tool`` (see :meth:`Engine.add_tool`)."""
        self._check_new(tool.name)
        self._tools[tool.name] = _Entry(tool, export)

    def set_default(self, agent: str) -> None:
        """Make ``agent`` the default one."""
        if agent not in self._agents:
            raise ConfigError(f"engine {self.engine!r} has no agent {agent!r}")
        self._default = agent

    def _check_new(self, name: str) -> None:
        if name in self._agents or name in self._tools:
            raise ConfigError(f"engine {self.engine!r} already has a member {name!r}")

    def information(self, caller: Caller, policy: ManagementPolicy) -> EngineInfo:
        """What ``caller`` may see under ``policy`` (see :meth:`Engine.information`)."""
        policy.check_caller(caller, self.engine)
        manager = policy.is_manager(caller)
        agents: tuple[dict[str, JsonValue], ...] = tuple(
            {"name": name, "description": m.description or m.agent.instructions[:200]}
            for name, m in self._agents.items()
            if m.export or manager
        )
        tools: tuple[dict[str, JsonValue], ...] = tuple(
            {
                "name": name,
                "description": e.tool.description,
                "input_schema": e.tool.input_schema,
                "read_only": e.tool.policy.read_only,
            }
            for name, e in self._tools.items()
            if e.export or manager
        )
        default = self._default
        if default is not None and not (manager or self._agents[default].export):
            default = None
        return EngineInfo(
            name=self.engine,
            visibility=policy.visibility,
            default_agent=default,
            agents=agents,
            tools=tools,
        )

    def callable_tool(self, caller: Caller, policy: ManagementPolicy, name: str) -> Tool:
        """Tool ``name``, if ``caller`` may call it.

        Raises:
            AccessDenied: The caller may not call it (or it does not exist).
        """
        policy.check_caller(caller, self.engine)
        entry = self._tools.get(name)
        if entry is None or not (entry.export or policy.is_manager(caller)):
            raise AccessDenied(f"engine {self.engine!r} exports no tool {name!r}", target=name)
        return entry.tool

    def runnable_agent(self, caller: Caller, policy: ManagementPolicy, name: str | None) -> Agent:
        """Agent ``name`` (the default one) as it runs, if ``caller`` may run it.

        Raises:
            AccessDenied: The caller may not run it (or it does not exist).
            ConfigError: The engine has no agents, or its agents use each other in a cycle.
        """
        policy.check_caller(caller, self.engine)
        name = name or self._default
        if name is None:
            raise ConfigError(f"engine {self.engine!r} has no agents")
        member = self._agents.get(name)
        if member is None or not (member.export or policy.is_manager(caller)):
            raise AccessDenied(f"engine {self.engine!r} exports no agent {name!r}", target=name)
        return self._runnable(member)

    def agent(self, name: str) -> Agent | None:
        """Agent ``name`` as it runs (no access check: a decision's run was admitted)."""
        member = self._agents.get(name)
        return None if member is None else self._runnable(member)

    def _runnable(self, member: _Member, within: tuple[str, ...] = ()) -> Agent:
        """``member``'s agent with the engine tools and agents it ``uses`` added."""
        agent = member.agent
        if not member.uses:
            return agent
        if agent.name in within:
            raise ConfigError(f"agents use each other in a cycle: {' -> '.join(within)}")
        extra: list[Tool] = []
        for name in member.uses:
            if name in self._tools:
                extra.append(self._tools[name].tool)
            elif name in self._agents:
                sub = self._agents[name]
                described = sub.description or f"Ask the {name} agent."
                runnable = self._runnable(sub, (*within, agent.name))
                extra.append(member_tool(runnable, self._members, described))
            else:
                raise ConfigError(
                    f"agent {agent.name!r} uses {name!r}, which engine {self.engine!r} lacks"
                )
        own = [t for n in agent.tool_names if (t := agent.tool(n)) is not None]
        return dataclasses.replace(agent, tools=[*own, *extra], allowed_tools=None)
