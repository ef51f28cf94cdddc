"""``mainspring mcp serve``: an agent's tools and skills served to MCP clients (stdio or HTTP).

With ``--store URL`` (a session store: ``sqlite:///…``, ``postgresql://…``) the
used approval nonces and the auto-approved spend live in that store, and the
2026-07-28 ``requestState`` is sealed with a key derived from the deployment's
approval-signing key (``$MAINSPRING_SIGNING_KEY``, else the key ``mainspring
serve`` keeps beside a SQLite file): several ``mcp serve --http`` processes
behind one balancer then share every "at most once" guard.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import anyio
import typer
from rich.console import Console

from mainspring._agent_spec import load_named
from mainspring.agent import Agent
from mainspring.cli.exit import Debug, ExitCode, failing_cleanly
from mainspring.cli.serve_keys import signing_key
from mainspring.errors import ConfigError
from mainspring.stores.records import shared_records
from mainspring.stores.urls import open_session_store, sqlite_file

if TYPE_CHECKING:
    from mainspring.mcp.offers import McpServe

__all__ = ["TOKEN_ENV", "mcp_app", "mcp_serve"]

mcp_app = typer.Typer(name="mcp", help="Model Context Protocol.", no_args_is_help=True)


TOKEN_ENV = "MAINSPRING_MCP_TOKEN"
"""The environment variable `mcp serve --http` reads its bearer token from."""


def _mcp_token(token_file: Path | None) -> str | None:
    import os

    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read --token-file {token_file}: {exc.strerror}") from None
        if not token:
            raise ConfigError(f"--token-file {token_file} is empty")
        return token
    return os.environ.get(TOKEN_ENV, "").strip() or None


_SEALING = b"mainspring mcp request-state"
"""What the request-state key is derived for (never the approval-signing key itself)."""


def _sealing_key(store: str | None, err: Console) -> bytes | None:
    """The request-state key every server on ``store`` shares (``None``: this process's own)."""
    if store is None:
        return None
    key = signing_key(sqlite_file(store), in_memory=store.startswith("memory:"), workers=1)
    err.print(key.note, soft_wrap=True, style=None if key.lasting else "yellow")
    if key.hex is None:
        return None
    return hmac.new(bytes.fromhex(key.hex), _SEALING, hashlib.sha256).digest()


async def _serve_mcp(
    chosen: Agent | McpServe,
    *,
    http: bool,
    host: str,
    port: int,
    expose_confirm: bool,
    skills: list[str],
    token: str | None,
    allowed_hosts: list[str],
    store: str | None,
) -> None:
    from mcp.server.request_state import RequestStateSecurity

    from mainspring.mcp.server import build_mcp_server, serve_stdio  # needs the extra
    from mainspring.skills import SkillCatalog

    catalog = SkillCatalog(skills) if skills else None
    opened = await open_session_store(store) if store is not None else None
    try:
        sealing = _sealing_key(store, Console(stderr=True, highlight=False))
        security = RequestStateSecurity(keys=[sealing]) if sealing is not None else None
        server = build_mcp_server(
            chosen,
            skills=catalog,
            expose_confirm=expose_confirm,
            request_state_security=security,
            store=shared_records(opened),
        )
        if not http:
            await serve_stdio(server)
            return
        await _serve_mcp_http(
            server, host=host, port=port, token=token, allowed_hosts=allowed_hosts
        )
    except BaseExceptionGroup as group:  # the task group's: show the one failure plainly
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    finally:
        if opened is not None:
            with anyio.CancelScope(shield=True):
                await opened.aclose()


async def _serve_mcp_http(
    server: Any, *, host: str, port: int, token: str | None, allowed_hosts: list[str]
) -> None:
    from mainspring.mcp.server import serve_http

    async with anyio.create_task_group() as tg:
        bound = await tg.start(
            lambda task_status: serve_http(
                server,
                host=host,
                port=port,
                token=token,
                allow_remote=token is not None,
                allowed_hosts=allowed_hosts,
                task_status=task_status,
            )
        )
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        auth = " (bearer token required)" if token is not None else ""
        Console(stderr=True, highlight=False).print(
            f"serving MCP at http://{shown}:{bound}/mcp{auth}"
        )


@mcp_app.command("serve")
def mcp_serve(
    agent: Annotated[
        str | None,
        typer.Argument(
            help=(
                "The agent, or an McpServe (an agent with resources and prompts), "
                "as package.module:attribute (default: the demo agent)."
            )
        ),
    ] = None,
    http: Annotated[bool, typer.Option("--http", help="Streamable HTTP instead of stdio.")] = False,
    host: Annotated[
        str, typer.Option(help="HTTP host (loopback; another one needs a token).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="HTTP port (0: any free one).")
    ] = 8000,
    token_file: Annotated[
        Path | None,
        typer.Option("--token-file", help=f"A file holding the bearer token (else ${TOKEN_ENV})."),
    ] = None,
    expose_confirm: Annotated[
        bool,
        typer.Option(
            "--expose-confirm",
            help=(
                "Also expose tools that need approval, marked as such (asked of clients "
                "that declare elicitation; client-executed tools are never exposed)."
            ),
        ),
    ] = False,
    skills: Annotated[
        list[str] | None, typer.Option("--skills", help="A skills folder (repeatable).")
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A host name HTTP requests may address besides loopback (repeatable).",
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="A session store every server behind one URL shares (sqlite:///file.db, "
            "postgresql://…): used approvals and spend totals (default: this process's memory).",
        ),
    ] = None,
    debug: Debug = False,
) -> None:
    """Serve an agent's tools (and skills, as prompts) to MCP clients.

    Over HTTP it prints its URL at start; with a token (``--token-file`` or
    ``$MAINSPRING_MCP_TOKEN``) every request needs ``Authorization: Bearer
    <token>``, and a non-loopback ``--host`` is refused without one. Requests
    must address a loopback host, the ``--host`` address or an
    ``--allowed-host`` name (DNS rebinding), and a ``POST`` must be JSON.
    With ``--store``, approvals used and auto-approved spend are kept in that
    store, and every server on it seals approval rounds with one key, so
    several behind one URL share those guards.
    Ctrl-C stops it at once (exit 130). Exit codes: 2 a configuration error (the
    port is taken, the mcp extra is missing…); 1 a failure.
    """
    with failing_cleanly(debug=debug, server=True):
        try:
            import mainspring.mcp.server  # noqa: F401 - fails first, naming the extra
        except ImportError as exc:
            raise ImportError('mainspring mcp serve needs: pip install "mainspring[mcp]"') from exc
        chosen = _load_served(agent) if agent is not None else _demo_agent()
        for folder in skills or []:
            if not Path(folder).is_dir():
                raise ConfigError(f"--skills {folder}: no such folder (give a folder of skills)")
        token = _mcp_token(token_file) if http else None
        hosts = list(allowed_host or ())
        if http:
            from mainspring._http_guard import allowed_hosts, is_loopback

            allowed_hosts(hosts)  # a malformed name fails here

            if not is_loopback(host) and token is None:
                raise ConfigError(
                    f"refusing to serve MCP on {host!r} without a bearer token "
                    f"(set ${TOKEN_ENV} or pass --token-file)"
                )
        try:
            anyio.run(
                lambda: _serve_mcp(
                    chosen,
                    http=http,
                    host=host,
                    port=port,
                    expose_confirm=expose_confirm,
                    skills=skills or [],
                    token=token,
                    allowed_hosts=hosts,
                    store=store,
                )
            )
        except OSError as exc:  # the address is taken or cannot be bound
            if exc.errno == errno.EADDRINUSE:
                problem = f"{host}:{port} is in use; pick another --port"
            else:
                problem = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
            raise ConfigError(problem) from None
        except KeyboardInterrupt:
            raise typer.Exit(ExitCode.INTERRUPTED) from None  # a server stopped: nothing to say


def _load_served(spec: str) -> Agent | McpServe:
    """The agent, or the :class:`McpServe` (an agent with resources and prompts), ``spec`` names."""
    from mainspring.mcp.offers import McpServe

    kinds = cast("type[Agent | McpServe]", (Agent, McpServe))
    return load_named(spec, kinds, "an Agent or an McpServe")


def _demo_agent() -> Agent:
    """The offline wallet agent (:mod:`mainspring.demo`, loaded only when it is the one)."""
    from mainspring.demo import demo_agent

    return demo_agent()
