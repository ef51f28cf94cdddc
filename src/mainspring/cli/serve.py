"""``mainspring serve``: the application server (:mod:`mainspring.server`) under uvicorn."""

from __future__ import annotations

import errno
import json
import os
import secrets
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.console import Console

from mainspring._http_guard import allowed_hosts, served_address
from mainspring.cli.exit import Debug, ExitCode, error_line, failing_cleanly
from mainspring.cli.serve_keys import SIGNING_KEY_ENV, signing_key
from mainspring.errors import ConfigError
from mainspring.stores.urls import open_stores, sqlite_file

__all__ = ["DEFAULT_STORE", "KEYS_ENV", "SIGNING_KEY_ENV", "serve"]

KEYS_ENV = "MAINSPRING_API_KEYS"
"""``principal=key`` entries (comma or newline separated) a server accepts."""
DEFAULT_STORE = "sqlite:///mainspring.db"
"""Where ``serve`` keeps sessions unless told otherwise: a file in the working directory."""

_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
_SHOWN = {
    "memory": "memory://",
    "sqlite": "sqlite:///file.db",
    "postgresql": "postgresql://…",
    "redis": "redis://host:port",
}


def _read(path: Path, option: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {option} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{option} {path} is not UTF-8 text") from None


def _keys(keys_file: Path | None) -> dict[str, str]:
    from mainspring.server import ApiKeys
    from mainspring.server._auth import parse_keys

    text = _read(keys_file, "--keys-file") if keys_file else os.environ.get(KEYS_ENV, "")
    parsed = parse_keys(text)
    ApiKeys(parsed)  # validates lengths and names
    return parsed


def _trusted(path: Path | None) -> dict[str, str]:
    """``{key id: public key text}`` from ``key_id public_key`` lines."""
    if path is None:
        return {}
    trusted: dict[str, str] = {}
    for number, raw in enumerate(_read(path, "--trusted-keys").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key_id, _, text = line.partition(" ")
        if not text.strip():
            raise ConfigError(f"{path}:{number}: a trusted key is 'key_id public_key'")
        trusted[key_id] = text.strip()
    return trusted


def _port_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except socket.gaierror:
            raise ConfigError(f"unknown --host {host!r}: give an address or a host name") from None
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"{host}:{port} is in use; pick another --port") from None
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@dataclass(frozen=True, slots=True)
class _Stores:
    """The URL of each role, as ``open_stores`` would fill them."""

    sessions: str | None
    checkpoints: str | None
    locks: str | None

    def line(self) -> str:
        """What ``serve`` says at start-up about where things are kept."""
        if self.sessions == self.checkpoints == self.locks:
            url = self.sessions or ""
            file = sqlite_file(url)
            where = f" (the file {Path(file).resolve()})" if file else ""
            return f"store: {url}{where}"
        return (
            f"stores: sessions {self.sessions}, checkpoints {self.checkpoints}, locks {self.locks}"
        )


def _roles(store: str, sessions: str | None, checkpoints: str | None, locks: str | None) -> _Stores:
    """Which URL holds what (``store`` fills the roles its backend can hold).

    Raises:
        ConfigError: A URL of an unknown scheme (the message lists the known ones).
    """
    for url in (store, sessions, checkpoints, locks):
        sqlite_file(url)  # checks the scheme of every URL given
    for option, url, holds in (
        ("--sessions", sessions, ("memory", "sqlite", "postgresql", "postgres")),
        ("--checkpoints", checkpoints, ("memory", "sqlite", "redis", "rediss")),
        ("--locks", locks, ("memory", "sqlite", "redis", "rediss")),
    ):
        scheme = (url or "").partition("://")[0]
        if url is not None and scheme not in holds:
            raise ConfigError(
                f"{option} {url}: {scheme}:// cannot hold {option.removeprefix('--')}; "
                f"use {', '.join(_SHOWN[s] for s in holds if s in _SHOWN)}"
            )
    scheme = store.partition("://")[0]
    if scheme in ("memory", "sqlite"):
        return _Stores(sessions or store, checkpoints or store, locks or store)
    if scheme in ("redis", "rediss"):
        return _Stores(sessions, checkpoints or store, locks or store)
    return _Stores(sessions or store, checkpoints, locks)


def _check_stores(roles: _Stores) -> None:
    """Open every store once and close it: a bad URL or a store that is down fails here.

    Raises:
        ConfigError: An unknown scheme, a role its URL cannot hold, a missing role.
        StoreError: A store cannot be reached or opened.
    """

    async def trial() -> None:
        stores = await open_stores(
            sessions=roles.sessions, checkpoints=roles.checkpoints, locks=roles.locks
        )
        await stores.aclose()

    missing = [
        name for name in ("sessions", "checkpoints", "locks") if getattr(roles, name) is None
    ]
    if missing:
        raise ConfigError(
            f"no store holds {', '.join(missing)}: give --store one URL that holds them all "
            "(sqlite:///file.db), or --sessions, --checkpoints and --locks"
        )
    anyio.run(trial)


def _hosts(host: str, allowed: list[str], err: Console) -> list[str]:
    """The hosts requests may address besides loopback: ``--allowed-host`` and the address.

    Raises:
        ConfigError: A malformed ``--allowed-host``.
    """
    hosts = [*allowed, *served_address(host)]
    allowed_hosts(hosts)  # a malformed name fails here
    if host not in _LOOPBACK and not allowed:
        also = "".join(f" or {address}" for address in served_address(host))
        err.print(
            f"warning: only requests addressed to a loopback host{also} are answered; "
            "name this server's host names with --allowed-host",
            style="yellow",
            soft_wrap=True,
        )
    return hosts


def _import_server() -> Any:
    """uvicorn, once the server extra is known to be there (else the ImportError names it)."""
    import mainspring.server  # noqa: F401 - its guard names the extra

    try:
        import uvicorn
    except ImportError as exc:
        raise ImportError('mainspring serve needs: pip install "mainspring[server]"') from exc
    return uvicorn


def serve(
    agent: Annotated[
        str | None,
        typer.Argument(help="The agent, as package.module:attribute (default: the demo agent)."),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
    store: Annotated[
        str,
        typer.Option(
            help="One store URL for sessions, checkpoints and locks "
            "(memory:// keeps nothing past a restart)."
        ),
    ] = DEFAULT_STORE,
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
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A host name requests may address besides loopback (repeatable).",
        ),
    ] = None,
    debug: Debug = False,
) -> None:
    """Serve an agent over HTTP: sessions, SSE streams, decisions (private by default).

    Every request needs a credential (``Authorization: Bearer <key>``) from
    ``--keys-file`` or ``$MAINSPRING_API_KEYS``; with none configured a key is
    generated and printed. Sessions are kept in ./mainspring.db (SQLite) unless
    ``--store`` says otherwise, and approvals are signed with a key kept beside
    it (or ``$MAINSPRING_SIGNING_KEY``), so both survive a restart. Several
    ``--workers`` need shared stores (SQLite on one machine; PostgreSQL sessions
    with Redis checkpoints and locks across machines). Requests must address a
    loopback host, the ``--host`` address or an ``--allowed-host`` name (DNS
    rebinding), and a ``POST`` must be JSON or carry a key, also with
    ``--public``. Exit codes: 2 a usage or
    configuration error (a busy port, a bad URL, the server extra missing); 4 a
    store cannot be reached; 1 a failure; 130 interrupted.
    """
    with failing_cleanly(debug=debug, server=True):
        uvicorn = _import_server()
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
        roles = _roles(store, sessions, checkpoints, locks)
        in_memory = (roles.sessions or "").startswith("memory:")
        if workers > 1 and any(
            url is not None and url.startswith("memory:")
            for url in (roles.sessions, roles.checkpoints, roles.locks)
        ):
            raise ConfigError(
                "several workers need shared stores: --store sqlite:///file.db, or "
                "--sessions postgresql://… --checkpoints redis://… --locks redis://…"
            )
        _port_free(host, port)
        _check_stores(roles)
        signing = signing_key(sqlite_file(roles.sessions), in_memory=in_memory, workers=workers)
        if host not in _LOOPBACK and public:
            err.print(f"warning: serving {host} publicly, without credentials", style="yellow")
        hosts = _hosts(host, allowed_host or [], err)
        fields: dict[str, Any] = {
            "store": store,
            "sessions": sessions,
            "checkpoints": checkpoints,
            "locks": locks,
            "api_keys": keys or None,
            "public": public,
            "lock_ttl": lock_ttl,
            "cors_origins": list(cors_origin or ()),
            "allowed_hosts": hosts,
            "engine": engine,
            "trace_content": trace_content,
            "engine_keys": engine_keys or None,
            "gc_freeze": True,  # the worker processes are the server's own
        }
        if signing.hex:
            fields["signing_key"] = signing.hex
        from mainspring.server.app import CONFIG_ENV

        os.environ[CONFIG_ENV] = json.dumps({"agent": agent, "config": fields})
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        err.print(f"serving {agent or 'the demo agent'} at http://{shown}:{port}")
        err.print(roles.line(), soft_wrap=True)
        err.print(signing.note, soft_wrap=True, style=None if signing.lasting else "yellow")
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
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        except SystemExit as stopped:  # uvicorn's own exit: 3 when the app failed to start
            if stopped.code in (0, None):
                raise typer.Exit(ExitCode.OK) from None
            error_line(err, "the server stopped: it could not start (the lines above say why)")
            raise typer.Exit(ExitCode.FAILURE) from None
