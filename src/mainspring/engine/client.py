"""Calling a served engine: a signed client, and its exports as local tools.

:class:`RemoteEngine` sends signed requests to the routes of
:func:`mainspring.engine.remote.engine_routes`; :func:`remote_tools` turns what
the remote exports into local tools (``RT_{handle}_{tool}``,
``RA_{handle}_{agent}``), as :meth:`Engine.register_remote` adds them. The
decision wire forms (:func:`decision_to_dict`, :func:`decision_from_dict`) are
shared with the serving side. Public through :mod:`mainspring.engine.remote`;
it needs ``pip install "mainspring[remote]"`` (httpx).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from pydantic import JsonValue

from mainspring.codec import event_from_dict
from mainspring.decisions import Approve, ClientResult, Decision, Expire, Reject, decision_kind
from mainspring.engine.signing import SigningKey
from mainspring.errors import RemoteEngineError, WireFormatError
from mainspring.events import PendingAction
from mainspring.tools.context import ToolContext
from mainspring.tools.define import Tool, ToolOutput
from mainspring.tools.policy import ToolPolicy

try:
    import httpx
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError('remote engines need: pip install "mainspring[remote]"') from exc

__all__ = [
    "RemoteEngine",
    "decision_from_dict",
    "decision_to_dict",
    "pending_of",
    "remote_tools",
]


def decision_to_dict(decision: Decision) -> dict[str, JsonValue]:
    """A decision's wire form."""
    if isinstance(decision, Approve):
        return {"kind": "approved", "edits": dict(decision.edits), **_approver(decision)}
    if isinstance(decision, Reject):
        return {"kind": "rejected", "reason": decision.reason, **_approver(decision)}
    if isinstance(decision, Expire):
        return {"kind": "expired"}
    return {
        "kind": decision_kind(decision),
        "content": decision.content,
        "is_error": decision.is_error,
    }


def _approver(decision: Approve | Reject) -> dict[str, JsonValue]:
    """Who decided and under which policy version, when the decision says."""
    out: dict[str, JsonValue] = {}
    if decision.principal:
        out["principal"] = decision.principal
    if decision.policy_version is not None:
        out["policy_version"] = decision.policy_version
    return out


def _approver_of(data: dict[str, Any]) -> tuple[str, str | None]:
    principal, version = data.get("principal", ""), data.get("policy_version")
    if not isinstance(principal, str) or not (version is None or isinstance(version, str)):
        raise WireFormatError("a decision's principal and policy_version are strings")
    return principal, version


def decision_from_dict(data: object) -> Decision:
    """Parse :func:`decision_to_dict` output.

    Raises:
        WireFormatError: It is not a decision.
    """
    if not isinstance(data, dict):
        raise WireFormatError("a decision is a JSON object")
    kind = data.get("kind")
    if kind == "approved":
        edits = data.get("edits", {})
        if not isinstance(edits, dict):
            raise WireFormatError("an approval's edits are a JSON object")
        principal, version = _approver_of(data)
        return Approve(edits=edits, principal=principal, policy_version=version)
    if kind == "rejected":
        reason = data.get("reason", "The user declined.")
        if not isinstance(reason, str):
            raise WireFormatError("a rejection's reason is a string")
        principal, version = _approver_of(data)
        return Reject(reason, principal=principal, policy_version=version)
    if kind == "expired":
        return Expire()
    if kind == "client_result":
        content, is_error = data.get("content"), data.get("is_error", False)
        if not isinstance(content, str) or not isinstance(is_error, bool):
            raise WireFormatError("a client result has a string content and a boolean is_error")
        return ClientResult(content=content, is_error=is_error)
    raise WireFormatError(
        f"a decision's kind is approved, rejected, client_result or expired, not {kind!r}"
    )


