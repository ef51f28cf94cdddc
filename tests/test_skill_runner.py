"""Skills acting on their settings: subagent execution, allowed-tools, dependency preflight."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mainspring import (
    Agent,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolResult,
    tool,
)
from mainspring.skill_runner import SkillRunner
from mainspring.skills import SkillCatalog
from tests.helpers import send

pytestmark = pytest.mark.anyio

RAN: list[str] = []


@tool(read_only=True)
def lookup(key: str) -> str:
    """Look a key up."""
    RAN.append(f"lookup {key}")
    return f"value of {key}"


@tool(permission="auto")
def delete_all() -> str:
    """Delete everything."""
    RAN.append("delete_all")
    return "deleted"


def write_skill(root: Path, name: str, front: str, body: str = "Do the steps.\n") -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: The {name} skill.\n{front}---\n{body}"
    )


@pytest.fixture
def catalog(tmp_path: Path) -> SkillCatalog:
    write_skill(tmp_path, "finder", "execution: subagent\nallowed-tools: [lookup]\n", "Find it.\n")
    write_skill(tmp_path, "reader", "allowed-tools: [lookup]\n")
    write_skill(
        tmp_path,
        "gitty",
        "execution: subagent\ndependencies:\n  tools: [lookup, 'mcp__git__*']\n"
        "  mcp-servers: [git]\n",
    )
    write_skill(tmp_path, "shelly", "execution: subagent\nallowed-tools: [shell]\n")
    RAN.clear()
    return SkillCatalog([tmp_path])


def base(model: ScriptedModel) -> Agent:
    return Agent(model=model, tools=[lookup, delete_all])


async def test_a_subagent_skill_runs_with_only_its_allowed_tools(catalog: SkillCatalog) -> None:
    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=[ScriptedCall("skills_run", {"name": "finder", "task": "find k"})]
            ),
            # the skill's subagent: tries a tool it is not allowed, then the allowed one
            ScriptedResponse(
                tool_calls=[ScriptedCall("delete_all", {}), ScriptedCall("lookup", {"key": "k"})]
            ),
            "found: value of k",
            "the skill found it",
        ]
    )
    runner = SkillRunner(catalog, agent=base(model))
    events = await send(Session(runner.host()), "use the finder skill")
    result = next(e for e in events if isinstance(e, ToolResult) and e.name == "skills_run")
    assert not result.is_error, result.content
    assert result.content == "found: value of k"
    assert RAN == ["lookup k"], "the tool outside allowed-tools never ran"
    sub = model.requests[1]
    assert {t.name for t in sub.tools} == {"lookup", "skills_read"}
    assert "Find it." in str(sub.system)
    sub_results = model.requests[2].messages[-1].tool_results_parts
    denied = next(r for r in sub_results if "delete_all" in r.content or r.is_error)
    assert denied.is_error


async def test_an_inline_skill_is_read_not_run(catalog: SkillCatalog) -> None:
    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=[ScriptedCall("skills_run", {"name": "reader", "task": "x"})]
            ),
            "ok",
        ]
    )
    events = await send(Session(SkillRunner(catalog, agent=base(model)).host()), "go")
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "inline: read it with skills_read" in result.content


async def test_preflight_reports_missing_tools_and_servers_and_runs_nothing(
    catalog: SkillCatalog,
) -> None:
    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=[
                    ScriptedCall("skills_list", {}),
                    ScriptedCall("skills_run", {"name": "gitty", "task": "x"}),
                ]
            ),
            "ok",
        ]
    )
    runner = SkillRunner(catalog, agent=base(model), servers=["time"])
    needs = runner.preflight()
    assert set(needs) == {"gitty", "shelly"}
    assert needs["gitty"].missing_tools == ("mcp__git__*",)
    assert needs["gitty"].missing_servers == ("git",)
    assert needs["shelly"].missing_tools == ("shell",)
    events = await send(Session(runner.host()), "go")
    results = {e.name: e for e in events if isinstance(e, ToolResult)}
    listed = {s["name"]: s for s in json.loads(results["skills_list"].content)["skills"]}
    assert "unavailable" not in listed["finder"]
    assert "mcp__git__*" in listed["gitty"]["unavailable"]
    assert "MCP servers git" in listed["gitty"]["unavailable"]
    run = results["skills_run"]
    assert run.is_error
    assert run.content == (
        "skill 'gitty' needs tools mcp__git__* and MCP servers git (not available here)"
    )
    assert len(model.requests) == 2, "no subagent was started"
    connected = SkillRunner(catalog, agent=base(model), servers=["git"])
    assert connected.preflight()["gitty"].missing_servers == ()


def test_handle_refuses_unknown_and_inline_skills(catalog: SkillCatalog) -> None:
    from mainspring.errors import ConfigError, SkillNotFound

    runner = SkillRunner(catalog, agent=base(ScriptedModel(["x"])))
    with pytest.raises(SkillNotFound):
        runner.handle("nope")
    with pytest.raises(ConfigError, match="inline"):
        runner.handle("reader")
    assert runner.handle("finder") is runner.handle("finder")


async def test_an_active_inline_skill_limits_the_rest_of_the_turn(catalog: SkillCatalog) -> None:
    model = ScriptedModel(
        [
            ScriptedResponse(tool_calls=[ScriptedCall("skills_read", {"name": "reader"})]),
            ScriptedResponse(
                tool_calls=[ScriptedCall("delete_all", {}), ScriptedCall("lookup", {"key": "k"})]
            ),
            "done",
            ScriptedResponse(tool_calls=[ScriptedCall("delete_all", {})]),
            "done again",
        ]
    )
    session = Session(SkillRunner(catalog, agent=base(model)).host())
    events = await send(session, "follow the reader skill")
    results = {e.name: e for e in events if isinstance(e, ToolResult)}
    assert "skill 'reader' is active" in results["skills_read"].content
    assert results["delete_all"].is_error
    assert "allows only these tools: lookup" in results["delete_all"].content
    assert RAN == ["lookup k"], "the tool outside allowed-tools did not run"
    later = await send(session, "now delete")
    assert next(e for e in later if isinstance(e, ToolResult)).content == "deleted"
    assert RAN == ["lookup k", "delete_all"], "a new turn has no active skill"


async def test_reading_a_skills_resource_or_a_skill_without_allowed_tools_limits_nothing(
    catalog: SkillCatalog, tmp_path: Path
) -> None:
    (tmp_path / "reader" / "notes.md").write_text("notes")
    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=[
                    ScriptedCall("skills_read", {"name": "reader", "path": "notes.md"}),
                    ScriptedCall("skills_read", {"name": "gitty"}),
                ]
            ),
            ScriptedResponse(tool_calls=[ScriptedCall("delete_all", {})]),
            "done",
        ]
    )
    events = await send(Session(SkillRunner(catalog, agent=base(model)).host()), "go")
    assert RAN == ["delete_all"]
    assert not any("is active" in e.content for e in events if isinstance(e, ToolResult))
