"""The ASGI application: :func:`create_app` (and ``mainspring serve``).

```python
from mainspring.demo import demo_agent
from mainspring.server import ServerConfig, create_app

app = create_app(demo_agent(), ServerConfig(api_keys={"a-long-random-key-0001": "alice"}))
# uvicorn module:app, or `mainspring serve` (which prints a key when none is set)
```
"""

from __future__ import annotations

import gc
import json
import logging
import math
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware

from mainspring._http_guard import CrossSiteGuard, HostGuard
from mainspring.agent import Agent
from mainspring.errors import (
    ApprovalError,
    ConfigError,
    DecisionConflict,
    FieldNotModifiable,
    InputChanged,
    SessionBusy,
    StoreError,
    ToolInputError,
    UnknownAttempt,
)
from mainspring.server._a2a import a2a_router
from mainspring.server._a2a_tasks import SharedTaskStore, task_store_for
from mainspring.server._agui import agui_router
from mainspring.server._aisdk import aisdk_router
from mainspring.server._api import router
from mainspring.server._auth import ApiKeys, Authenticator
from mainspring.server._config import ServerConfig
from mainspring.server._deps import RateLimitedRequest, Unauthorized
from mainspring.server._host import NotFound, SessionHost, TooManyRuns
from mainspring.server._limits import BodyLimit, RateLimiter
from mainspring.server._ops import AccessLog, ops_router
from mainspring.server._pages import pages_router, recorder_for
from mainspring.server._signing import ApprovalSigner, BadApproval
from mainspring.stores import open_stores
from mainspring.stores.records import shared_records

if TYPE_CHECKING:
    from mainspring.engine.signing import Verifier
    from mainspring.stores.urls import Stores

__all__ = ["CONFIG_ENV", "app_from_env", "create_app"]

log = logging.getLogger("mainspring.server")

CONFIG_ENV = "MAINSPRING_SERVER_CONFIG"
"""The environment variable through which ``mainspring serve --workers N`` configures workers."""

# The order matters: the most specific class first.
_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (Unauthorized, 401),
    (BadApproval, 403),
    (NotFound, 404),
    (UnknownAttempt, 404),
    (SessionBusy, 409),
    (DecisionConflict, 409),
    (InputChanged, 409),
    (FieldNotModifiable, 422),
    (ToolInputError, 422),
    (ApprovalError, 422),
    (ConfigError, 400),
    (RateLimitedRequest, 429),
    (TooManyRuns, 429),
    (StoreError, 503),
)


def _error(status: int, kind: str, message: str, **extra: object) -> JSONResponse:
    detail: dict[str, object] = {"type": kind, "message": message}
    detail.update(extra)
    return JSONResponse({"error": detail}, status_code=status)


async def _on_error(request: Request, exc: Exception) -> JSONResponse:
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
            if status == 503:
                log.warning("store unavailable: %s", exc)
                message = "a store is unavailable; retry shortly"
            response = _error(status, type(exc).__name__, message)
            if status == 401:
                response.headers["WWW-Authenticate"] = "Bearer"
            if isinstance(exc, RateLimitedRequest):
                response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
            return response
    log.exception("internal error on %s %s", request.method, request.url.path)
    return _error(500, "InternalError", "internal error")


