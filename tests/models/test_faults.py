"""Fault tests: every adapter against a real loopback HTTP server that misbehaves on cue.

A stdlib ``ThreadingHTTPServer`` on ``127.0.0.1`` (port 0) plays a per-test
script of responses in order: error statuses, recorded SSE streams (the
providers' ``text_stream`` recordings), streams reset or cut mid-way, a
malformed ``data:`` frame, a server slower than the client's timeout. Each
fault must end in a typed error or a successful retry, never a hang, and a
failed step must leave nothing of its partial answer in the session.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

import anyio
import httpx2
import pytest

from mainspring import Agent, Session
from mainspring.errors import (
    ModelError,
    ModelOutputError,
    ModelTimeout,
    ModelUnreachable,
    Overloaded,
    RateLimited,
    ServerError,
)
from mainspring.events import ErrorEvent, TextDelta, TurnComplete
from mainspring.messages import Message
from mainspring.models.anthropic import AnthropicModel
from mainspring.models.base import Model, ModelEvent, ModelRequest, ModelStop
from mainspring.models.gemini import GeminiModel
from mainspring.models.openai import OpenAIChatModel
from mainspring.models.openai_responses import OpenAIResponsesModel
from mainspring.models.retry import RetryPolicy
from tests.helpers import collect
from tests.models.wire import load

pytestmark = pytest.mark.anyio

Adapter = Literal["anthropic", "chat", "responses", "gemini"]
ADAPTERS: list[Adapter] = ["anthropic", "chat", "responses", "gemini"]

RECORDING: dict[Adapter, tuple[str, str]] = {
    "anthropic": ("anthropic", "text_stream"),
    "chat": ("openai", "chat_text_stream"),
    "responses": ("openai", "responses_text_stream"),
    "gemini": ("gemini", "text_stream"),
}

PATHS: dict[Adapter, str] = {
    "anthropic": "/v1/messages",
    "chat": "/v1/chat/completions",
    "responses": "/v1/responses",
    "gemini": "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
}
"""Where each adapter's request must land on the loopback server."""

FAST = RetryPolicy(max_attempts=3, initial_backoff=0.001, max_backoff=0.01, jitter=0, deadline=5)
ONCE = RetryPolicy(max_attempts=1)
TIMEOUT = 0.2
"""The client's timeout in the slow-server cases (seconds)."""
PATIENT = 5.0
"""The client's timeout where the fault is not a slow server: on a loaded machine the
short one fires before a reset or a cut arrives, and the test would see a timeout."""
SLOW = 1.0
"""How long the slow server waits before answering."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- the loopback server -----------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    ``head`` is sent in full (after the status line and headers, unless
    ``silent``: then nothing at all is sent); then, by ``end``: ``"close"``
    closes the socket cleanly (a close-delimited body just ends), ``"reset"``
    aborts it with an RST. ``delay`` seconds pass before anything is sent;
    ``stall`` seconds pass between ``head`` and the end.
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    head: bytes = b""
    end: Literal["close", "reset"] = "close"
    delay: float = 0.0
    stall: float = 0.0
    silent: bool = False


@dataclass
class Script:
    """The replies a test wants, in order, and the requests the server saw."""

    replies: list[Reply] = field(default_factory=list[Reply])
    paths: list[str] = field(default_factory=list[str])
    times: list[float] = field(default_factory=list[float])
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def play(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def next(self, path: str) -> Reply:
        with self.lock:
            self.paths.append(path)
            self.times.append(time.monotonic())
            if not self.replies:
                return error(599, "the test script ran out of replies")
            return self.replies.pop(0)

    @property
    def requests(self) -> int:
        return len(self.paths)


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection and a close-delimited body, so a
        # clean close ends the stream and a reset breaks it mid-body.
        protocol_version = "HTTP/1.0"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            reply = script.next(self.path)
            try:
                self._answer(reply)
            except OSError:
                pass  # the client gave up first (a timeout case)

        def _answer(self, reply: Reply) -> None:
            if script.stop.wait(reply.delay):
                return
            if not reply.silent:
                self.send_response(reply.status)
                for name, value in reply.headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(reply.head)
                self.wfile.flush()
            if script.stop.wait(reply.stall):
                return
            if reply.end == "reset":
                linger = struct.pack("ii", 1, 0)  # SO_LINGER 0: close sends an RST
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                # Close here: socketserver would shut down (FIN) before closing.
                self.connection.close()

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@dataclass
class Server:
    script: Script
    url: str


@pytest.fixture
def server() -> Iterator[Server]:
    script = Script()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    httpd.daemon_threads = True
    httpd.block_on_close = False
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01})
    thread.daemon = True
    thread.start()
    host, port = httpd.server_address[:2]
    try:
        yield Server(script, f"http://{host!s}:{port}")
    finally:
        script.stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


# --- replies -----------------------------------------------------------------------


def error(status: int, message: str, **headers: str) -> Reply:
    """An error body every SDK can read (Anthropic, OpenAI and Google shapes at once)."""
    kind, status_name = {
        429: ("rate_limit_error", "RESOURCE_EXHAUSTED"),
        503: ("overloaded_error", "UNAVAILABLE"),
        529: ("overloaded_error", "UNAVAILABLE"),
    }.get(status, ("api_error", "INTERNAL"))
    details = {"type": kind, "message": message, "code": status, "status": status_name}
    body = {"type": "error", "error": details}
    pairs = (("content-type", "application/json"), *headers.items())
    return Reply(status=status, headers=pairs, head=json.dumps(body).encode())


def frames(adapter: Adapter) -> list[str]:
    """The recorded SSE body of the adapter's text stream, one string per frame."""
    provider, name = RECORDING[adapter]
    sse: str = load(provider, name)["response"]["sse"]
    pieces = re.split(r"(\r?\n\r?\n)", sse)
    return ["".join(pieces[i : i + 2]) for i in range(0, len(pieces), 2) if pieces[i]]


