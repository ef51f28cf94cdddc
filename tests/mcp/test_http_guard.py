"""`mcp serve --http` hardening, over real HTTP on loopback: rebinding, bearer token."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest

from mainspring import Agent, ScriptedModel, tool
from mainspring.errors import ConfigError
from mainspring.mcp.server import build_mcp_server, http_app, is_loopback, serve_http

pytestmark = pytest.mark.anyio

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@tool(read_only=True)
def ping() -> str:
    """Answer pong."""
    return "pong"


def agent() -> Agent:
    return Agent(model=ScriptedModel([]), name="t", tools=[ping])


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


@asynccontextmanager
async def served(
    host: str, token: str | None = None, allowed_hosts: tuple[str, ...] = ()
) -> AsyncIterator[str]:
    async with anyio.create_task_group() as tg:
        port = await tg.start(
            lambda task_status: serve_http(
                build_mcp_server(agent()),
                host=host,
                port=0,
                token=token,
                allowed_hosts=allowed_hosts,
                task_status=task_status,
            )
        )
        try:
            yield f"http://{host}:{port}/mcp"
        finally:
            tg.cancel_scope.cancel()


async def post(url: str, **headers: str) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=10) as client:
        return await client.post(url, json=INIT, headers={**ACCEPT, **headers})


@pytest.mark.parametrize("host", ["127.0.0.2", "[::1]"])
async def test_rebinding_is_refused_on_every_loopback_address(host: str) -> None:
    if host == "[::1]" and not ipv6_loopback():
        pytest.skip("needs an IPv6 loopback interface")
    with anyio.fail_after(20):
        async with served(host) as url:
            assert (await post(url)).status_code == 200
            port = url.rsplit(":", 1)[1].split("/")[0]
            assert (await post(url, Host=f"localhost:{port}")).status_code == 200
            rebound = await post(url, Host=f"evil.example:{port}")
            assert rebound.status_code == 421
            cross = await post(url, Origin="http://evil.example")
            assert cross.status_code == 403
            same = await post(url, Origin=f"http://{host}:{port}")
            assert same.status_code == 200


async def test_allowed_hosts_are_answered_and_cross_site_posts_refused() -> None:
    with anyio.fail_after(20):
        async with served("127.0.0.1", allowed_hosts=("mcp.example.test",)) as url:
            port = url.rsplit(":", 1)[1].split("/")[0]
            assert (await post(url, Host=f"mcp.example.test:{port}")).status_code == 200
            assert (await post(url, Host=f"evil.example:{port}")).status_code == 421
            other = await post(url, Origin="https://mcp.example.test")
            assert other.status_code == 200
            async with httpx2.AsyncClient(timeout=10) as client:
                form = await client.post(
                    url, content=json.dumps(INIT), headers={**ACCEPT, "Content-Type": "text/plain"}
                )
            assert form.status_code == 415
            assert "cross-site" in form.json()["error"]["message"]


async def test_bearer_token_required_when_set() -> None:
    with anyio.fail_after(20):
        async with served("127.0.0.1", token="s3cret") as url:
            missing = await post(url)
            assert missing.status_code == 401
            assert missing.headers["www-authenticate"] == "Bearer"
            assert (await post(url, Authorization="Bearer wrong")).status_code == 401
            right = await post(url, Authorization="Bearer s3cret")
            assert right.status_code == 200
            assert "serverInfo" in right.text


def test_non_loopback_needs_a_token() -> None:
    server = build_mcp_server(agent())
    with pytest.raises(ConfigError, match="needs a bearer token"):
        http_app(server, host="0.0.0.0", allow_remote=True)
    with pytest.raises(ConfigError, match="allow_remote"):
        http_app(server, host="0.0.0.0", token="t")
    assert http_app(server, host="0.0.0.0", token="t", allow_remote=True) is not None


def test_every_loopback_form_counts() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "127.255.0.9", "::1", "[::1]", "localhost", "LOCALHOST"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "10.0.0.1", "evil.example", "localhost.evil.example", "[::]"):
        assert not is_loopback(host), host


ROOT = Path(__file__).resolve().parents[2]


def test_cli_refuses_a_public_host_without_a_token() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MAINSPRING_MCP_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "mainspring", "mcp", "serve", "--http", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "without a bearer token" in lines[0], done.stderr


async def test_cli_serves_a_named_agent_over_http_with_its_url_and_token() -> None:
    env = {**os.environ, "MAINSPRING_MCP_TOKEN": "t0ken"}
    command = [sys.executable, "-m", "mainspring", "mcp", "serve"]
    command += ["tests.mcp.test_http_guard:agent", "--http", "--port", "0"]
    async with await anyio.open_process(command, env=env, cwd=ROOT) as proc:
        try:
            assert proc.stderr is not None
            seen = ""
            with anyio.fail_after(30):
                async for chunk in proc.stderr:
                    seen += chunk.decode()
                    if "/mcp" in seen:
                        break
            match = re.search(r"serving MCP at (http://127\.0\.0\.1:\d+/mcp) \(bearer", seen)
            assert match, seen
            url = match.group(1)
            assert (await post(url)).status_code == 401
            right = await post(url, Authorization="Bearer t0ken")
            assert right.status_code == 200 and "serverInfo" in right.text
        finally:
            proc.terminate()
            with anyio.fail_after(15):
                await proc.wait()
