"""The server's operations: pluggable authentication, CORS, access logs."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import pytest
from starlette.requests import HTTPConnection

from mainspring.server import Principal, ServerConfig
from tests.server.conftest import client_for, config, read_sse

pytestmark = pytest.mark.anyio


async def test_a_host_authenticator_decides_who_calls_and_sessions_follow_it(
    server_for: Any,
) -> None:
    async def by_header(conn: HTTPConnection) -> Principal | None:
        user = conn.headers.get("x-user")  # stands for a host's own session cookie check
        return Principal(user) if user in ("ann", "ben") else None

    base = server_for(None, ServerConfig(authenticator=by_header))
    async with client_for(base, key=None) as client:
        assert (await client.get("/v1/sessions")).status_code == 401
        ann = {"x-user": "ann"}
        sid = (await client.post("/v1/sessions", headers=ann, json={})).json()["session_id"]
        assert (await client.get(f"/v1/sessions/{sid}", headers=ann)).status_code == 200
        assert (
            await client.get(f"/v1/sessions/{sid}", headers={"x-user": "ben"})
        ).status_code == 404
        assert (await client.get("/v1/sessions", headers={"x-user": "eve"})).status_code == 401


async def test_cors_is_off_by_default_and_allows_only_the_configured_origins(
    server_for: Any,
) -> None:
    closed = server_for()
    opened = server_for(None, config(cors_origins=("https://app.example",)))
    preflight = {
        "Origin": "https://app.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization",
    }
    async with client_for(closed) as client:
        r = await client.options("/v1/sessions", headers=preflight)
        assert "access-control-allow-origin" not in r.headers
    async with client_for(opened) as client:
        r = await client.options("/v1/sessions", headers=preflight)
        assert r.headers["access-control-allow-origin"] == "https://app.example"
        other = {**preflight, "Origin": "https://evil.example"}
        r = await client.options("/v1/sessions", headers=other)
        assert r.headers.get("access-control-allow-origin") != "https://evil.example"


async def test_access_logs_are_json_lines_without_prompt_text(
    base: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="mainspring.server.access"):
        async with client_for(base) as client:
            sid = (await client.post("/v1/sessions")).json()["session_id"]
            await read_sse(
                client,
                "POST",
                f"/v1/sessions/{sid}/messages",
                json_body={"message": "Pay Alice $20, secret memo"},
            )
            await client.get(f"/v1/sessions/{sid}/state")
        # the line of a stream is written after its last byte (60 s: only a hang)
        for _ in range(6000):
            if any("messages" in r.getMessage() for r in caplog.records):
                break
            await anyio.sleep(0.01)
    lines = [r.getMessage() for r in caplog.records if r.name == "mainspring.server.access"]
    entries = [json.loads(line) for line in lines]
    routes = {(e["method"], e["route"], e["status"]) for e in entries}
    assert ("POST", "/v1/sessions/{session_id}/messages", 200) in routes
    assert all(e["principal"] == "alice" for e in entries)
    assert not any("Alice" in line or "secret" in line or sid in line for line in lines)
