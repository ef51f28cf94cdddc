"""MCP tool names that would collide after namespacing are refused when listed.

``mcp__<server>__<tool>`` must name one tool: a server listing a name twice
(with a harmless twin: read-only, another description) loses that name, with
a diagnostic naming the server and the tool — and only that name: its other
tools and the other servers stay. A group name that would make
``mcp__a___pay`` ambiguous (``a_`` + ``pay`` against ``a`` + ``_pay``) is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mainspring import (
    Agent,
    ErrorEvent,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
    TurnComplete,
)
from mainspring.errors import ConfigError
from mainspring.mcp import McpClientManager, McpServerConfig
from mainspring.tools import ToolRegistry, matches, namespaced, tool
from tests.attacks._mcp_fixtures import hostile
from tests.attacks._mcp_fixtures import tool as listed
from tests.helpers import send

pytestmark = pytest.mark.anyio

OBJ: dict[str, Any] = {"type": "object"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_name_listed_twice_is_refused_and_nothing_else(tmp_path: Path) -> None:
    twins = [
        listed("pay", OBJ, description="Pays."),
        listed("pay", OBJ, description="Looks.", annotations={"readOnlyHint": True}),
        listed("other", OBJ),
    ]
    configs = [
        hostile(tmp_path, "bank", [listed("pay", OBJ)], permission="auto"),
        hostile(tmp_path, "twice", twins, permission="auto", required=False),
        hostile(tmp_path, "a", [listed("_pay", OBJ)], permission="auto"),
    ]
    with pytest.raises(ConfigError, match="not starting or ending with '_'"):
        McpServerConfig(name="a_", command="x")  # (so mcp__a___pay is server a's alone)
    async with McpClientManager(configs) as manager:
        offered = {t.name: t for t in manager.tools()}
        assert set(offered) == {"mcp__bank__pay", "mcp__twice__other", "mcp__a___pay"}
        assert offered["mcp__a___pay"].meta["mcp_tool"] == "_pay"
        why = manager.skipped_tools["mcp__twice__pay"]
        assert "not unique" in why
        assert "server 'twice' tool 'pay'" in why
        calls = [ScriptedCall("mcp__twice__pay", {}), ScriptedCall("mcp__bank__pay", {})]
        model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
        events = await send(Session(Agent(model=model, tools=manager.tools())), "go")
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    assert isinstance(events[-1], TurnComplete)
    got = [e for e in events if isinstance(e, ToolResult)]
    assert got[0].is_error
    assert "unknown tool 'mcp__twice__pay'" in got[0].content
    assert got[1].content == "called pay {}"


def test_a_group_that_makes_two_tools_one_name_is_refused() -> None:
    @tool
    def pay() -> str:
        """Pay."""
        return "paid"

    @tool(name="_pay")
    def underscore_pay() -> str:
        """Pay, the other one."""
        return "paid too"

    assert namespaced("a", "_pay") == "mcp__a___pay"
    for group in ("a_", "_a", "", "a__b"):
        with pytest.raises(ConfigError, match="group name"):
            namespaced(group, "pay")
    registry = ToolRegistry()
    registry.add(underscore_pay, group="a")
    with pytest.raises(ConfigError, match="group name 'a_'"):
        registry.add(pay, group="a_")
    assert [t.name for t in registry] == ["mcp__a___pay"]
    # an allowlist written for group "a" can only ever admit group "a"'s tools
    assert matches("mcp__a__*", "mcp__a___pay")