def _first_text(adapter: Adapter, recorded: list[str]) -> int:
    """Index of the first frame carrying non-empty text."""
    marker = {
        "anthropic": '"text_delta"',
        "chat": '"content":"T',
        "responses": "response.output_text.delta",
        "gemini": '"text":',
    }[adapter]
    return next(i for i, frame in enumerate(recorded) if marker in frame)


def stream(body: str, *, end: Literal["close", "reset"] = "close", stall: float = 0.0) -> Reply:
    headers = (("content-type", "text/event-stream"), ("cache-control", "no-cache"))
    return Reply(headers=headers, head=body.encode(), end=end, stall=stall)


def success(adapter: Adapter) -> Reply:
    return stream("".join(frames(adapter)))


def partial(adapter: Adapter) -> str:
    """The recording up to and including its first text frame (no terminal event)."""
    recorded = frames(adapter)
    return "".join(recorded[: _first_text(adapter, recorded) + 1])


def malformed(adapter: Adapter) -> str:
    """The recording with the frame after the first text frame's JSON broken."""
    recorded = frames(adapter)
    bad = _first_text(adapter, recorded) + 1
    recorded[bad] = re.sub(r"(?m)^data: .*$", 'data: {"type": "oops", not json', recorded[bad])
    return "".join(recorded)


# --- adapters ----------------------------------------------------------------------


def make_model(
    adapter: Adapter,
    url: str,
    *,
    retry: RetryPolicy = FAST,
    http_client: httpx2.AsyncClient | None = None,
    timeout: float | None = None,
) -> Model:
    if adapter == "anthropic":
        return AnthropicModel(
            "claude-test-model", api_key="test", base_url=url, http_client=http_client, retry=retry
        )
    if adapter == "chat":
        return OpenAIChatModel(
            "gpt-4o", api_key="test", base_url=f"{url}/v1", http_client=http_client, retry=retry
        )
    if adapter == "responses":
        return OpenAIResponsesModel(
            "gpt-4o-mini",
            api_key="test",
            base_url=f"{url}/v1",
            http_client=http_client,
            retry=retry,
        )
    return GeminiModel(
        "gemini-2.0-flash",
        api_key="test",
        base_url=url,
        http_client=http_client,
        timeout=timeout,
        retry=retry,
    )


