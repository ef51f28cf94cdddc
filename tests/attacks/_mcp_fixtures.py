"""Helpers for the MCP attack files: a hostile server's config, a loopback server that counts."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from mainspring.mcp import McpServerConfig

HOSTILE = str(Path(__file__).with_name("_hostile_mcp_server.py"))


def hostile(
    tmp_path: Path,
    name: str,
    tools: list[dict[str, Any]],
    *,
    big_chars: int = 0,
    pictures: tuple[int, ...] = (),
    **kw: Any,
) -> McpServerConfig:
    """A config starting ``_hostile_mcp_server.py`` (the official SDK) listing ``tools``."""
    spec = tmp_path / f"{name}.json"
    spec.write_text(json.dumps({"tools": tools, "big_chars": big_chars, "pictures": pictures}))
    return McpServerConfig(name=name, command=sys.executable, args=(HOSTILE, str(spec)), **kw)


def tool(name: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": f"The {name} tool.", "inputSchema": schema, **extra}


@dataclass
class Counter:
    """Requests a loopback HTTP server answered (it serves a schema, to be fetchable)."""

    url: str
    paths: list[str] = field(default_factory=list)


@contextmanager
def counting_server() -> Iterator[Counter]:
    """A real HTTP server on 127.0.0.1 counting every request; it serves ``{"type": "string"}``."""
    counter = Counter(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            counter.paths.append(self.path)
            body = b'{"type": "string"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    counter.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield counter
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
