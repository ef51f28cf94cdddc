"""``mainspring mcp serve``: an agent's tools and skills served to MCP clients (stdio or HTTP)."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.console import Console

from mainspring._agent_spec import load_agent
from mainspring._cli_exit import Debug, ExitCode, failing_cleanly
from mainspring.agent import Agent
from mainspring.demo import demo_agent
from mainspring.errors import ConfigError

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


async def _serve_mcp(
    chosen: Agent,
    *,
    http: bool,
    host: str,
    port: int,
    expose_confirm: bool,
    skills: list[str],
    token: str | None,
    allowed_hosts: list[str],
) -> None:
    from mainspring.mcp.server import build_mcp_server, serve_stdio  # needs the extra
    from mainspring.skills import SkillCatalog

    catalog = SkillCatalog(skills) if skills else None
    server = build_mcp_server(chosen, skills=catalog, expose_confirm=expose_confirm)
    if not http:
        await serve_stdio(server)
        return
    try:
        await _serve_mcp_http(
            server, host=host, port=port, token=token, allowed_hosts=allowed_hosts
        )
    except BaseExceptionGroup as group:  # the task group's: show the one failure plainly
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


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
        typer.Argument(help="The agent, as package.module:attribute (default: the demo agent)."),
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
            "--expose-confirm", help="Also expose tools that need approval, marked as such."
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
    debug: Debug = False,
) -> None:
    """Serve an agent's tools (and skills, as prompts) to MCP clients.

    Over HTTP it prints its URL at start; with a token (``--token-file`` or
    ``$MAINSPRING_MCP_TOKEN``) every request needs ``Authorization: Bearer
    <token>``, and a non-loopback ``--host`` is refused without one. Requests
    must address a loopback host, the ``--host`` address or an
    ``--allowed-host`` name (DNS rebinding), and a ``POST`` must be JSON.
    Ctrl-C stops it at once (exit 130). Exit codes: 2 a configuration error (the
    port is taken, the mcp extra is missing…); 1 a failure.
    """
    with failing_cleanly(debug=debug, server=True):
        try:
            import mainspring.mcp.server  # noqa: F401 - fails first, naming the extra
        except ImportError as exc:
            raise ImportError('mainspring mcp serve needs: pip install "mainspring[mcp]"') from exc
        chosen = load_agent(agent) if agent is not None else demo_agent()
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