def request() -> ModelRequest:
    return ModelRequest(system=(), messages=[Message.user("hi")])


async def drain(events: AsyncIterator[ModelEvent]) -> list[ModelEvent]:
    with anyio.fail_after(60):
        return [event async for event in events]


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def raises(model: Model) -> ModelError:
    with pytest.raises(ModelError) as info:
        await drain(model.stream(request()))
    return info.value


# --- retried before the first event ------------------------------------------------


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_429_honours_retry_after_then_succeeds(adapter: Adapter, server: Server) -> None:
    server.script.play(error(429, "slow down", **{"retry-after": "0.05"}), success(adapter))

    events = await drain(make_model(adapter, server.url).stream(request()))

    assert isinstance(events[-1], ModelStop)
    assert text_of(events)
    assert server.script.requests == 2
    first, second = server.script.times
    assert second - first >= 0.05


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("status", [500, 503, 529])
async def test_server_errors_are_retried(adapter: Adapter, status: int, server: Server) -> None:
    server.script.play(error(status, "try again"), success(adapter))

    events = await drain(make_model(adapter, server.url).stream(request()))

    assert isinstance(events[-1], ModelStop)
    assert server.script.paths == [PATHS[adapter]] * 2


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize(
    ("status", "kind"),
    [(429, RateLimited), (500, ServerError), (503, Overloaded), (529, Overloaded)],
)
async def test_retries_give_up_with_a_typed_error(
    adapter: Adapter, status: int, kind: type[ModelError], server: Server
) -> None:
    server.script.play(*[error(status, "still failing", **{"retry-after": "0"})] * 3)

    exc = await raises(make_model(adapter, server.url))

    assert type(exc) is kind
    assert exc.retryable
    assert server.script.requests == 3


# Gemini is left out: its SDK's UnknownApiResponseError escapes the adapter unmapped.
@pytest.mark.parametrize("adapter", ["anthropic", "chat", "responses"])
async def test_malformed_first_frame_is_retried(adapter: Adapter, server: Server) -> None:
    server.script.play(stream('data: {"not json\n\n'), success(adapter))

    events = await drain(make_model(adapter, server.url).stream(request()))

    assert isinstance(events[-1], ModelStop)
    assert server.script.requests == 2


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_empty_stream_is_a_retryable_output_error(adapter: Adapter, server: Server) -> None:
    server.script.play(stream(""), stream(""), stream(""))

    exc = await raises(make_model(adapter, server.url))

    assert isinstance(exc, ModelOutputError)
    assert exc.retryable
    assert server.script.requests == 3


# --- the connection fails: before the answer, or after its first bytes ------------


