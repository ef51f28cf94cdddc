"""The application server: sessions, SSE streams, decisions and resume over HTTP.

An ASGI app on FastAPI (Starlette) with sse-starlette, started by
``mainspring serve package.module:agent``. Private by default: every request
needs a credential, and every session belongs to the principal that created
it. Needs the ``server`` extra: ``pip install "mainspring[server]"``.
"""

from __future__ import annotations

try:
    import fastapi  # noqa: F401
    import sse_starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError('mainspring.server needs: pip install "mainspring[server]"') from exc

from mainspring.server._auth import ANONYMOUS, ApiKeys, Authenticator, Principal
from mainspring.server._config import ServerConfig
from mainspring.server._host import TooManyRuns
from mainspring.server._recorder import TraceRecorder, trace_event
from mainspring.server._signing import ApprovalSigner, BadApproval
from mainspring.server.app import create_app

__all__ = [
    "ANONYMOUS",
    "ApiKeys",
    "ApprovalSigner",
    "Authenticator",
    "BadApproval",
    "Principal",
    "ServerConfig",
    "TooManyRuns",
    "TraceRecorder",
    "create_app",
    "trace_event",
]
