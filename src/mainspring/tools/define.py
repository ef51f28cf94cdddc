"""Define tools: the ``@tool`` decorator and ``client_tool``.

The input schema comes from the function's typed signature (validated with
pydantic), the description from its docstring (Google, NumPy or reST
style; ``Args:`` entries become field descriptions). A parameter annotated
:class:`ToolContext` receives the run context and is hidden from the model.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import typing
from collections.abc import Callable
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any, TypeVar, overload

from mainspring._lowlevel.frozen import dataclass
from mainspring._lowlevel.json_value import JsonValue
from mainspring.errors import ConfigError, ToolInputError
from mainspring.messages import ImagePart
from mainspring.models.base import ToolSpec
from mainspring.tools._schemas import CompiledSchema, compile_or_unusable, compile_schema
from mainspring.tools.policy import (
    DEFAULT_MAX_RESULT_CHARS,
    Details,
    Permission,
    PermissionResolver,
    Preflight,
    Preview,
    Regenerate,
    Summarize,
    ToolPolicy,
    UsdAmount,
)

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from mainspring.tools.context import ToolContext

__all__ = ["Tool", "ToolOutput", "client_tool", "tool"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutput:
    """Return this from a tool to control the result exactly."""

    content: str
    is_error: bool = False
    images: tuple[ImagePart, ...] = ()
    error_type: str | None = None
    """When the engine made this error result from a tool that raised: the exception's
    class name (``"ToolTimeout"`` for a tool past its deadline), so an ``after_tool_call``
    hook can tell the failures apart. ``None`` for what a tool returned itself."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A tool: its schema, its policy and (unless client-executed) its body."""

    name: str
    description: str
    input_schema: dict[str, JsonValue]
    policy: ToolPolicy = ToolPolicy()
    fn: Callable[..., Any] | None = None
    """``None`` for a client-executed tool."""
    input_model: type[BaseModel] | None = None
    ctx_param: str | None = None
    is_async: bool = False
    meta: dict[str, JsonValue] = field(default_factory=dict)
    """Origin metadata (e.g. an MCP server's annotations), kept as is."""
    schema_check: CompiledSchema | None = field(default=None, compare=False, repr=False)
    """``input_schema`` compiled (tools without an ``input_model``); compiled on first
    use when not given, and again if ``input_schema`` is replaced."""

    @property
    def client_executed(self) -> bool:
        """The host runs it; the engine always pauses with a pending action."""
        return self.fn is None

    @property
    def spec(self) -> ToolSpec:
        """What the model is told."""
        return ToolSpec(
            name=self.name, description=self.description, input_schema=self.input_schema
        )

    def renamed(self, name: str) -> Tool:
        """A copy under another name (used for namespacing)."""
        _check_name(name)
        return replace(self, name=name)

    def validate(self, args: object) -> dict[str, JsonValue]:
        """Validate model-supplied arguments; return the canonical JSON input.

        Raises:
            ToolInputError: naming the first offending field.
        """
        return self.parse(args)[0]

    def parse(self, args: object) -> tuple[dict[str, JsonValue], dict[str, Any]]:
        """Validate arguments; return the canonical JSON input and the call's keyword arguments.

        Raises:
            ToolInputError: naming the first offending field.
        """
        if not isinstance(args, dict):
            raise ToolInputError(
                f"arguments for tool {self.name!r} must be a JSON object, "
                f"got {type(args).__name__}",
                tool=self.name,
            )
        if self.input_model is not None:
            # (pydantic's own validator and serializer: what model_validate and
            # model_dump call, with these same defaults)
            try:
                value = self.input_model.__pydantic_validator__.validate_python(args)
            except _validation_error() as exc:
                raise _input_error(self.name, exc) from None
            dumped: dict[str, JsonValue] = value.__pydantic_serializer__.to_python(
                value, mode="json"
            )
            return dumped, dict(vars(value))  # the fields' values (extras are kept apart)
        self._compiled().check(self.name, args)
        return typing.cast(dict[str, JsonValue], args), dict(args)

    def _compiled(self) -> CompiledSchema:
        check = self.schema_check
        if check is None or check.schema is not self.input_schema:
            check = compile_or_unusable(self.input_schema, owner=f"tool {self.name!r}")
            # a cache of what input_schema says, not state: set once on this frozen record
            object.__setattr__(self, "schema_check", check)
        return check

    async def call(
        self,
        args: dict[str, JsonValue],
        ctx: ToolContext | None,
        *,
        kwargs: dict[str, Any] | None = None,
    ) -> ToolOutput:
        """Run the body on validated input; exceptions propagate to the engine.

        ``kwargs`` from :meth:`parse` of the same input saves validating it again.
        """
        if self.fn is None:
            raise ConfigError(f"tool {self.name!r} is client-executed and has no body")
        if kwargs is None:
            kwargs = self.parse(args)[1]
        else:
            kwargs = dict(kwargs)
        if self.ctx_param is not None:
            if ctx is None:
                raise ConfigError(f"tool {self.name!r} needs a ToolContext")
            kwargs[self.ctx_param] = ctx
        if self.is_async:
            result = await self.fn(**kwargs)
        else:
            import anyio.to_thread  # lazy: `import mainspring` does not load anyio

            result = await anyio.to_thread.run_sync(
                functools.partial(self.fn, **kwargs), abandon_on_cancel=self.policy.read_only
            )
        return toToolOutput(result)


