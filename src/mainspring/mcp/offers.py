"""What an MCP server offers beside an agent's tools: resources, templates, prompts.

Plain declarations, no SDK: :func:`mainspring.mcp.server.build_mcp_server`
(``resources=``, ``prompts=``) and ``mainspring mcp serve`` (given an
:class:`McpServe` instead of an agent) serve them.

```python
readme = ServedResource(uri="docs://readme", name="readme", text="# Wallet")
invoice = ServedResourceTemplate(
    uri_template="invoices://{number}",
    name="invoice",
    read=lambda number: load_invoice(number),  # str (text) or bytes (a blob)
    complete={"number": recent_invoice_numbers},
)
review = ServedPrompt(
    name="review",
    description="Review a transfer before it is sent.",
    arguments=(PromptArgument(name="to", required=True, choices=("alice", "bob")),),
    render=lambda to: f"Review the last transfer to {to}.",
)
serve = McpServe(agent=agent, resources=(readme, invoice), prompts=(review,))
# mainspring mcp serve my_app:serve --http
```

A prompt renders to text, or to a sequence of parts each sent as one user
message: text, an :class:`~mainspring.messages.ImagePart` (inline data), or a
:class:`ServedResource` embedded whole. Completion (``completion/complete``)
offers an argument's ``choices`` (or what its ``complete`` function returns
for the typed prefix), those starting with what the user typed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from mainspring.errors import ConfigError
from mainspring.messages import ImagePart

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from mainspring.agent import Agent

__all__ = [
    "Completer",
    "McpServe",
    "PromptArgument",
    "PromptPart",
    "ServedPrompt",
    "ServedResource",
    "ServedResourceTemplate",
]

Completer: TypeAlias = Callable[[str], Sequence[str] | Awaitable[Sequence[str]]]
"""Suggestions for what the user typed so far (the prefix) of an argument."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServedResource:
    """A resource at a fixed URI: its ``text``, its ``blob`` bytes, or what ``read`` returns.

    ``read`` (sync or async, no arguments) returns ``str`` (text) or
    ``bytes`` (sent base64 as a blob); it runs on each ``resources/read``.
    """

    uri: str
    name: str
    description: str = ""
    mime_type: str = "text/plain"
    text: str | None = None
    blob: bytes | None = None
    read: Callable[[], str | bytes | Awaitable[str | bytes]] | None = None

    def __post_init__(self) -> None:
        given = [x for x in (self.text, self.blob, self.read) if x is not None]
        if len(given) != 1:
            raise ConfigError(f"resource {self.uri!r}: give exactly one of text, blob or read")
        if "://" not in self.uri:
            raise ConfigError(f"resource {self.uri!r}: a URI has a scheme (scheme://…)")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServedResourceTemplate:
    """Resources whose URIs fit ``uri_template`` (RFC 6570 level 1: ``{name}`` segments).

    ``read`` is called with each variable as a keyword argument (a variable
    matches one path segment: no ``/``) and returns ``str`` or ``bytes``;
    ``complete`` maps a variable to its suggestions (a list, or a
    :data:`Completer` of the typed prefix).
    """

    uri_template: str
    name: str
    read: Callable[..., str | bytes | Awaitable[str | bytes]]
    description: str = ""
    mime_type: str = "text/plain"
    complete: Mapping[str, Sequence[str] | Completer] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if "{" not in self.uri_template or "://" not in self.uri_template:
            raise ConfigError(f"resource template {self.uri_template!r}: a URI with {{variables}}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptArgument:
    """An argument of a :class:`ServedPrompt`; ``choices`` or ``complete`` feed completion."""

    name: str
    description: str = ""
    required: bool = False
    choices: Sequence[str] = ()
    complete: Completer | None = None


PromptPart: TypeAlias = "str | ImagePart | ServedResource"
"""One message of a rendered prompt: text, an inline image, or an embedded resource."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServedPrompt:
    """A prompt template: ``render(**arguments)`` gives its text or its parts.

    ``render`` (sync or async) gets every given argument as a keyword (those
    not given are left out: give them defaults); a missing required
    argument or an unknown one is refused before it runs.
    """

    name: str
    render: Callable[..., str | Sequence[PromptPart] | Awaitable[str | Sequence[PromptPart]]]
    description: str = ""
    arguments: tuple[PromptArgument, ...] = ()

    def __post_init__(self) -> None:
        names = [a.name for a in self.arguments]
        if len(set(names)) != len(names):
            raise ConfigError(f"prompt {self.name!r}: argument names must be unique, got {names}")


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServe:
    """An agent with what its MCP server offers beside the tools: ``mainspring mcp serve`` takes it.

    Name it like an agent (``package.module:attribute``, or a function
    returning one); ``--skills`` folders are served as prompts beside these.
    """

    agent: Agent
    resources: tuple[ServedResource | ServedResourceTemplate, ...] = ()
    prompts: tuple[ServedPrompt, ...] = ()

    def __post_init__(self) -> None:
        prompts = [p.name for p in self.prompts]
        if len(set(prompts)) != len(prompts):
            raise ConfigError(f"prompt names must be unique, got {prompts}")
        uris = [r.uri if isinstance(r, ServedResource) else r.uri_template for r in self.resources]
        if len(set(uris)) != len(uris):
            raise ConfigError(f"resource URIs must be unique, got {uris}")

    def build(self, **options: Any) -> Server[Any]:
        """The MCP server (the SDK's low-level ``Server``) for all of it.

        ``options`` are :func:`mainspring.mcp.server.build_mcp_server`'s
        (``skills``, ``expose_confirm``, ``principal``, ``store`` …). Serve it
        with ``serve_stdio`` / ``serve_http``, or hand it to the SDK's
        ``Client`` in-process.
        """
        from mainspring.mcp.server import build_mcp_server  # the server's dependencies

        return build_mcp_server(self, **options)
