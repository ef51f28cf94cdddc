"""fetch and http_post: HTTP through httpx to the hosts you allow, and no others.

```python
tools = fetch_tools(allow_hosts=["docs.python.org", "*.example.com"])
```

- **Allowlist** of host names (``*.`` wildcards for subdomains; IP literals
  only when listed as such). None by default: with an empty list every
  request is refused, saying how to allow one.
- **Redirects** are followed by hand, at most ``max_redirects``, and every
  hop is checked against the allowlist again (a redirect never leaves it).
- **Bounded**: ``max_bytes`` of body are read (the rest is cut, and the
  result says so), a total ``timeout`` per request.
- **Text**: HTML becomes its readable text (scripts, styles and tags
  dropped); other text and JSON are decoded by their charset; binary
  content is described, not returned.
- ``fetch`` (GET) is a read-only, concurrency-safe tool; ``http_post`` is a
  write, confirm-tier by default, with the URL and body in its pending action.

Needs ``pip install "mainspring[fetch]"`` (httpx), imported when a request is made.
"""

from __future__ import annotations

import fnmatch
import html.parser
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

import anyio

from mainspring.errors import ConfigError
from mainspring.tools.define import Tool, tool
from mainspring.tools.policy import Flag

if TYPE_CHECKING:
    import httpx

