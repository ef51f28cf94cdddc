"""How a server is set up: stores, credentials, keys and limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from mainspring._http_guard import allowed_hosts
from mainspring.errors import ConfigError
from mainspring.server._auth import Authenticator

__all__ = ["ServerConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """Settings of :func:`~mainspring.server.create_app`.

    Private by default: with neither ``api_keys`` nor ``authenticator`` (and
    not ``public``), every request is refused with 401. Guarded always, also
    when ``public``: a request must address a loopback host or one of
    ``allowed_hosts`` (else 421; DNS rebinding), come from no ``Origin`` or one
    on those hosts or in ``cors_origins`` (else 403), and a ``POST`` must be
    JSON or carry a credential header (else 415; no cross-site form post).
    """

    store: str | None = "memory://"
    """One URL for every role its backend can hold (see ``open_stores``)."""
    sessions: str | None = None
    """Session store URL (``postgresql://…`` across workers), overriding ``store``."""
    checkpoints: str | None = None
    """Checkpoint store URL (``redis://…`` across workers), overriding ``store``."""
    locks: str | None = None
    """Run lock URL (``redis://…`` across workers), overriding ``store``."""
    api_keys: dict[str, str] | None = None
    """``{key: principal}``: the credentials the server accepts."""
    authenticator: Authenticator | None = None
    """The host's own authentication (tried before ``api_keys``)."""
    public: bool = False
    """Let callers without a credential in, all as one anonymous principal."""
    signing_key: bytes | None = None
    """Signs approval ids; every worker must share it (random per process when unset)."""
    cors_origins: tuple[str, ...] = ()
    """Origins allowed by CORS; none (CORS off) by default."""
    allowed_hosts: tuple[str, ...] = ()
    """Host names requests may address besides loopback (``api.example.com``): DNS rebinding."""
    max_body_bytes: int = 1_000_000
    """Bodies larger than this are refused with 413."""
    rate_per_minute: int = 600
    """Requests per principal per minute on this worker (0: no limit)."""
    rate_burst: int = 60
    """Requests a principal may make at once before the rate applies."""
    lock_ttl: float = 10.0
    """Seconds a dead worker's run keeps its session locked."""
    worker: str | None = None
    """This worker's name in locks and logs (a UUID4 when unset)."""
    shutdown_grace: float = 5.0
    """Seconds a shutdown gives running streams to reach their terminal event."""
    keep_finished: float = 60.0
    """Seconds a finished run's events stay in this worker's memory for reconnects."""
    gc_freeze: bool = False
    """Once started, collect and then freeze what the process holds (``gc.freeze()``): the
    modules, classes and app built at start-up are never scanned again, so the full
    collections a busy server still runs pause the event loop for its live objects only.
    ``mainspring serve`` turns it on (it owns its worker processes); a host embedding the
    app decides for its own process (frozen objects are never freed)."""
    tracer_provider: Any = None
    """An OpenTelemetry ``TracerProvider`` for the spans (default: the global one)."""
    engine: Any = None
    """A :class:`~mainspring.engine.Engine` to serve to other engines at ``/v1/engine``
    (its information and exported functions; every request signed, its policy applied)."""
    engine_keys: dict[str, str] | None = None
    """The engines trusted to call it: ``{key id: Ed25519 public key text}``."""
    trace_runs: int = 200
    """Runs the trace inspector (``/trace``) keeps in this worker's memory (0: no recorder)."""
    trace_activities: int = 500
    """Activities (tool calls, retries, events…) kept per recorded run."""
    trace_content: bool = False
    """Let the trace recorder keep raw text (messages, tool data, prompt segments)."""
    max_runs_per_principal: int = 64
    """Runs one principal may have going on this worker at once; past it 429 (0: no limit)."""
    max_steering_per_principal: int = 64
    """Steering messages one principal may have waiting on this worker's runs; past it 429
    (0: no limit)."""
    aisdk_while_pending: Literal["show", "reject"] = "show"
    """A ``useChat`` message sent while an approval waits: ``"show"`` streams the waiting
    approval again; ``"reject"`` rejects it with the message as the reason and goes on."""
    aisdk_abort_cancels: bool = True
    """A ``useChat`` request closed mid-stream (``stop()``, a closed tab) cancels its run
    (a chat body's ``cancelOnAbort`` overrides it per request)."""

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1:
            raise ConfigError("max_body_bytes must be positive")
        if self.rate_per_minute < 0 or self.rate_burst < 1:
            raise ConfigError("rate_per_minute must be >= 0 and rate_burst >= 1")
        if self.lock_ttl <= 0 or self.shutdown_grace < 0 or self.keep_finished < 0:
            raise ConfigError("lock_ttl must be positive; shutdown_grace, keep_finished >= 0")
        if self.trace_runs < 0 or self.trace_activities < 1:
            raise ConfigError("trace_runs must be >= 0 and trace_activities >= 1")
        if self.max_runs_per_principal < 0 or self.max_steering_per_principal < 0:
            raise ConfigError("max_runs_per_principal and max_steering_per_principal must be >= 0")
        if self.aisdk_while_pending not in ("show", "reject"):
            raise ConfigError("aisdk_while_pending must be 'show' or 'reject'")
        allowed_hosts(self.allowed_hosts)  # a malformed name fails here
        if self.store is None and self.sessions is None:
            raise ConfigError("a server needs a session store: store= or sessions=")