def closed_port() -> str:
    """The URL of a loopback port nothing listens on (a connection is refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def first_bytes(adapter: Adapter) -> str:
    """The answer's first frame cut in half: bytes arrived, no event can have."""
    first = frames(adapter)[0]
    return first[: len(first) // 2]


RESET_BEFORE = Reply(silent=True, end="reset")
"""The server takes the request, then resets the connection before answering a byte."""

# What a reset after the status line and half a frame is. The Gemini SDK sends its
# request when its stream is first read, so the adapter sees the answer begin only
# with the first whole chunk; before that, a reset looks like an unreachable server.
# Retryable either way, and retried: nothing reached the engine yet.
AFTER_FIRST_BYTES: dict[Adapter, type[ModelError]] = {
    "anthropic": ModelOutputError,
    "chat": ModelOutputError,
    "responses": ModelOutputError,
    "gemini": ModelUnreachable,
}


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_refused_connection_is_an_unreachable_server(adapter: Adapter) -> None:
    exc = await raises(make_model(adapter, closed_port(), retry=ONCE))

    assert type(exc) is ModelUnreachable
    assert exc.retryable
    assert str(exc).startswith("could not reach ")


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_reset_before_the_answer_is_an_unreachable_server(
    adapter: Adapter, server: Server
) -> None:
    server.script.play(RESET_BEFORE)

    exc = await raises(make_model(adapter, server.url, retry=ONCE))

    assert type(exc) is ModelUnreachable
    assert exc.retryable
    assert server.script.requests == 1


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_reset_after_the_first_bytes_is_a_broken_stream(
    adapter: Adapter, server: Server
) -> None:
    server.script.play(stream(first_bytes(adapter), end="reset", stall=0.05))

    exc = await raises(make_model(adapter, server.url, retry=ONCE))

    assert type(exc) is AFTER_FIRST_BYTES[adapter]
    assert exc.retryable
    if type(exc) is ModelOutputError:
        assert "stream broke off" in str(exc)


@pytest.mark.parametrize("before", [True, False], ids=["before-answer", "after-first-bytes"])
@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_reset_before_any_event_is_retried(
    adapter: Adapter, before: bool, server: Server
) -> None:
    fault = RESET_BEFORE if before else stream(first_bytes(adapter), end="reset", stall=0.05)
    server.script.play(fault, success(adapter))

    events = await drain(make_model(adapter, server.url).stream(request()))

    assert isinstance(events[-1], ModelStop)
    assert text_of(events)
    assert server.script.requests == 2


# --- a server slower than the client's timeout --------------------------------------


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_slow_server_times_out_then_retry_succeeds(adapter: Adapter, server: Server) -> None:
    server.script.play(Reply(delay=SLOW), success(adapter))

    async with httpx2.AsyncClient(timeout=TIMEOUT) as client:
        model = make_model(adapter, server.url, http_client=client, timeout=TIMEOUT)
        started = time.monotonic()
        events = await drain(model.stream(request()))

    assert isinstance(events[-1], ModelStop)
    assert server.script.requests == 2
    assert time.monotonic() - started < SLOW


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_slow_server_is_a_model_timeout(adapter: Adapter, server: Server) -> None:
    server.script.play(Reply(delay=SLOW))

    async with httpx2.AsyncClient(timeout=TIMEOUT) as client:
        model = make_model(adapter, server.url, retry=ONCE, http_client=client, timeout=TIMEOUT)
        started = time.monotonic()
        exc = await raises(model)

    assert isinstance(exc, ModelTimeout)
    assert isinstance(exc, TimeoutError)
    assert exc.retryable
    assert time.monotonic() - started < SLOW


# --- failures after content reached the engine --------------------------------------


def patience(fault: str) -> float:
    """The client's timeout for a mid-stream ``fault``: short only where it is the fault."""
    return TIMEOUT if fault == "stall" else PATIENT


def midstream(adapter: Adapter, fault: str) -> Reply:
    if fault == "reset":
        # A pause first, so the client reads the text before the RST discards it.
        return stream(partial(adapter), end="reset", stall=0.05)
    if fault == "cut":
        return stream(partial(adapter))
    if fault == "stall":
        return stream(partial(adapter), stall=SLOW)
    return stream(malformed(adapter))


@asynccontextmanager
async def timed_model(adapter: Adapter, url: str, seconds: float = TIMEOUT) -> AsyncIterator[Model]:
    """A model whose HTTP client gives up after ``seconds``."""
    async with httpx2.AsyncClient(timeout=seconds) as client:
        yield make_model(adapter, url, http_client=client, timeout=seconds)


async def _turn(session: Session, text: str) -> list[object]:
    with anyio.fail_after(60):
        return list(await collect(session.send(text)))


# (fault, adapter, the error it must raise): a cut, a malformed frame and a reset are
# all a cut-off stream (ModelOutputError) on every adapter; a stall is a timeout.
MIDSTREAM = [
    *[("cut", a, ModelOutputError) for a in ADAPTERS],
    *[("malformed", a, ModelOutputError) for a in ADAPTERS],
    *[("reset", a, ModelOutputError) for a in ADAPTERS],
    *[("stall", a, ModelTimeout) for a in ADAPTERS],
]
MIDSTREAM_IDS = [f"{fault}-{adapter}" for fault, adapter, _ in MIDSTREAM]


@pytest.mark.parametrize(("fault", "adapter", "kind"), MIDSTREAM, ids=MIDSTREAM_IDS)
async def test_midstream_failure_is_surfaced_not_retried(
    fault: str, adapter: Adapter, kind: type[ModelError], server: Server
) -> None:
    server.script.play(midstream(adapter, fault), success(adapter))

    async with timed_model(adapter, server.url, patience(fault)) as model:
        exc = await raises(model)

    assert isinstance(exc, kind)
    assert exc.retryable
    assert server.script.requests == 1  # text was already out: no silent replay


@pytest.mark.parametrize(("fault", "adapter", "kind"), MIDSTREAM, ids=MIDSTREAM_IDS)
async def test_midstream_failure_leaves_no_partial_content(
    fault: str, adapter: Adapter, kind: type[ModelError], server: Server
) -> None:
    server.script.play(midstream(adapter, fault), success(adapter))

    async with timed_model(adapter, server.url, patience(fault)) as model:
        session = Session(Agent(model=model))
        failed = await _turn(session, "first")

        assert any(isinstance(e, TextDelta) for e in failed)  # the partial text did stream
        last = failed[-1]
        assert isinstance(last, ErrorEvent)
        assert last.code == ("model_output_error" if kind is ModelOutputError else "model_error")
        assert last.retryable
        assert [(m.role, m.text) for m in session.messages] == [("user", "first")]

        ok = await _turn(session, "again")

    assert isinstance(ok[-1], TurnComplete)
    answer = "".join(e.text for e in ok if isinstance(e, TextDelta))
    assistants = [m for m in session.messages if m.role == "assistant"]
    assert len(assistants) == 1
    assert assistants[0].text == answer
    assert session.messages[-1] is assistants[0]
    assert server.script.requests == 2


# --- an error object inside an OpenAI-compatible stream ---------------------------


def chunk(delta: dict[str, object], finish: str | None = None, **extra: object) -> str:
    body = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "local-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return f"data: {json.dumps(body)}\n\n"


USAGE = {"prompt_tokens": 900, "completion_tokens": 64, "total_tokens": 964}


def error_after_length(error: dict[str, object]) -> Reply:
    """Text, ``finish_reason: length`` with usage, then an error object (as vLLM and
    llama.cpp servers send when the context overflows mid-generation)."""
    body = (
        chunk({"role": "assistant", "content": "The answer is"})
        + chunk({}, "length", usage=USAGE)
        + f"data: {json.dumps({'error': error})}\n\n"
        + "data: [DONE]\n\n"
    )
    return stream(body)


IN_STREAM = [
    ({"code": 400, "message": "maximum context length is 1024 tokens"}, "ContextTooLong", False),
    ({"code": "400", "message": "bad request"}, "BadRequest", False),
    ({"code": "rate_limit_exceeded", "message": "slow down"}, "RateLimited", True),
    ({"code": 502, "message": "upstream went away"}, "ServerError", True),
    ({"message": "something broke"}, "ModelOutputError", True),
]


@pytest.mark.parametrize(
    ("error", "kind", "retryable"), IN_STREAM, ids=[k for _e, k, _r in IN_STREAM]
)
async def test_an_error_object_in_a_stream_is_typed_by_its_code(
    error: dict[str, object], kind: str, retryable: bool, server: Server
) -> None:
    server.script.play(error_after_length(error), success("chat"))
    model = make_model("chat", server.url)
    exc = await raises(model)
    assert type(exc).__name__ == kind
    assert exc.retryable is retryable
    assert server.script.requests == 1  # text was out: never replayed


async def test_the_usage_a_failing_stream_reported_is_kept(server: Server) -> None:
    server.script.play(error_after_length({"code": 400, "message": "context length exceeded"}))
    session = Session(Agent(model=make_model("chat", server.url)))
    events = await _turn(session, "a long question")
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.code == "model_error" and not last.retryable
    assert session.usage.input_tokens == 900 and session.usage.output_tokens == 64
    assert [(m.role, m.text) for m in session.messages] == [("user", "a long question")]