def _validation_error() -> type[ValidationError]:
    from pydantic import ValidationError  # loaded already: an input model is pydantic's

    return ValidationError


def toToolOutput(result: object) -> ToolOutput:
    """Turn whatever a tool returned into a ToolOutput."""
    if isinstance(result, ToolOutput):
        return result
    if isinstance(result, str):
        return ToolOutput(content=result)
    if result is None:
        return ToolOutput(content="")
    import pydantic  # here: `import mainspring` does not load pydantic
    import pydantic_core

    if isinstance(result, pydantic.BaseModel):
        return ToolOutput(content=result.model_dump_json())
    return ToolOutput(
        content=json.dumps(pydantic_core.to_jsonable_python(result), ensure_ascii=False)
    )


def _input_error(tool_name: str, exc: ValidationError) -> ToolInputError:
    errors = exc.errors(include_url=False)
    parts: list[str] = []
    for err in errors:
        loc = ".".join(str(x) for x in err["loc"]) or "(input)"
        parts.append(f"{loc}: {err['msg']}")
    first = ".".join(str(x) for x in errors[0]["loc"]) if errors else ""
    return ToolInputError(
        f"invalid arguments for tool {tool_name!r}: " + "; ".join(parts),
        tool=tool_name,
        field=first,
    )


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"tool name {name!r} must be 1-64 characters of letters, digits, '_' or '-'"
        )


def _clean_schema(schema: dict[str, Any]) -> dict[str, JsonValue]:
    schema.pop("title", None)
    props = schema.get("properties")
    if isinstance(props, dict):
        for prop in props.values():
            if isinstance(prop, dict):
                prop.pop("title", None)
    return typing.cast(dict[str, JsonValue], schema)


def _model_from_signature(
    fn: Callable[..., Any], tool_name: str, param_docs: dict[str, str]
) -> tuple[type[BaseModel], str | None]:
    from pydantic import ConfigDict, Field, create_model  # lazy: loads when a tool is defined

    from mainspring.tools.context import ToolContext

    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except NameError as exc:
        raise ConfigError(f"tool {tool_name!r}: cannot resolve annotation: {exc}") from exc
    fields: dict[str, Any] = {}
    ctx_param: str | None = None
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(f"tool {tool_name!r}: *args and **kwargs are not supported")
        if pname not in hints:
            raise ConfigError(f"tool {tool_name!r}: parameter {pname!r} needs a type annotation")
        annotation = hints[pname]
        if annotation is not ToolContext and "ToolContext" in repr(annotation):
            raise ConfigError(
                f"tool {tool_name!r}: annotate {pname!r} as plain ToolContext (it is always given)"
            )
        if annotation is ToolContext:
            ctx_param = pname
            continue
        default = ... if param.default is param.empty else param.default
        fields[pname] = (annotation, Field(default, description=param_docs.get(pname)))
    model = create_model(f"{tool_name}_input", __config__=ConfigDict(extra="forbid"), **fields)
    return typing.cast("type[BaseModel]", model), ctx_param


def _build(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    policy: ToolPolicy,
) -> Tool:
    tool_name = fn.__name__ if name is None else name
    _check_name(tool_name)
    import docstring_parser  # lazy: only needed while defining a tool

    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    param_docs = {p.arg_name: p.description for p in doc.params if p.description}
    summary = "\n\n".join(x for x in (doc.short_description, doc.long_description) if x)
    desc = description or summary
    if not desc:
        raise ConfigError(f"tool {tool_name!r} needs a description (a docstring or description=)")
    model, ctx_param = _model_from_signature(fn, tool_name, param_docs)
    unknown = set(policy.modifiable_fields) - set(model.model_fields)
    if unknown:
        raise ConfigError(
            f"tool {tool_name!r}: modifiable_fields not in its input: {sorted(unknown)}"
        )
    return Tool(
        name=tool_name,
        description=desc,
        input_schema=_clean_schema(model.model_json_schema()),
        policy=policy,
        fn=fn,
        input_model=model,
        ctx_param=ctx_param,
        is_async=inspect.iscoroutinefunction(fn),
    )