__all__ = ["FetchLimits", "fetch_tools", "html_text"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchLimits:
    """What one request may take."""

    max_bytes: int = 2_000_000
    """Body bytes read; the rest is cut."""
    timeout: float = 20.0
    """Seconds for the whole request, redirects included."""
    max_redirects: int = 5
    max_chars: int = 50_000
    """Characters of text handed to the model (the tool's result budget)."""

    def __post_init__(self) -> None:
        if self.max_bytes < 1 or self.timeout <= 0 or self.max_redirects < 0:
            raise ConfigError("fetch limits must be positive (max_redirects may be 0)")


class FetchRefused(Exception):
    """A request the allowlist or the limits do not let through."""


def _check_patterns(allow_hosts: Sequence[str]) -> tuple[str, ...]:
    patterns = []
    for raw in allow_hosts:
        host = raw.strip().lower().rstrip(".")
        bare = host.strip("[]")
        if not host or "/" in host or (":" in bare and not _is_ip(bare)):
            raise ConfigError(f"not a host name for fetch_tools(allow_hosts=...): {raw!r}")
        if "*" in host and not (host.startswith("*.") and "*" not in host[2:]):
            raise ConfigError(f"only a leading '*.' wildcard is allowed, not {raw!r}")
        patterns.append(host.strip("[]"))
    return tuple(patterns)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _allowed(url: str, patterns: tuple[str, ...]) -> str:
    """The URL's host if the allowlist lets it through; else :class:`FetchRefused`."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise FetchRefused(f"only http and https URLs are fetched, not {parts.scheme or url!r}")
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        raise FetchRefused(f"no host in {url!r}")
    if not patterns:
        raise FetchRefused(
            f"no hosts are allowed: fetching needs fetch_tools(allow_hosts=[...]) to name {host!r}"
        )
    for pattern in patterns:
        if pattern.startswith("*."):
            if not _is_ip(host) and fnmatch.fnmatchcase(host, pattern) and host != pattern[2:]:
                return host
        elif host == pattern:
            return host
    raise FetchRefused(f"host {host!r} is not in the allowlist")


class _Text(html.parser.HTMLParser):
    """Readable text of an HTML document (no scripts, styles or markup)."""

    _SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
    _BREAK = frozenset(
        {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._skipping = 0
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self._SKIP:
            self._skipping += 1
        elif tag in self._BREAK:
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self._SKIP and self._skipping:
            self._skipping -= 1
        elif tag in self._BREAK:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if not self._skipping:
            self.out.append(data)


def html_text(document: str) -> str:
    """The readable text of ``document`` (linear in its length), with its title first."""
    parser = _Text()
    parser.feed(document)
    parser.close()
    text = re.sub(r"[ \t\r\f\v]+", " ", "".join(parser.out))
    text = re.sub(r"\s*\n\s*", "\n", text).strip()
    title = " ".join(parser.title.split())
    return f"# {title}\n\n{text}" if title else text


async def _request(
    method: str,
    url: str,
    patterns: tuple[str, ...],
    limits: FetchLimits,
    *,
    body: str | None = None,
    content_type: str = "application/json",
) -> str:
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise ConfigError('fetch needs: pip install "mainspring[fetch]"') from exc
    _allowed(url, patterns)
    with anyio.fail_after(limits.timeout):
        async with httpx.AsyncClient(follow_redirects=False, timeout=limits.timeout) as client:
            for _ in range(limits.max_redirects + 1):
                headers = {"content-type": content_type} if body is not None else {}
                request = client.build_request(
                    method,
                    url,
                    content=body.encode() if body is not None else None,
                    headers=headers,
                )
                response = await client.send(request, stream=True)
                try:
                    if response.is_redirect and "location" in response.headers:
                        target = urljoin(url, response.headers["location"])
                        _allowed(target, patterns)  # every hop stays inside the allowlist
                        url = target
                        if response.status_code == 303 or (
                            response.status_code in (301, 302) and method == "POST"
                        ):
                            method, body = "GET", None
                        continue
                    return await _read(response, url, limits)
                finally:
                    await response.aclose()
    raise FetchRefused(f"more than {limits.max_redirects} redirects")


async def _read(response: httpx.Response, url: str, limits: FetchLimits) -> str:
    chunks: list[bytes] = []
    size = 0
    cut = False
    stream = response.aiter_raw()
    try:
        async for chunk in stream:
            room = limits.max_bytes - size
            if len(chunk) > room:
                chunks.append(chunk[:room])
                cut = True
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        close = getattr(stream, "aclose", None)  # an async generator: close it now, not in GC
        if close is not None:
            await close()
    data = b"".join(chunks)
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    head = f"{response.status_code} {response.reason_phrase} · {url} · {kind or 'unknown type'}"
    if kind.startswith("text/") or kind in ("application/json", "application/xml", ""):
        text = data.decode(response.charset_encoding or "utf-8", errors="replace")
        if kind == "text/html":
            text = html_text(text)
    else:
        text = f"[{len(data)} bytes of {kind}: not text, not shown]"
    if cut:
        text += f"\n[cut: the body is larger than {limits.max_bytes} bytes]"
    if len(text) > limits.max_chars:
        text = text[: limits.max_chars] + f"\n[cut at {limits.max_chars} characters]"
    return f"{head}\n\n{text}"


def fetch_tools(
    allow_hosts: Sequence[str] = (),
    *,
    limits: FetchLimits | None = None,
    post_permission: Any = "confirm",
) -> list[Tool]:
    """``fetch`` (GET, read-only) and ``http_post`` (a write) limited to ``allow_hosts``.

    Raises:
        ConfigError: A pattern is not a host name (or misuses ``*``).
    """
    patterns = _check_patterns(allow_hosts)
    bounds = limits or FetchLimits()

    @tool(
        name="fetch",
        read_only=True,
        flags={Flag.EXTERNAL},
        max_result_chars=bounds.max_chars + 500,
    )
    async def fetch(url: str) -> str:
        """Fetch a web page or document by HTTP GET and return its text.

        Args:
            url: An http(s) URL on a host this agent may reach.
        """
        try:
            return await _request("GET", url, patterns, bounds)
        except FetchRefused as exc:
            raise ValueError(str(exc)) from None

    @tool(
        name="http_post",
        permission=post_permission,
        flags={Flag.EXTERNAL},
        max_result_chars=bounds.max_chars + 500,
    )
    async def http_post(url: str, body: str, content_type: str = "application/json") -> str:
        """Send data by HTTP POST (this changes things on the server: it asks first).

        Args:
            url: An http(s) URL on a host this agent may reach.
            body: What to send.
            content_type: The body's media type.
        """
        try:
            return await _request(
                "POST", url, patterns, bounds, body=body, content_type=content_type
            )
        except FetchRefused as exc:
            raise ValueError(str(exc)) from None

    return [fetch, http_post]