async def _on_invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = [
        {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type")}
        for e in exc.errors()
    ]
    return _error(422, "InvalidRequest", "the request is not valid", details=details)


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return _error(exc.status_code, "HTTPError", str(exc.detail))


def create_app(agent: Agent | None = None, config: ServerConfig | None = None) -> FastAPI:
    """The server of ``agent`` (the demo agent by default) as an ASGI app.

    Stores are opened when the app starts (its lifespan) and closed when it
    stops; a stop cancels running turns and gives them ``shutdown_grace``
    seconds to reach a terminal event that a reconnect will find.

    Raises:
        ConfigError: A bad configuration (an API key too short…).
    """
    if agent is None:
        from mainspring.demo import demo_agent

        agent = demo_agent()
    config = config or ServerConfig()
    authenticators: list[Authenticator] = []
    if config.authenticator is not None:
        authenticators.append(config.authenticator)
    if config.api_keys:
        authenticators.append(ApiKeys(config.api_keys))
    signer = ApprovalSigner(config.signing_key)
    recorder = recorder_for(config)
    if recorder is not None:
        agent = recorder.instrument(agent)
    if config.signing_key is None:
        log.info("no signing key configured: approval ids are valid on this process only")
    engine_app = _engine_app(config) if config.engine is not None else None
    tasks = task_store_for(config)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stores = await open_stores(
            config.store,
            sessions=config.sessions,
            checkpoints=config.checkpoints,
            locks=config.locks,
        )
        try:
            if stores.sessions is None or stores.checkpoints is None or stores.locks is None:
                raise ConfigError(
                    "a server needs sessions, checkpoints and locks: "
                    "give store= one URL that holds them all, or each one"
                )
            if engine_app is not None:
                _share_engine_state(config, engine_app[1], stores)
            _share_engine_spend(config, stores.sessions)
            _share_a2a_tasks(tasks, stores.sessions)
            async with anyio.create_task_group() as tg:
                observe = recorder.observe if recorder is not None else None
                host = SessionHost(agent, config, stores, signer, tg, observe=observe)
                app.state.host = host
                tg.start_soon(host.cancel_on_stop)
                tg.start_soon(host.watch_cancels)
                _freeze_start_up(config)
                try:
                    yield
                finally:
                    await host.shutdown()
                    tg.cancel_scope.cancel()
        finally:
            await stores.aclose()

    app = FastAPI(
        title="mainspring",
        summary=f"The {agent.name} agent over HTTP: sessions, streams, decisions.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.config = config
    app.state.authenticators = authenticators
    app.state.limiter = RateLimiter(per_minute=config.rate_per_minute, burst=config.rate_burst)
    app.state.agent = agent
    app.state.recorder = recorder
    app.include_router(router)
    app.include_router(aisdk_router)
    app.include_router(agui_router)
    app.include_router(ops_router)
    app.include_router(a2a_router(agent, config, tasks))
    if engine_app is not None:
        app.mount("/v1/engine", engine_app[0])
    app.include_router(pages_router)
    app.add_exception_handler(RequestValidationError, _on_invalid)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_exception_handler(Exception, _on_error)
    for cls, _status in _STATUS:
        app.add_exception_handler(cls, _on_error)
    if config.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Last-Event-ID", "X-API-Key"],
        )
    app.add_middleware(BodyLimit, limit=config.max_body_bytes)
    app.add_middleware(CrossSiteGuard)  # no state change from a cross-site form post
    hosts, origins = config.allowed_hosts, config.cors_origins
    app.add_middleware(HostGuard, hosts=hosts, origins=origins)  # DNS rebinding
    app.add_middleware(
        AccessLog, worker=config.worker or "", tracer_provider=config.tracer_provider
    )
    return app


def _freeze_start_up(config: ServerConfig) -> None:
    """What start-up built leaves every later collection (``ServerConfig.gc_freeze``)."""
    if config.gc_freeze:
        gc.collect()  # start-up's garbage goes first: frozen objects are never freed
        gc.freeze()


def _share_engine_state(config: ServerConfig, verifier: Verifier, stores: Stores) -> None:
    """Nonces and paused calls go where every worker sees them: the shared store."""
    records = shared_records(stores.sessions, stores.locks)
    if records is not None:
        verifier.records = records
        config.engine.share(records)


def _share_a2a_tasks(tasks: object, sessions: object) -> None:
    """A2A tasks on a SQLite or PostgreSQL deployment live in its session store."""
    if isinstance(tasks, SharedTaskStore):
        tasks.bind(sessions)


def _share_engine_spend(config: ServerConfig, sessions: object) -> None:
    """The served engine's direct calls count spend in the server's session store.

    So every worker of ``serve --workers N --engine …`` sees every other's
    auto-approved writes under the cap (unless the engine names a store of its own).
    """
    from mainspring.engine import Engine
    from mainspring.stores.base import SessionStore

    engine = config.engine
    if isinstance(engine, Engine) and engine.spend_store is None:
        if isinstance(sessions, SessionStore):
            engine.spend_store = sessions


def _engine_app(config: ServerConfig) -> tuple[Starlette, Verifier]:
    """The signed cross-engine routes of ``config.engine``, and their verifier.

    The routes authenticate requests themselves; the lifespan gives the
    verifier (and the engine) the store every worker shares.
    """
    from mainspring.engine import Engine
    from mainspring.engine.remote import engine_routes
    from mainspring.engine.signing import Verifier, public_key_from_text

    if not isinstance(config.engine, Engine):
        raise ConfigError(f"ServerConfig.engine is an Engine, not {type(config.engine).__name__}")
    keys = {kid: public_key_from_text(text) for kid, text in (config.engine_keys or {}).items()}
    verifier = Verifier(keys)
    return Starlette(routes=engine_routes(config.engine, verifier)), verifier


def app_from_env() -> FastAPI:
    """The app a worker of ``mainspring serve --workers N`` builds (a uvicorn factory).

    Reads ``$MAINSPRING_SERVER_CONFIG``: ``{"agent": "pkg.mod:attr" | null,
    "config": {ServerConfig fields}}``, the signing key hex-encoded.
    """
    from mainspring._agent_spec import load_agent

    raw = json.loads(os.environ.get(CONFIG_ENV, "{}"))
    fields = dict(raw.get("config", {}))
    if fields.get("signing_key"):
        fields["signing_key"] = bytes.fromhex(fields["signing_key"])
    for name in ("cors_origins", "allowed_hosts"):
        if name in fields:
            fields[name] = tuple(fields[name])
    if fields.get("engine"):
        fields["engine"] = load_engine(fields["engine"])
    spec = raw.get("agent")
    agent = load_agent(spec) if spec else None
    return create_app(agent, ServerConfig(**fields))


def load_engine(spec: str) -> object:
    """The :class:`~mainspring.engine.Engine` named by ``"package.module:attribute"``.

    The attribute may be an engine or a function of no arguments returning one.

    Raises:
        ConfigError: The string is malformed, the module or attribute is missing,
            or it does not give an Engine.
    """
    from mainspring._agent_spec import load_named
    from mainspring.engine import Engine

    return load_named(spec, Engine, "an Engine")