@overload
def tool(fn: F, /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    concurrency_safe: bool | None = None,
    permission: Permission | PermissionResolver | UsdAmount = "auto",
    flags: frozenset[str] | set[str] | tuple[str, ...] = (),
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    preflight: Preflight | None = None,
    modifiable_fields: tuple[str, ...] | list[str] = (),
    timeout: float | None = None,
    preview: Preview | None = None,
    details: Details | None = None,
    regenerate: Regenerate | None = None,
    post_write_refresh: tuple[str, ...] | list[str] = (),
    summarize_on_truncate: Summarize | None = None,
) -> Callable[[F], Tool]: ...
def tool(
    fn: F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    concurrency_safe: bool | None = None,
    permission: Permission | PermissionResolver | UsdAmount = "auto",
    flags: frozenset[str] | set[str] | tuple[str, ...] = (),
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    preflight: Preflight | None = None,
    modifiable_fields: tuple[str, ...] | list[str] = (),
    timeout: float | None = None,
    preview: Preview | None = None,
    details: Details | None = None,
    regenerate: Regenerate | None = None,
    post_write_refresh: tuple[str, ...] | list[str] = (),
    summarize_on_truncate: Summarize | None = None,
) -> Tool | Callable[[F], Tool]:
    """Turn a typed function (sync or async) into a :class:`Tool`.

    ```python
    @tool(read_only=True)
    async def get_balance(account: str) -> dict[str, float]:
        \"\"\"Current balance of an account.\"\"\"
    ```

    Args:
        fn: The function (when used bare, as ``@tool``).
        name: Tool name; defaults to the function's name.
        description: Defaults to the docstring.
        read_only: The tool changes nothing; with ``concurrency_safe`` it runs in parallel.
        concurrency_safe: Defaults to ``read_only``.
        permission: ``"auto"``, ``"confirm"``, a resolver of the input, or :func:`usd`.
        flags: Free-form markers (see :class:`Flag`).
        max_result_chars: Longer results are cut, with a hint to narrow the call.
        preflight: ``fn(input) -> error message | None``, checked before asking or running.
        modifiable_fields: Input fields an approver may edit.
        timeout: Seconds before the call becomes an error result.
        preview: ``fn(input) -> text`` shown to the approver when a call pauses
            (computed in a worker thread; e.g. the path and diff of a write).
        details: ``fn(input) -> mapping`` of extension fields for a paused call's
            ``PendingAction.details`` (a quote, a route, projected values).
        regenerate: ``fn(input) -> input``: a fresh input (a new quote) for a
            paused call, asked for with ``Session.regenerate(attempt_id)``.
        post_write_refresh: Read tools re-run after a successful call (a write's
            fresh balances); the model sees their results with this one's.
        summarize_on_truncate: ``fn(content, limit) -> text`` used instead of a
            plain cut when a result is longer than ``max_result_chars``.
    """
    if max_result_chars < 1:
        raise ConfigError("max_result_chars must be at least 1")
    if timeout is not None and timeout <= 0:
        raise ConfigError("timeout must be positive")
    policy = ToolPolicy(
        read_only=read_only,
        concurrency_safe=concurrency_safe,
        permission=permission,
        flags=frozenset(flags),
        max_result_chars=max_result_chars,
        preflight=preflight,
        modifiable_fields=tuple(modifiable_fields),
        timeout=timeout,
        preview=preview,
        details=details,
        regenerate=regenerate,
        post_write_refresh=tuple(post_write_refresh),
        summarize_on_truncate=summarize_on_truncate,
    )
    if read_only and (regenerate is not None or post_write_refresh):
        raise ConfigError("regenerate and post_write_refresh are for writes, not read-only tools")

    def wrap(f: F) -> Tool:
        if not callable(f):
            raise ConfigError(f"@tool needs a function, got {f!r}")
        return _build(f, name=name, description=description, policy=policy)

    return wrap(fn) if fn is not None else wrap


def client_tool(
    name: str,
    *,
    description: str,
    input_schema: dict[str, JsonValue] | type[BaseModel],
    modifiable_fields: tuple[str, ...] | list[str] = (),
    flags: frozenset[str] | set[str] | tuple[str, ...] = (),
    preflight: Preflight | None = None,
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    details: Details | None = None,
    post_write_refresh: tuple[str, ...] | list[str] = (),
) -> Tool:
    """A tool the host executes (e.g. a transaction signed in the user's browser).

    It has no body: every call pauses the turn with a ``pending_action``
    (``client_executed=True``) and its result comes back through
    ``Session.resume(attempt_id, ClientResult(...))``.
    """
    _check_name(name)
    model: type[BaseModel] | None = None
    check: CompiledSchema | None = None
    if isinstance(input_schema, type):
        model = input_schema
        schema = _clean_schema(model.model_json_schema())
    else:
        if input_schema.get("type", "object") != "object":
            raise ConfigError(f"client tool {name!r}: input_schema must describe an object")
        check = compile_schema(input_schema, owner=f"client tool {name!r}")
        schema = input_schema
    props = schema.get("properties")
    known = set(props) if isinstance(props, dict) else set[str]()
    unknown = set(modifiable_fields) - known
    if unknown:
        raise ConfigError(
            f"client tool {name!r}: modifiable_fields not in its input: {sorted(unknown)}"
        )
    policy = ToolPolicy(
        read_only=False,
        permission="confirm",
        flags=frozenset(flags),
        modifiable_fields=tuple(modifiable_fields),
        preflight=preflight,
        max_result_chars=max_result_chars,
        details=details,
        post_write_refresh=tuple(post_write_refresh),
    )
    return Tool(
        name=name,
        description=description,
        input_schema=schema,
        policy=policy,
        input_model=model,
        schema_check=check,
    )
