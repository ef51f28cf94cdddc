"""fetch / http_post against a real HTTP server on loopback: only allowed hosts, bounded."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mainspring import (
    Agent,
    Approve,
    PendingAction,
    ScriptedCall,
    ScriptedModel,
    ScriptedResponse,
    Session,
)
from mainspring.errors import ConfigError
from mainspring.testing import collect
from mainspring.toolkits import FetchLimits, fetch_tools, html_text
from mainspring.tools import Tool

pytestmark = pytest.mark.anyio

PAGE = b"""<html><head><title>Rates</title><style>p{color:red}</style>
<script>steal()</script></head><body><h1>Today</h1><p>EUR 1.08 &amp; GBP 1.27</p></body></html>"""
posted: list[bytes] = []


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _send(self, code: int, body: bytes, kind: str, **headers: str) -> None:
        self.send_response(code)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        port = cast(ThreadingHTTPServer, self.server).server_port
        if self.path == "/page":
            self._send(200, PAGE, "text/html; charset=utf-8")
        elif self.path == "/big":
            self._send(200, b"x" * 50_000, "text/plain")
        elif self.path == "/hop":
            self._send(302, b"", "text/plain", location="/page")
        elif self.path == "/away":  # the same server under a name that is not allowed
            self._send(302, b"", "text/plain", location=f"http://localhost:{port}/page")
        elif self.path == "/loop":
            self._send(302, b"", "text/plain", location="/loop")
        elif self.path == "/png":
            self._send(200, b"\x89PNG\r\n\x1a\n" + b"\0" * 100, "image/png")
        else:
            self._send(404, b"not here", "text/plain")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        posted.append(self.rfile.read(length))
        self._send(201, b'{"ok": true}', "application/json")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


async def call(tool: Tool, **args: object) -> tuple[str, bool]:
    parsed, kwargs = tool.parse(dict(args))
    try:
        out = await tool.call(parsed, None, kwargs=kwargs)
    except ValueError as exc:
        return str(exc), True
    return out.content, out.is_error


async def test_an_allowed_page_comes_back_as_its_text(server: str) -> None:
    fetch = by_name(fetch_tools(["127.0.0.1"]))["fetch"]
    text, error = await call(fetch, url=f"{server}/page")
    assert not error
    assert "# Rates" in text and "EUR 1.08 & GBP 1.27" in text
    assert "steal" not in text and "color:red" not in text and "<p>" not in text


async def test_nothing_is_allowed_by_default(server: str) -> None:
    fetch = by_name(fetch_tools())["fetch"]
    text, error = await call(fetch, url=f"{server}/page")
    assert error and "no hosts are allowed" in text


async def test_a_host_off_the_list_is_refused(server: str) -> None:
    fetch = by_name(fetch_tools(["example.org"]))["fetch"]
    text, error = await call(fetch, url=f"{server}/page")
    assert error and "'127.0.0.1' is not in the allowlist" in text


async def test_redirects_are_followed_only_inside_the_allowlist(server: str) -> None:
    fetch = by_name(fetch_tools(["127.0.0.1"]))["fetch"]
    ok, error = await call(fetch, url=f"{server}/hop")
    assert not error and "EUR 1.08" in ok and "/page" in ok
    away, error = await call(fetch, url=f"{server}/away")
    assert error and "'localhost' is not in the allowlist" in away
    looped, error = await call(fetch, url=f"{server}/loop")
    assert error and "redirects" in looped


# Cutting a body short leaves httpcore's inner async generators to the collector,
# which trio reports (httpx closes only the outermost one); the response is closed.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_bodies_are_bounded_and_binary_is_described(server: str) -> None:
    fetch = by_name(fetch_tools(["127.0.0.1"], limits=FetchLimits(max_bytes=1_000)))["fetch"]
    big, _ = await call(fetch, url=f"{server}/big")
    body = big.split("\n\n", 1)[1]
    assert body.count("x") == 1_000 and "larger than 1000 bytes" in body
    png, _ = await call(fetch, url=f"{server}/png")
    assert "bytes of image/png: not text" in png


async def test_only_http_urls(server: str) -> None:
    fetch = by_name(fetch_tools(["127.0.0.1"]))["fetch"]
    text, error = await call(fetch, url="file:///etc/passwd")
    assert error and "only http and https" in text


def test_bad_patterns_are_config_errors() -> None:
    for bad in ("http://x.org", "a*.org", "*.*.org", ""):
        with pytest.raises(ConfigError):
            fetch_tools([bad])


async def test_a_post_asks_first_and_runs_once_approved(server: str) -> None:
    posted.clear()
    tools = fetch_tools(["127.0.0.1"])
    script: list[ScriptedResponse | str] = [
        ScriptedResponse(
            tool_calls=[ScriptedCall("http_post", {"url": f"{server}/orders", "body": "{}"})]
        ),
        "Posted.",
    ]
    session = Session(Agent(model=ScriptedModel(script), tools=tools))
    events = await collect(session.send("order it"))
    pending = events[-2]
    assert isinstance(pending, PendingAction) and pending.name == "http_post"
    assert posted == []  # nothing sent before the decision
    done = await collect(session.resume(pending.attempt_id, Approve()))
    assert done[-1].type == "turn_complete" and posted == [b"{}"]


def test_the_fetch_tool_is_a_concurrent_read() -> None:
    fetch = by_name(fetch_tools(["127.0.0.1"]))["fetch"]
    assert fetch.policy.read_only and fetch.policy.parallel


@given(st.text(max_size=2_000))
def test_html_text_never_fails_on_any_input(document: str) -> None:
    html_text(document)  # linear, total: any text parses to some text
