"""The server's pages for people: the chat page (``/``) and the trace inspector (``/trace``).

The pages are static files shipped inside the package (``server/web/``):
HTML, CSS and plain JavaScript, no build step, nothing fetched from anywhere
else (a Content-Security-Policy allows only this origin). The chat renders
Markdown in the browser with two files vendored at pinned versions under
``web/vendor/`` (markdown-it, DOMPurify; see its README). They hold no data,
so they are served without a credential; every call they make goes to the
private API with the key the user gives the page (kept in the tab's
``sessionStorage``, sent as ``Authorization: Bearer``).

The trace inspector reads ``/v1/trace/…``: the runs this worker's
:class:`~mainspring.server._recorder.TraceRecorder` holds, the caller's own
only.
"""

from __future__ import annotations

from importlib import resources
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import JsonValue
from starlette.requests import HTTPConnection

from mainspring.devtools.report import render_html
from mainspring.server._auth import Principal
from mainspring.server._config import ServerConfig
from mainspring.server._deps import authenticated
from mainspring.server._host import NotFound
from mainspring.server._recorder import RunTrace, TraceRecorder
from mainspring.server._traces import run_detail

__all__ = ["pages_router", "recorder_for"]

_ASSETS: dict[str, str] = {
    "app.css": "text/css; charset=utf-8",
    "common.js": "text/javascript; charset=utf-8",
    "chat.js": "text/javascript; charset=utf-8",
    "markdown.js": "text/javascript; charset=utf-8",
    "trace.js": "text/javascript; charset=utf-8",
    "icon.svg": "image/svg+xml",
    # Vendored at pinned versions (web/vendor/README.md): Markdown for the chat.
    "vendor/markdown-it.min.js": "text/javascript; charset=utf-8",
    "vendor/purify.min.js": "text/javascript; charset=utf-8",
}
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

pages_router = APIRouter()
Caller = Annotated[Principal, Depends(authenticated)]


def recorder_for(config: ServerConfig) -> TraceRecorder | None:
    """The trace recorder ``config`` asks for (``None`` with ``trace_runs=0``)."""
    if config.trace_runs == 0:
        return None
    return TraceRecorder(
        max_runs=config.trace_runs,
        max_activities=config.trace_activities,
        include_content=config.trace_content,
    )


def _asset(name: str) -> bytes:
    return resources.files("mainspring.server").joinpath("web", *name.split("/")).read_bytes()


def _page(name: str) -> Response:
    return Response(_asset(name), media_type="text/html; charset=utf-8", headers=_HEADERS)


@pages_router.get("/", include_in_schema=False)
async def chat_page() -> Response:
    """The chat page (holds no data: the API calls it makes need the credential)."""
    return _page("chat.html")


@pages_router.get("/trace", include_in_schema=False)
async def trace_page() -> Response:
    """The trace inspector page."""
    return _page("trace.html")


@pages_router.get("/ui/{name:path}", include_in_schema=False)
async def asset(name: str) -> Response:
    """A file of the pages (only the ones shipped for them)."""
    media_type = _ASSETS.get(name)
    if media_type is None:
        raise NotFound(f"no asset {name[:80]!r}")
    return Response(_asset(name), media_type=media_type, headers=_HEADERS)


def _recorder(conn: HTTPConnection) -> TraceRecorder:
    recorder: TraceRecorder | None = getattr(conn.app.state, "recorder", None)
    if recorder is None:
        raise NotFound("this server records no traces (trace_runs=0)")
    return recorder


Recorder = Annotated[TraceRecorder, Depends(_recorder)]


def _run(recorder: TraceRecorder, caller: Principal, run_id: str) -> RunTrace:
    run = recorder.run(caller.id, run_id)
    if run is None:
        raise NotFound(f"no run {run_id[:80]!r}")
    return run


@pages_router.get("/v1/trace/runs", tags=["trace"])
async def trace_runs(
    caller: Caller,
    recorder: Recorder,
    q: Annotated[str, Query(max_length=200)] = "",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, JsonValue]:
    """The caller's recorded runs, newest first; ``q`` keeps those matching all its words."""
    runs = recorder.runs(caller.id, query=q, limit=limit)
    return {
        "runs": [run.summary() for run in runs],
        "include_content": recorder.include_content,
        "max_runs": recorder.max_runs,
    }


@pages_router.get("/v1/trace/runs/{run_id}", tags=["trace"])
async def trace_run(run_id: str, caller: Caller, recorder: Recorder) -> JSONResponse:
    """One run: its model calls (context composition, prefix, cache) and activities."""
    run = _run(recorder, caller, run_id)
    return JSONResponse(
        run_detail(run, include_content=recorder.include_content),
        headers={"Content-Disposition": f'inline; filename="run-{run.run_id}.json"'},
    )


@pages_router.get("/v1/trace/runs/{run_id}/report", tags=["trace"])
async def trace_report(run_id: str, caller: Caller, recorder: Recorder) -> HTMLResponse:
    """One run as the standalone HTML report (``mainspring report``'s page)."""
    run = _run(recorder, caller, run_id)
    page = render_html(run.snapshots, title=f"mainspring run {run.run_id}")
    return HTMLResponse(
        page, headers={"Content-Disposition": f'attachment; filename="run-{run.run_id}.html"'}
    )
