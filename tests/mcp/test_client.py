"""McpClientManager against real PyPI MCP servers and tiny faulty ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from mainspring import (
    Agent,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
    ToolProgress,
    ToolResult,
)
from mainspring.errors import ConfigError
from mainspring.mcp import (
    ElicitAnswer,
    McpClientManager,
    McpElicitation,
    McpSampling,
    McpServerConfig,
    McpStartupError,
)
from tests.helpers import send

pytestmark = pytest.mark.anyio

FAKE = str(Path(__file__).with_name("_fake_server.py"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split(") ")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def children() -> set[int]:
    """Live direct children of this process (from /proc)."""
    found: set[int] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().split(") ")[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def fake(tmp_path: Path, name: str, mode: str = "ok", **kw: object) -> McpServerConfig:
    pidfile = tmp_path / f"{name}.pids"
    return McpServerConfig(
        name=name,
        command=sys.executable,
        args=(FAKE, mode, str(pidfile)),
        **kw,  # type: ignore[arg-type]  # test shorthand
    )


def pids(tmp_path: Path, name: str) -> list[int]:
    path = tmp_path / f"{name}.pids"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
    }
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env, timeout=60)
    (repo / "a.txt").write_text("hello\n")
    subprocess.run(["git", "-C", str(repo), "add", "a.txt"], check=True, env=env, timeout=60)
    subprocess.run(
        ["git", "-C", str(repo), "commit", "-q", "-m", "first commit"],
        check=True,
        env=env,
        timeout=60,
    )
    (repo / "b.txt").write_text("untracked\n")
    return repo


@pytest.fixture
async def real(git_repo: Path) -> AsyncIterator[McpClientManager]:
    before = children()
    configs = [
        McpServerConfig(name="time", command=sys.executable, args=("-m", "mcp_server_time")),
        McpServerConfig(
            name="git",
            command=sys.executable,
            args=("-m", "mcp_server_git", "--repository", str(git_repo)),
            allow=("git_status", "git_log", "git_diff*"),
            deny=("git_diff_staged",),
        ),
    ]
    async with McpClientManager(configs) as manager:
        assert children() - before, "servers run as child processes"
        yield manager
    assert children() <= before, "no child process left behind"


async def test_real_servers_tools_named_filtered_and_meta_kept(real: McpClientManager) -> None:
    names = {t.name for t in real.tools()}
    assert "mcp__time__get_current_time" in names
    assert "mcp__time__convert_time" in names
    git = {n for n in names if n.startswith("mcp__git__")}
    assert git == {
        "mcp__git__git_status",
        "mcp__git__git_log",
        "mcp__git__git_diff_unstaged",
        "mcp__git__git_diff",
    }
    tool = next(t for t in real.tools() if t.name == "mcp__time__get_current_time")
    assert tool.meta["mcp_server"] == "time"
    assert tool.meta["name"] == "get_current_time"
    assert "timezone" in str(tool.input_schema)
    assert tool.description


async def test_real_git_calls(real: McpClientManager, git_repo: Path) -> None:
    status = await real.call_tool("git", "git_status", {"repo_path": str(git_repo)})
    assert not status.is_error, status.content
    assert "b.txt" in status.content
    log = await real.call_tool("git", "git_log", {"repo_path": str(git_repo)})
    assert "first commit" in log.content


async def test_real_call_through_session(real: McpClientManager) -> None:
    model = ScriptedModel(
        [
            ScriptedResponse(
                tool_calls=[ScriptedCall("mcp__time__get_current_time", {"timezone": "UTC"})]
            ),
            "done",
        ]
    )
    session = Session(Agent(model=model, tools=real.tools()))
    events = await send(session, "what time is it?")
    result = next(e for e in events if isinstance(e, ToolResult))
    assert not result.is_error, result.content
    assert "UTC" in result.content
    assert "datetime" in result.content


async def test_required_server_never_answering_fails_start(tmp_path: Path) -> None:
    before = children()
    manager = McpClientManager(
        [fake(tmp_path, "ok"), fake(tmp_path, "mute", "silent", startup_timeout=0.5)]
    )
    with pytest.raises(McpStartupError, match=r"'mute'.*0\.5 s") as info:
        await manager.start()
    assert info.value.server == "mute"
    assert children() <= before
    assert not any(alive(p) for p in pids(tmp_path, "mute") + pids(tmp_path, "ok"))


async def test_a_failed_start_shows_exit_status_and_stderr_tail(tmp_path: Path) -> None:
    before = children()
    manager = McpClientManager([fake(tmp_path, "ok"), fake(tmp_path, "broken", "fail")])
    with pytest.raises(McpStartupError) as info:
        await manager.start()
    message = str(info.value)
    assert "'broken' failed to start" in message
    assert "exit status 3" in message
    assert message.endswith("boom: MAINSPRING_FAKE_KEY is not set")
    assert len(message) < 4096 + 300, "only the tail of 100 KB of stderr"
    assert "[mainspring]" not in message
    assert children() <= before


async def test_a_missing_command_is_a_clear_start_failure(tmp_path: Path) -> None:
    config = McpServerConfig(name="gone", command="mainspring-no-such-server", required=False)
    async with McpClientManager([config, fake(tmp_path, "ok")]) as manager:
        assert manager.servers == ["ok"]
        failure = manager.failures["gone"]
    assert "exit status 127" in failure
    assert "mainspring-no-such-server" in failure


async def test_optional_server_never_answering_is_skipped(tmp_path: Path) -> None:
    configs = [
        fake(tmp_path, "ok"),
        fake(tmp_path, "mute", "silent", startup_timeout=0.5, required=False),
    ]
    async with McpClientManager(configs) as manager:
        assert "mute" in manager.failures
        assert manager.servers == ["ok"]
        assert all(t.name.startswith("mcp__ok__") for t in manager.tools())
    assert not any(alive(p) for p in pids(tmp_path, "mute") + pids(tmp_path, "ok"))


async def test_server_exiting_mid_call_then_reconnects(tmp_path: Path) -> None:
    async with McpClientManager([fake(tmp_path, "f", "die")]) as manager:
        first = await manager.call_tool("f", "crash", {})
        assert first.is_error
        assert "failed" in first.content
        again = await manager.call_tool("f", "crash", {})
        assert not again.is_error, again.content
        assert again.content == "survived"
        assert len(pids(tmp_path, "f")) == 2
    assert not any(alive(p) for p in pids(tmp_path, "f"))


async def test_big_result_truncated_raw_kept(tmp_path: Path) -> None:
    manager = McpClientManager([fake(tmp_path, "f", output_budget=1000)], audit_chars=6_000_000)
    async with manager:
        out = await manager.call_tool("f", "big", {})
        assert out.content.startswith("x" * 1000)
        assert "[truncated: showing 1000 of 5000000 characters" in out.content
        assert "the full result is kept for audit" in out.content
        assert len(out.content) < 1200
        raw = manager.raw_results[-1]
        assert raw.truncated
        assert raw.complete
        assert raw.size == 5_000_000
        assert raw.tool == "big"
        block = raw.result.content[0]
        assert getattr(block, "text", "") == "x" * 5_000_000


async def test_malformed_schema_is_reported_not_fatal(tmp_path: Path) -> None:
    async with McpClientManager([fake(tmp_path, "f", "bad_schema")]) as manager:
        names = {t.name for t in manager.tools()}
        assert "mcp__f__echo" in names
        assert "mcp__f__broken" not in names
        assert "invalid input schema" in manager.skipped_tools["mcp__f__broken"]


async def test_hanging_call_times_out_and_session_goes_on(tmp_path: Path) -> None:
    # The bound is the subject; it is also the echo's, so it leaves a busy machine room.
    async with McpClientManager([fake(tmp_path, "f", call_timeout=5)]) as manager:
        with anyio.fail_after(60):
            out = await manager.call_tool("f", "hang", {})
        assert out.is_error
        assert "timed out after 5 s" in out.content
        echo = await manager.call_tool("f", "echo", {"text": "still here"})
        assert echo.content == "still here"


async def test_hang_through_engine(tmp_path: Path) -> None:
    async with McpClientManager(
        [fake(tmp_path, "f", call_timeout=5, permission="auto")]  # (the echo's bound too)
    ) as manager:
        calls = [ScriptedCall("mcp__f__hang", {}), ScriptedCall("mcp__f__echo", {"text": "ok"})]
        model = ScriptedModel([ScriptedResponse(tool_calls=calls), "done"])
        events = await send(Session(Agent(model=model, tools=manager.tools())), "go")
        results = {e.name: e for e in events if isinstance(e, ToolResult)}
        assert results["mcp__f__hang"].is_error
        assert results["mcp__f__echo"].content == "ok"


async def test_env_is_minimal_unless_inherited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAINSPRING_SECRET_TOKEN", "hush")
    configs = [
        fake(tmp_path, "plain", env={"GIVEN_VAR": "1"}),
        fake(tmp_path, "full", inherit_env=True),
    ]
    async with McpClientManager(configs) as manager:
        plain = (await manager.call_tool("plain", "env", {})).content.split()
        full = (await manager.call_tool("full", "env", {})).content.split()
    assert "GIVEN_VAR" in plain
    assert "PATH" in plain
    assert "MAINSPRING_SECRET_TOKEN" not in plain
    assert "MAINSPRING_SECRET_TOKEN" in full


async def test_images_annotations_and_list_changed(tmp_path: Path) -> None:
    async with McpClientManager([fake(tmp_path, "f", deny=("crash",))]) as manager:
        names = {t.name for t in manager.tools()}
        assert "mcp__f__crash" not in names
        flagged = next(t for t in manager.tools() if t.name == "mcp__f__flagged")
        assert flagged.policy.read_only
        assert flagged.meta["annotations"] == {"readOnlyHint": True, "title": "Flagged"}
        pic = await manager.call_tool("f", "picture", {})
        assert pic.content == "see"
        assert pic.images[0].media_type == "image/png"
        assert pic.images[0].data == "iVBORw0KGgo="
        await manager.call_tool("f", "add_tool", {})
        for _ in range(3000):  # (60 s: only a hang) the refresh runs on the notification
            if "mcp__f__added" in {t.name for t in manager.tools()}:
                break
            await anyio.sleep(0.02)
        else:
            pytest.fail("tool list not refreshed after tools/list_changed")


async def test_prompts(tmp_path: Path) -> None:
    async with McpClientManager([fake(tmp_path, "f")]) as manager:
        prompts = await manager.list_prompts("f")
        assert [(p.name, p.arguments) for p in prompts] == [("greet", (("who", True),))]
        assert await manager.get_prompt("f", "greet", {"who": "Ada"}) == "Greet Ada warmly."


def test_config_validation() -> None:
    with pytest.raises(ConfigError):
        McpServerConfig(name="a__b", command="x")
    with pytest.raises(ConfigError):
        McpServerConfig(name="h", transport="http")
    with pytest.raises(ConfigError):
        McpServerConfig(name="t", command="x", call_timeout=0)
    with pytest.raises(ConfigError, match="unique"):
        McpClientManager([McpServerConfig(name="t", command="x")] * 2)


async def test_namespacing_is_injective(tmp_path: Path) -> None:
    for bad in ("a_", "_a"):
        with pytest.raises(ConfigError, match="not starting or ending with '_'"):
            fake(tmp_path, bad)
    async with McpClientManager([fake(tmp_path, "a_b"), fake(tmp_path, "a")]) as manager:
        names = [t.name for t in manager.tools()]
    assert len(names) == len(set(names))
    assert {"mcp__a_b__echo", "mcp__a__echo"} <= set(names)


async def test_a_name_listed_twice_is_refused_and_the_rest_stays(tmp_path: Path) -> None:
    before = children()
    async with McpClientManager([fake(tmp_path, "ok"), fake(tmp_path, "twice", "dup")]) as manager:
        names = {t.name for t in manager.tools()}
        assert "mcp__twice__echo" not in names
        assert {"mcp__ok__echo", "mcp__twice__count"} <= names
        why = manager.skipped_tools["mcp__twice__echo"]
        assert "server 'twice' tool 'echo'" in why
        assert "not unique" in why
    assert children() <= before


RICH = str(Path(__file__).with_name("_rich_server.py"))


def rich(**kw: object) -> McpServerConfig:
    return McpServerConfig(name="rich", command=sys.executable, args=(RICH,), **kw)  # type: ignore[arg-type]  # test shorthand


async def test_server_progress_becomes_tool_progress_events() -> None:
    async with McpClientManager([rich()]) as manager:
        model = ScriptedModel(
            [ScriptedResponse(tool_calls=[ScriptedCall("mcp__rich__crunch", {"steps": 2})]), "ok"]
        )
        events = await send(Session(Agent(model=model, tools=manager.tools())), "go")
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert [(p.name, p.message, p.pct) for p in progress] == [
        ("mcp__rich__crunch", "step 1", 50.0),
        ("mcp__rich__crunch", "step 2", 100.0),
        ("mcp__rich__crunch", "3", None),
    ]
    start = next(e for e in events if e.type == "tool_start")
    assert {p.tool_use_id for p in progress} == {start.tool_use_id}
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.content == "crunched 2"
    assert result.tool_use_id == start.tool_use_id
    assert "__mainspring" not in str(start.input)


async def test_progress_from_a_direct_call_and_hostile_numbers() -> None:
    seen: list[tuple[str, float | None]] = []
    async with McpClientManager([rich()]) as manager:
        out = await manager.call_tool(
            "rich", "crunch", {"steps": 1}, progress=lambda m, p: seen.append((m, p))
        )
        assert out.content == "crunched 1"
        silent = await manager.call_tool("rich", "crunch", {"steps": 1})
        assert silent.content == "crunched 1"
        assert seen == [("step 1", 100.0), ("2", None)]
        seen.clear()
        await manager.call_tool("rich", "wild", {}, progress=lambda m, p: seen.append((m, p)))
    assert seen == [("x" * 500, 100.0), ("-1 of 2", 0.0), ("1 of 0", None)]


async def test_read_only_results_are_cached_by_canonical_arguments(tmp_path: Path) -> None:
    config = fake(tmp_path, "f", cache_ttl=60, cache_entries=2)
    async with McpClientManager([config]) as manager:
        first = await manager.call_tool("f", "count", {"a": 1, "b": 2})
        assert first.content == '1 {"a": 1, "b": 2}'
        again = await manager.call_tool("f", "count", {"b": 2, "a": 1})
        assert again.content == first.content, "same arguments as JSON, same entry"
        other = await manager.call_tool("f", "count", {"a": 2})
        assert other.content.startswith("2 ")
        echo = [(await manager.call_tool("f", "echo", {"text": "x"})).content for _ in range(2)]
        assert echo == ["x", "x"]  # not read-only: never cached (the server answered twice)
        await manager.call_tool("f", "count", {"a": 3})  # a third entry evicts the oldest
        assert (await manager.call_tool("f", "count", {"a": 1, "b": 2})).content.startswith("4 ")
        await manager.call_tool("f", "add_tool", {})  # announces tools/list_changed
        for _ in range(3000):  # (60 s: only a hang)
            if "mcp__f__added" in {t.name for t in manager.tools()}:
                break
            await anyio.sleep(0.02)
        after = await manager.call_tool("f", "count", {"a": 1, "b": 2})
        assert after.content.startswith("5 "), "the list changed: the cache was dropped"


async def test_the_cache_expires_and_is_off_by_default(tmp_path: Path) -> None:
    async with McpClientManager(
        [fake(tmp_path, "f", cache_ttl=0.05), fake(tmp_path, "g")]
    ) as manager:
        first = await manager.call_tool("f", "count", {})
        await anyio.sleep(0.1)
        assert (await manager.call_tool("f", "count", {})).content != first.content
        plain = [(await manager.call_tool("g", "count", {})).content for _ in range(2)]
        assert plain[0] != plain[1]


def test_cache_settings_are_validated() -> None:
    for bad in ({"cache_ttl": -1.0}, {"cache_entries": -1}, {"cache_ttl": float("nan")}):
        with pytest.raises(ConfigError, match="cache_ttl and cache_entries"):
            McpServerConfig(name="c", command="x", **bad)


async def test_task_only_tools_are_not_offered(tmp_path: Path) -> None:
    async with McpClientManager([fake(tmp_path, "f")]) as manager:
        names = {t.name for t in manager.tools()}
        assert "mcp__f__as_task" not in names
        assert "MCP tasks" in manager.skipped_tools["mcp__f__as_task"]
        assert "mcp__f__maybe_task" in names
        out = await manager.call_tool("f", "maybe_task", {})
        assert out.content == "ran plainly"


async def test_resources_are_tools_the_model_can_call() -> None:
    async with McpClientManager([rich(output_budget=1000)]) as manager:
        tools = {t.name: t for t in manager.tools()}
        assert {"mcpr__rich__list", "mcpr__rich__read"} <= set(tools)
        assert tools["mcpr__rich__read"].policy.read_only
        link = await manager.call_tool("rich", "find_note", {})
        assert "[resource link: notes://readme (readme); read it with mcpr__rich__read]" in (
            link.content
        )
        model = ScriptedModel(
            [
                ScriptedResponse(tool_calls=[ScriptedCall("mcpr__rich__list", {})]),
                ScriptedResponse(
                    tool_calls=[
                        ScriptedCall("mcpr__rich__read", {"uri": "notes://readme"}),
                        ScriptedCall("mcpr__rich__read", {"uri": "notes://day/monday"}),
                        ScriptedCall("mcpr__rich__read", {"uri": "notes://big"}),
                        ScriptedCall("mcpr__rich__read", {"uri": "notes://logo"}),
                        ScriptedCall("mcpr__rich__read", {"uri": "notes://blob"}),
                        ScriptedCall("mcpr__rich__read", {"uri": "notes://nowhere"}),
                    ]
                ),
                "done",
            ]
        )
        session = Session(Agent(model=model, tools=list(tools.values())))
        events = await send(session, "read the notes")
    results = [e for e in events if isinstance(e, ToolResult)]
    listing = json.loads(results[0].content)
    assert {r["uri"] for r in listing["resources"]} >= {"notes://readme", "notes://logo"}
    assert listing["templates"][0]["uriTemplate"] == "notes://day/{day}"
    # Parallel reads report as they finish; the scripted model numbers its calls in order.
    readme, monday, big, logo, blob, nowhere = sorted(results[1:], key=lambda r: r.tool_use_id)
    assert readme.content == "Read me first."
    assert monday.content == "note of monday"
    assert big.content.startswith("b" * 1000) and "truncated: showing 1000 of 200000" in big.content
    assert "[image notes://logo (image/png)]" in logo.content
    parts = session.messages[-2].tool_results_parts
    assert next(p for p in parts if "notes://logo" in p.content).images[0].media_type == "image/png"
    assert blob.content == "[binary resource notes://blob (application/zip, 64 bytes) not shown]"
    assert nowhere.is_error and "notes://nowhere" in nowhere.content


async def test_resources_can_be_turned_off(tmp_path: Path) -> None:
    async with McpClientManager([rich(resources=False), fake(tmp_path, "f")]) as manager:
        names = {t.name for t in manager.tools()}
    assert not any(n.startswith("mcpr__") for n in names), "off, and the fake has none"


async def test_elicitation_goes_to_the_hosts_handler() -> None:
    asked: list[McpElicitation] = []
    answers = iter(
        [
            ElicitAnswer(action="accept", content={"name": "Ada", "age": 36}),
            ElicitAnswer(action="decline"),
            ElicitAnswer(action="accept", content={"name": {"nested": "no"}}),  # type: ignore[dict-item]  # hostile
        ]
    )

    async def on_elicit(request: McpElicitation) -> ElicitAnswer:
        asked.append(request)
        return next(answers)

    async with McpClientManager([rich(protocol="2025")], on_elicit=on_elicit) as manager:
        assert (await manager.call_tool("rich", "greet", {})).content == "hello Ada (36)"
        assert (await manager.call_tool("rich", "greet", {})).content == "decline"
        assert (await manager.call_tool("rich", "greet", {})).content == "decline"
    assert asked[0].server == "rich" and asked[0].message == "Who are you?"
    assert asked[0].mode == "form"
    assert set(asked[0].requested_schema["properties"]) == {"name", "age"}  # type: ignore[arg-type]  # JSON


async def test_without_a_handler_servers_cannot_elicit_or_sample() -> None:
    async with McpClientManager([rich(protocol="2025")]) as manager:
        greet = await manager.call_tool("rich", "greet", {})
        summary = await manager.call_tool("rich", "summarize", {"text": "long"})
    assert greet.content == "could not ask: Elicitation not supported"
    assert summary.content.startswith("sampling refused")


async def test_sampling_goes_to_the_hosts_model_within_bounds() -> None:
    model = ScriptedModel(["short.", "again."], name="scripted-sampler")
    sampling = McpSampling(model=model, max_tokens=100, max_requests=2)
    async with McpClientManager([rich(protocol="2025")], sampling=sampling) as manager:
        first = await manager.call_tool("rich", "summarize", {"text": "a long text"})
        await manager.call_tool("rich", "summarize", {"text": "more"})
        third = await manager.call_tool("rich", "summarize", {"text": "too many"})
    assert first.content == "scripted-sampler: short."
    request = model.requests[0]
    assert request.settings.max_tokens == 100, "the server asked 5000: capped"
    assert request.system[0].text == "Summarize."
    assert request.messages[0].text == "a long text"
    assert third.content.startswith("sampling refused") and "limit reached" in third.content
    assert sampling.requests == 2