class RemoteEngine:
    """A client of a served engine, signing every request with ``key``."""

    def __init__(
        self,
        handle: str,
        url: str,
        key: SigningKey,
        *,
        client: httpx.AsyncClient | None = None,
        timeout: float = 60.0,
    ) -> None:
        """``url`` is where :func:`engine_routes` are mounted (``http://host:port/engine``)."""
        self.handle = handle
        self.url = url.rstrip("/")
        self.key = key
        self._client = client
        self._timeout = timeout

    async def _request(
        self, method: str, route: str, body: dict[str, JsonValue] | None = None
    ) -> dict[str, Any]:
        content = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        path = urlsplit(self.url).path + route
        headers = self.key.sign(method, path, content)
        if content:
            headers["content-type"] = "application/json"
        client = self._client or httpx.AsyncClient(timeout=self._timeout)
        try:
            response = await client.request(
                method, self.url + route, content=content, headers=headers
            )
        except httpx.HTTPError as exc:
            raise RemoteEngineError(
                f"remote engine {self.handle!r} is unreachable: {exc}", handle=self.handle
            ) from exc
        finally:
            if self._client is None:
                await client.aclose()
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code != 200 or not isinstance(data, dict):
            message = data.get("message", "") if isinstance(data, dict) else response.text[:200]
            raise RemoteEngineError(
                f"remote engine {self.handle!r} answered {response.status_code}: {message}",
                handle=self.handle,
                status=response.status_code,
            )
        return data

    async def info(self) -> dict[str, Any]:
        """The remote's information as this engine's key may see it."""
        return await self._request("GET", "/info")

    async def call_tool(self, name: str, arguments: dict[str, JsonValue]) -> dict[str, Any]:
        """Call an exported tool; a call result."""
        return await self._request("POST", f"/tools/{name}/call", {"arguments": arguments})

    async def run_agent(self, name: str, text: str) -> dict[str, Any]:
        """Run an exported agent; a run result."""
        return await self._request("POST", f"/agents/{name}/run", {"input": text})

    async def decide(self, attempt_id: str, decision: Decision) -> dict[str, Any]:
        """Decide a paused remote call or run; its next result."""
        body: dict[str, JsonValue] = {"decision": decision_to_dict(decision)}
        return await self._request("POST", f"/decisions/{attempt_id}", body)


def pending_of(result: dict[str, Any], handle: str) -> PendingAction | None:
    """The action a remote result waits on, if it does.

    Raises:
        RemoteEngineError: The result's pending action is malformed.
    """
    data = result.get("pending")
    if data is None:
        return None
    try:
        event = event_from_dict(data)
    except ValueError as exc:
        raise RemoteEngineError(
            f"remote engine {handle!r} sent a bad action: {exc}", handle=handle
        ) from None
    if not isinstance(event, PendingAction):
        raise RemoteEngineError(f"remote engine {handle!r} sent a non-action", handle=handle)
    return event


async def remote_tools(remote: RemoteEngine) -> list[Tool]:
    """The remote's exported functions as local tools (``RT_…`` and ``RA_…``)."""
    info = await remote.info()
    tools: list[Tool] = []
    for spec in info.get("tools", []):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise RemoteEngineError(
                f"remote engine {remote.handle!r} sent a bad tool", handle=remote.handle
            )
        schema = spec.get("input_schema")
        tools.append(
            Tool(
                name=f"RT_{remote.handle}_{spec['name']}",
                description=str(spec.get("description", "")),
                input_schema=schema if isinstance(schema, dict) else {"type": "object"},
                policy=ToolPolicy(read_only=spec.get("read_only") is True, concurrency_safe=False),
                fn=_remote_fn(remote, spec["name"], agent=False),
                ctx_param="_ctx",
                is_async=True,
                meta={"remote": remote.handle, "remote_tool": spec["name"]},
            )
        )
    for spec in info.get("agents", []):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise RemoteEngineError(
                f"remote engine {remote.handle!r} sent a bad agent", handle=remote.handle
            )
        tools.append(
            Tool(
                name=f"RA_{remote.handle}_{spec['name']}",
                description=str(spec.get("description", "")) or f"Ask agent {spec['name']}.",
                input_schema=_AGENT_SCHEMA,
                policy=ToolPolicy(read_only=True, concurrency_safe=False),
                fn=_remote_fn(remote, spec["name"], agent=True),
                ctx_param="_ctx",
                is_async=True,
                meta={"remote": remote.handle, "remote_agent": spec["name"]},
            )
        )
    return tools


_AGENT_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "What to ask the agent."}},
    "required": ["input"],
    "additionalProperties": False,
}


def _remote_fn(
    remote: RemoteEngine, name: str, *, agent: bool
) -> Callable[..., Awaitable[ToolOutput]]:
    async def call(_ctx: ToolContext, **arguments: JsonValue) -> ToolOutput:
        waiting = f"remote-attempt:{_ctx.session_id}:{_ctx.tool_use_id}"
        if _ctx.decision is not None:
            attempt = _ctx.component_cache.pop(waiting, None)
            if not isinstance(attempt, str):
                return ToolOutput(content="no remote action waits on this decision", is_error=True)
            result = await remote.decide(attempt, _ctx.decision)
        elif agent:
            text = arguments.get("input")
            result = await remote.run_agent(name, text if isinstance(text, str) else "")
        else:
            result = await remote.call_tool(name, dict(arguments))
        pending = pending_of(result, remote.handle)
        if pending is not None:
            _ctx.component_cache[waiting] = pending.attempt_id
            _ctx.suspend(pending)
        if result.get("kind") == "agent":
            ok = result.get("stop_reason") == "end_turn"
            text = str(result.get("text", ""))
            if ok:
                return ToolOutput(content=text)
            why = result.get("error") or f"stopped: {result.get('stop_reason')}"
            return ToolOutput(content=f"remote agent {name!r} {why}. {text}".strip(), is_error=True)
        return ToolOutput(
            content=str(result.get("content", "")), is_error=result.get("is_error") is True
        )

    return call
