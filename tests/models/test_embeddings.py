"""Embedders: the offline HashingEmbedder, and the SDK adapters on a real loopback server.

The OpenAI-compatible and Gemini adapters talk to a stdlib HTTP server on
``127.0.0.1`` (port 0) that answers in the providers' response shapes
(``/v1/embeddings`` list of ``{index, embedding}``; Gemini's
``batchEmbedContents`` ``{"embeddings": [{"values": …}]}``), through the real
SDKs and their real HTTP clients.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mainspring.embeddings import Embedder, HashingEmbedder, cosine, embed_batched
from mainspring.errors import (
    AuthenticationError,
    ConfigError,
    ModelOutputError,
    RateLimited,
)
from mainspring.models.gemini_embeddings import GeminiEmbedder
from mainspring.models.openai.embeddings import OpenAIEmbedder
from mainspring.models.retry import RetryPolicy

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(max_attempts=3, initial_backoff=0.001, max_backoff=0.01, jitter=0, deadline=5)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def fake_vector(text: str, dims: int) -> list[float]:
    return [float((len(text) + i) % 7) / 7 for i in range(dims)]


@dataclass
class Server:
    """Answers embeddings requests like the providers do; a test may queue error replies."""

    dims: int = 4
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    errors: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    shuffle: bool = False
    url: str = ""

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append((path, body))
        if self.errors:
            return self.errors.pop(0)
        if path.endswith("/embeddings"):
            texts = body["input"]
            data = [
                {"object": "embedding", "index": i, "embedding": fake_vector(t, self.dims)}
                for i, t in enumerate(texts)
            ]
            if self.shuffle:
                data.reverse()
            return 200, {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
            }
        if path.endswith(":batchEmbedContents"):
            texts = [r["content"]["parts"][0]["text"] for r in body["requests"]]
            return 200, {"embeddings": [{"values": fake_vector(t, self.dims)} for t in texts]}
        return 404, {"error": {"message": f"no route {path}"}}


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            status, reply = state.answer(self.path, body)
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True  # a client's idle keep-alive connection must not hold teardown
    httpd.block_on_close = False
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


# ------------------------------------------------------------------- hashing


async def test_hashing_embedder_is_deterministic_normalized_and_labelled() -> None:
    embedder = HashingEmbedder(64)
    assert isinstance(embedder, Embedder)
    assert embedder.model_id == "hashing-v1/64"
    one, two, empty = await embedder.embed(["Deploys on Friday", "deploys on friday", "!!"])
    assert one == two  # case-insensitive
    assert len(one) == 64
    assert abs(sum(x * x for x in one) - 1.0) < 1e-9
    assert empty == [0.0] * 64


async def test_hashing_embedder_puts_shared_words_closer_than_unrelated_ones() -> None:
    embedder = HashingEmbedder()
    a, b, c = await embedder.embed(
        ["the deploy runs on fridays", "when do deploys run?", "bananas are yellow"]
    )
    assert cosine(a, b) > cosine(a, c)


@pytest.mark.parametrize("dims", [0, 7, -1, True, 1.5, "64"])
def test_hashing_embedder_rejects_bad_dimensions(dims: object) -> None:
    with pytest.raises(ConfigError, match="dimensions"):
        HashingEmbedder(dims)  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused


@settings(max_examples=50, deadline=None)
@given(st.text())
def test_hashing_embedder_takes_any_text(text: str) -> None:
    vector = HashingEmbedder(16).embed_one(text)
    assert len(vector) == 16
    norm = sum(x * x for x in vector)
    assert norm == 0.0 or abs(norm - 1.0) < 1e-9


class Wrong:
    model_id = "wrong"
    dimensions = 3
    max_batch = 2

    def __init__(self, reply: list[list[float]]) -> None:
        self.reply = reply
        self.calls: list[list[str]] = []

    async def embed(self, texts: Any) -> list[list[float]]:
        self.calls.append(list(texts))
        return self.reply[: len(texts)]


async def test_embed_batched_splits_batches_and_checks_answers() -> None:
    good = Wrong([[1.0, 2.0, 3.0]] * 2)
    assert await embed_batched(good, ["a", "b", "c"]) == [[1.0, 2.0, 3.0]] * 3
    assert good.calls == [["a", "b"], ["c"]]
    with pytest.raises(ModelOutputError, match="1 vectors for 2 texts"):
        await embed_batched(Wrong([[1.0, 2.0, 3.0]]), ["a", "b"])
    with pytest.raises(ModelOutputError, match="2 values, not 3"):
        await embed_batched(Wrong([[1.0, 2.0]]), ["a"])
    with pytest.raises(ModelOutputError, match="finite"):
        await embed_batched(Wrong([[1.0, float("nan"), 3.0]]), ["a"])


# -------------------------------------------------------------------- openai


async def test_openai_embedder_over_loopback(server: Server) -> None:
    embedder = OpenAIEmbedder(
        "nomic-embed-text", dimensions=4, base_url=server.url + "/v1", provider="ollama"
    )
    assert embedder.model_id == "ollama:nomic-embed-text/4"
    server.shuffle = True  # the server's index decides the order, not the list order
    vectors = await embed_batched(embedder, ["a", "bb", "ccc"])
    assert vectors == [fake_vector(t, 4) for t in ["a", "bb", "ccc"]]
    path, body = server.requests[0]
    assert path == "/v1/embeddings"
    assert body == {
        "model": "nomic-embed-text",
        "input": ["a", "bb", "ccc"],
        "encoding_format": "float",
    }


async def test_openai_embedder_batches_and_shortens(server: Server) -> None:
    embedder = OpenAIEmbedder(
        "text-embedding-3-small",
        dimensions=4,
        shorten=True,
        api_key="sk-test",
        base_url=server.url + "/v1",
        max_batch=2,
    )
    assert await embed_batched(embedder, ["a", "b", "c"]) == [fake_vector(t, 4) for t in "abc"]
    assert [b["input"] for _, b in server.requests] == [["a", "b"], ["c"]]
    assert all(b["dimensions"] == 4 for _, b in server.requests)


async def test_openai_embedder_retries_a_rate_limit_then_types_errors(server: Server) -> None:
    embedder = OpenAIEmbedder("m", dimensions=4, base_url=server.url + "/v1", retry=FAST)
    server.errors.append((429, {"error": {"message": "slow down", "code": "rate_limit_exceeded"}}))
    assert await embedder.embed(["x"]) == [fake_vector("x", 4)]
    assert len(server.requests) == 2
    server.errors.append((401, {"error": {"message": "bad key", "code": "invalid_api_key"}}))
    with pytest.raises(AuthenticationError):
        await embedder.embed(["x"])
    once = OpenAIEmbedder(
        "m", dimensions=4, base_url=server.url + "/v1", retry=RetryPolicy(max_attempts=1)
    )
    server.errors.append((429, {"error": {"message": "slow down"}}))
    with pytest.raises(RateLimited):
        await once.embed(["x"])


async def test_openai_embedder_checks_the_vector_length(server: Server) -> None:
    embedder = OpenAIEmbedder("m", dimensions=8, base_url=server.url + "/v1")
    with pytest.raises(ModelOutputError, match="4 values, not 8"):
        await embed_batched(embedder, ["x"])


def test_openai_embedder_needs_dimensions_for_an_unknown_model() -> None:
    with pytest.raises(ConfigError, match="needs dimensions"):
        OpenAIEmbedder("nomic-embed-text", base_url="http://127.0.0.1:9/v1")
    assert OpenAIEmbedder("text-embedding-3-large", api_key="k").dimensions == 3072


# -------------------------------------------------------------------- gemini


async def test_gemini_embedder_over_loopback(server: Server) -> None:
    embedder = GeminiEmbedder(
        "gemini-embedding-001", dimensions=4, api_key="test-key", base_url=server.url
    )
    assert embedder.model_id == "gemini:gemini-embedding-001/4"
    vectors = await embed_batched(embedder, ["one", "three"])
    assert vectors == [fake_vector("one", 4), fake_vector("three", 4)]
    path, body = server.requests[0]
    assert path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    assert [r["content"]["parts"][0]["text"] for r in body["requests"]] == ["one", "three"]
    assert all(r["outputDimensionality"] == 4 for r in body["requests"])


async def test_gemini_embedder_types_errors(server: Server) -> None:
    embedder = GeminiEmbedder(
        dimensions=4, api_key="k", base_url=server.url, retry=RetryPolicy(max_attempts=1)
    )
    server.errors.append(
        (400, {"error": {"code": 400, "message": "API key not valid", "status": "INVALID_ARGUMENT",
                         "details": [{"reason": "API_KEY_INVALID"}]}})
    )  # fmt: skip
    with pytest.raises(AuthenticationError):
        await embedder.embed(["x"])
    server.errors.append((200, {"embeddings": [{"values": [1.0, 2.0, 3.0, 4.0]}] * 2}))
    with pytest.raises(ModelOutputError, match="2 embeddings for 1 texts"):
        await embedder.embed(["x"])
