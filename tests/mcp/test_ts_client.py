"""The MCP server driven by a second published client: the official TypeScript SDK, in node.

The SDK is installed once with npm into ``tests/.cache/node-mcp`` (ignored by
git; one worker installs it, under a file lock: ``tests/npm.py``); without node
and npm, or without the package, the test skips (under ``MAINSPRING_CI=1`` such
a skip fails).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

pytest.importorskip("mcp")

from mainspring import Agent, ScriptedModel
from mainspring.mcp.server import build_mcp_server, serve_http
from tests.mcp.test_server import add, crunch, delete_account, deleted
from tests.npm import npm_install

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HERE = Path(__file__).parent
CACHE = HERE.parent / ".cache" / "node-mcp"
SDK = CACHE / "node_modules" / "@modelcontextprotocol" / "sdk"
NEEDS = "needs node/npm package @modelcontextprotocol/sdk"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def ts_sdk() -> Path:
    why_not = npm_install(CACHE, "@modelcontextprotocol/sdk", SDK / "package.json")
    if why_not is not None:
        pytest.skip(f"{NEEDS} ({why_not})")
    return SDK


async def test_the_typescript_sdk_client_lists_calls_and_approves(ts_sdk: Path) -> None:
    deleted.clear()
    agent = Agent(model=ScriptedModel([]), name="t", tools=[add, crunch, delete_account])
    server = build_mcp_server(agent, expose_confirm=True)
    node = shutil.which("node")
    assert node is not None
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            port = await tg.start(
                lambda task_status: serve_http(server, port=0, task_status=task_status)
            )
            url = f"http://127.0.0.1:{port}/mcp"
            done = await anyio.to_thread.run_sync(
                lambda: subprocess.run(
                    [node, str(HERE / "ts_client.mjs"), str(ts_sdk), url],
                    capture_output=True,
                    text=True,
                    check=False,
                    timeout=90,
                )
            )
            tg.cancel_scope.cancel()
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["server"]["name"] == "mainspring"
    tools = {t["name"]: t for t in seen["tools"]}
    assert set(tools) == {"add", "crunch", "delete_account"}
    assert tools["add"]["readOnly"] is True
    assert tools["delete_account"]["destructive"] is True
    assert json.loads(seen["add"]["content"][0]["text"]) == {"sum": 5}
    assert seen["crunch"]["content"][0]["text"] == "crunched"
    assert [p["message"] for p in seen["progress"]] == ["loading", "crunching", "done"]
    assert seen["approved"]["content"][0]["text"] == "deleted acme"
    assert seen["refused"]["isError"] is True
    assert "did not approve" in seen["refused"]["content"][0]["text"]
    assert deleted == ["acme"], "the refused call never ran"
    assert len(seen["asked"]) == 2 and "delete_account needs your approval" in seen["asked"][0]
    assert seen["invalid"]["isError"] is True and "a" in seen["invalid"]["content"][0]["text"]
    assert "no_such_tool" in seen["unknown"]
