"""``mainspring serve``: the application server (:mod:`mainspring.server`) under uvicorn."""

from __future__ import annotations

import errno
import json
import os
import secrets
import socket
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from mainspring._cli_render import Debug, failing_cleanly
from mainspring.errors import ConfigError

__all__ = ["KEYS_ENV", "SIGNING_KEY_ENV", "serve"]

KEYS_ENV = "MAINSPRING_API_KEYS"
"""``principal=key`` entries (comma or newline separated) a server accepts."""
SIGNING_KEY_ENV = "MAINSPRING_SIGNING_KEY"
"""The approval-signing key, hex (64+ digits); every worker of a deployment shares it."""

_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def _keys(keys_file: Path | None) -> dict[str, str]:
    from mainspring.server import ApiKeys
    from mainspring.server._auth import parse_keys

    text = keys_file.read_text(encoding="utf-8") if keys_file else os.environ.get(KEYS_ENV, "")
    parsed = parse_keys(text)
    ApiKeys(parsed)  # validates lengths and names
    return parsed


def _trusted(path: Path | None) -> dict[str, str]:
    """``{key id: public key text}`` from ``key_id public_key`` lines."""
    if path is None:
        return {}
    trusted: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key_id, _, text = line.partition(" ")
        if not text.strip():
            raise ConfigError(f"{path}:{number}: a trusted key is 'key_id public_key'")
        trusted[key_id] = text.strip()
    return trusted


def _signing_key() -> str | None:
    raw = os.environ.get(SIGNING_KEY_ENV, "").strip()
    if not raw:
        return None
    try:
        key = bytes.fromhex(raw)
    except ValueError:
        raise ConfigError(f"${SIGNING_KEY_ENV} must be hex") from None
    if len(key) < 32:
        raise ConfigError(f"${SIGNING_KEY_ENV} must hold at least 32 bytes (64 hex digits)")
    return raw


def _port_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"{host}:{port} is in use; pick another --port") from None
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def serve(
    agent: Annotated[
        str | None,
        typer.Argument(help="The agent, as package.module:attribute (default: the demo agent)."),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    store: Annotated[
        str, typer.Option(help="One store URL for sessions, checkpoints and locks.")
    ] = "memory://",
    sessions: Annotated[
        str | None, typer.Option(help="Session store URL (postgresql://… across workers).")
    ] = None,
    checkpoints: Annotated[
        str | None, typer.Option(help="Checkpoint store URL (redis://… across workers).")
    ] = None,
    locks: Annotated[
        str | None, typer.Option(help="Run lock URL (redis://… across workers).")
    ] = None,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    lock_ttl: Annotated[
        float, typer.Option(min=0.5, help="Seconds a dead worker's run keeps its session locked.")
    ] = 10.0,
    keys_file: Annotated[
        Path | None,
        typer.Option("--keys-file", help=f"principal=key lines (else ${KEYS_ENV})."),
    ] = None,
    public: Annotated[
        bool, typer.Option("--public", help="Let callers without a credential in (opt-in).")
    ] = False,
    engine: Annotated[
        str | None,
        typer.Option(help="Also serve this Engine (package.module:attribute) at /v1/engine."),
    ] = None,
    trusted_keys: Annotated[
        Path | None,
        typer.Option(
            "--trusted-keys", help="'key_id public_key' lines: the engines that may call it."
        ),
    ] = None,
    trace_content: Annotated[
        bool,
        typer.Option(
            "--trace-content", help="Let the trace inspector keep raw text (off: figures only)."
        ),
    ] = False,
    cors_origin: Annotated[
        list[str] | None, typer.Option("--cors-origin", help="An origin CORS allows (repeatable).")
    ] = None,
    debug: Debug = False,
) -> None:
    """Serve an agent over HTTP: sessions, SSE streams, decisions (private by default).

    Every request needs a credential (``Authorization: Bearer <key>``) from
    ``--keys-file`` or ``$MAINSPRING_API_KEYS``; with none configured a key is
    generated and printed. Several ``--workers`` need shared stores (SQLite
    on one machine; PostgreSQL sessions with Redis checkpoints and locks
    across machines) and a shared ``$MAINSPRING_SIGNING_KEY``. Exit codes:
    2 a configuration error (a busy port, the server extra missing), 1 a failure.
    """
    with failing_cleanly(debug=debug):
        import uvicorn

        import mainspring.server  # noqa: F401 - fails early, naming the extra

        if agent is not None:
            from mainspring._agent_spec import load_agent

            load_agent(agent)  # a bad agent string fails here, before anything starts
        engine_keys: dict[str, str] = {}
        if engine is not None:
            from mainspring.server.app import load_engine

            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            load_engine(engine)  # fails here, before anything starts
            engine_keys = _trusted(trusted_keys)
        keys = _keys(keys_file)
        err = Console(stderr=True, highlight=False)
        generated = None
        if not keys and not public:
            generated = secrets.token_urlsafe(24)
            keys = {generated: "local"}
        signing = _signing_key()
        if workers > 1:
            shared = [store, sessions, checkpoints, locks]
            if any(url is not None and url.startswith("memory:") for url in shared):
                if sessions is None or checkpoints is None or locks is None:
                    raise ConfigError(
                        "several workers need shared stores: --store sqlite:///file.db, or "
                        "--sessions postgresql://… --checkpoints redis://… --locks redis://…"
                    )
            signing = signing or secrets.token_hex(32)  # one key for all the workers
        if host not in _LOOPBACK and public:
            err.print(f"warning: serving {host} publicly, without credentials", style="yellow")
        _port_free(host, port)
        fields: dict[str, Any] = {
            "store": store,
            "sessions": sessions,
            "checkpoints": checkpoints,
            "locks": locks,
            "api_keys": keys or None,
            "public": public,
            "lock_ttl": lock_ttl,
            "cors_origins": list(cors_origin or ()),
            "engine": engine,
            "trace_content": trace_content,
            "engine_keys": engine_keys or None,
        }
        if signing:
            fields["signing_key"] = signing
        from mainspring.server.app import CONFIG_ENV

        os.environ[CONFIG_ENV] = json.dumps({"agent": agent, "config": fields})
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        err.print(f"serving {agent or 'the demo agent'} at http://{shown}:{port}")
        if generated is not None:
            err.print(
                f"API key (send as 'Authorization: Bearer <key>'): {generated}", soft_wrap=True
            )
            err.print(f"chat page: http://{shown}:{port}/?key={generated}", soft_wrap=True)
        else:
            err.print(f"chat page: http://{shown}:{port}/ (it asks for your key)")
        try:
            uvicorn.run(
                "mainspring.server.app:app_from_env",
                factory=True,
                host=host.strip("[]"),
                port=port,
                workers=workers,
                log_level="warning",
                access_log=False,
                timeout_graceful_shutdown=10,
            )
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
