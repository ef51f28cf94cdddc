"""JSON schemas from outside (an MCP server's ``inputSchema``, a raw schema) compiled once, offline.

:func:`compile_schema` is the one door: it picks the dialect from ``$schema``
(2020-12 when absent, as MCP says; draft-04, -06, -07 and 2019-09 too),
checks the schema against that dialect's meta-schema, and resolves every
``$ref`` (``$dynamicRef``, ``$recursiveRef``) it can reach at once. A
reference resolves only inside the schema itself or to a meta-schema the
``jsonschema`` package ships: the registry's retrieve function refuses
everything else, so nothing is ever fetched, at compile time or when a call's
arguments are checked. A schema that cannot be compiled raises
:class:`~mainspring.errors.ConfigError` with the reason (the tool is then
left out when it is listed); :func:`compile_or_unusable` keeps the reason
instead, for a tool built directly, so its calls become error results.

Every regular expression the schema can reach (``pattern``, the keys of
``patternProperties``) is checked here too and matched on RE2 when it is
installed (:mod:`mainspring.tools._schema_keywords`): a pattern longer than
1000 characters, one RE2 cannot compile (a backreference, lookaround) or,
without RE2, one whose shape backtracks exponentially on Python's ``re``,
makes the schema refused.

The compiled :class:`CompiledSchema` validates arguments without building a
validator per call, and its failures are always :class:`ToolInputError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from mainspring.errors import ConfigError, ToolInputError
from mainspring.tools._schema_keywords import pattern_problem, validator_class

if TYPE_CHECKING:
    from referencing import Resource
    from referencing._core import Resolver

__all__ = ["DIALECTS", "CompiledSchema", "compile_or_unusable", "compile_schema"]

DIALECTS = {
    "draft-04": "http://json-schema.org/draft-04/schema",
    "draft-06": "http://json-schema.org/draft-06/schema",
    "draft-07": "http://json-schema.org/draft-07/schema",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
}
"""The ``$schema`` dialects a tool's schema may declare (a trailing ``#`` is allowed)."""

_DEFAULT = DIALECTS["2020-12"]
_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")


class CompiledSchema:
    """A schema checked and compiled once; :meth:`check` validates arguments against it."""

    __slots__ = ("_validator", "dialect", "problem", "schema")

    def __init__(
        self, schema: Mapping[str, Any] | bool, validator: Any, dialect: str, problem: str = ""
    ) -> None:
        """Hold a compiled validator (or, with ``problem``, why there is none)."""
        self.schema = schema
        """The schema this was compiled from (the very object)."""
        self.dialect = dialect
        """The dialect's meta-schema URI."""
        self.problem = problem
        """Why the schema cannot be used (empty when it can)."""
        self._validator = validator

    def check(self, tool_name: str, args: object) -> None:
        """Validate ``args``.

        Raises:
            ToolInputError: The arguments do not fit (naming the first offending
                field), or the schema is unusable (naming why).
        """
        validator = self._validator
        if validator is None:
            raise ToolInputError(
                f"tool {tool_name!r} is unavailable: {self.problem}", tool=tool_name
            )
        from jsonschema.exceptions import best_match  # loaded with the validator

        try:
            if next(validator.iter_errors(args), None) is None:
                return
            error = best_match(validator.iter_errors(args))
        except RecursionError:  # a cycle of references that only an argument reaches
            raise ToolInputError(
                f"tool {tool_name!r} is unavailable: its input schema refers to itself without end",
                tool=tool_name,
            ) from None
        except Exception as exc:  # (refused references are caught at compile time)
            raise ToolInputError(
                f"tool {tool_name!r} is unavailable: its input schema failed: {type(exc).__name__}",
                tool=tool_name,
            ) from None
        raise _input_error(tool_name, error)


def compile_schema(
    schema: object, *, owner: str = "a tool", kind: str = "input schema"
) -> CompiledSchema:
    """Check and compile a JSON schema from outside; nothing is fetched.

    Args:
        schema: The schema (a JSON object, or ``true``/``false``).
        owner: Whose schema it is, for the error (``"MCP server 's' tool 't'"``).
        kind: Which of its schemas it is, for the error.

    Raises:
        ConfigError: The schema is not valid in its dialect, declares an
            unknown dialect, or has a ``$ref`` that does not resolve inside it
            (a remote one included).
    """
    jsonschema = _jsonschema()
    if not isinstance(schema, Mapping | bool):
        raise ConfigError(
            f"{owner} has an invalid {kind}: a JSON object, not {type(schema).__name__}"
        )
    dialect = _dialect(schema, f"{owner} has an {kind}")
    cls = validator_class(jsonschema.validators.validator_for({"$schema": dialect}))
    key = _key(schema)
    if key is not None and key in _COMPILED:  # checked already: the meta-schema check is slow
        return CompiledSchema(schema, cls(schema, registry=_registry()), dialect)
    try:
        cls.check_schema(schema)
        validator = cls(schema, registry=_registry())
        _check_references(schema, dialect)
        validator.is_valid({})  # a root that refers to itself for ever fails here
    except jsonschema.exceptions.SchemaError as exc:
        raise ConfigError(f"{owner} has an invalid {kind}: {exc.message}") from None
    except _BadPattern as exc:
        raise ConfigError(
            f"{owner} has an {kind} that was refused: pattern {exc.pattern[:100]!r} {exc.problem}"
        ) from None
    except (_Refused, _unresolvable()) as exc:
        ref = str(getattr(exc, "ref", ""))
        raise ConfigError(
            f"{owner} has an {kind} that was refused: $ref {ref[:300]!r} does not "
            "resolve inside the schema (references resolve only within it; nothing is fetched)"
        ) from None
    except RecursionError:
        raise ConfigError(
            f"{owner} has an {kind} that is too deep or refers to itself without end"
        ) from None
    if key is not None:
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.pop(next(iter(_COMPILED)))
        _COMPILED[key] = None
    return CompiledSchema(schema, validator, dialect)


_COMPILED: dict[str, None] = {}
"""Schemas (as canonical JSON) that compiled: a tool list read again skips the meta-schema
check (milliseconds a tool). Oldest first; bounded in entries and in each key's size."""
_COMPILED_MAX = 512
_KEY_MAX_CHARS = 32_768


def _key(schema: Mapping[str, Any] | bool) -> str | None:
    try:
        key = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return key if len(key) <= _KEY_MAX_CHARS else None


def compile_or_unusable(schema: object, *, owner: str = "a tool") -> CompiledSchema:
    """:func:`compile_schema`, or a :class:`CompiledSchema` whose every check fails, saying why."""
    try:
        return compile_schema(schema, owner=owner)
    except ConfigError as exc:
        held = schema if isinstance(schema, Mapping | bool) else False
        return CompiledSchema(held, None, "", problem=str(exc))


def _dialect(schema: Mapping[str, Any] | bool, subject: str) -> str:
    if isinstance(schema, bool) or "$schema" not in schema:
        return _DEFAULT
    declared = schema["$schema"]
    if isinstance(declared, str):
        uri = declared.removesuffix("#")
        if uri in DIALECTS.values():
            return uri
    raise ConfigError(
        f"{subject} of an unsupported dialect ($schema {str(declared)[:200]!r}); "
        f"supported: {', '.join(DIALECTS)}"
    )


def _check_references(schema: Mapping[str, Any] | bool, dialect: str) -> None:
    """Resolve every reference the schema can reach, now, and check its patterns.

    Raises ``_Refused`` (a reference that does not resolve) or ``_BadPattern``.
    """
    from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]  # no py.typed
    from referencing.jsonschema import specification_with

    specification = specification_with(dialect)
    root = specification.create_resource(schema)
    registry = REGISTRY.combine(_registry())
    ours = {id(node) for node in _nodes(schema)}
    seen: set[int] = set()
    pending: list[tuple[Resource[Any], Resolver[Any]]] = [(root, registry.resolver_with_root(root))]
    while pending:
        resource, resolver = pending.pop()
        contents = resource.contents
        if id(contents) in seen:
            continue
        seen.add(id(contents))
        if isinstance(contents, Mapping):
            _check_patterns(contents)
            for keyword in _REF_KEYWORDS:
                ref = contents.get(keyword)
                if not isinstance(ref, str):
                    continue
                try:
                    resolved = resolver.lookup(ref)
                except _unresolvable():
                    raise _Refused(ref) from None
                target = resolved.contents
                if id(target) in ours and id(target) not in seen:
                    # reached by a pointer, maybe under a keyword no walk visits
                    pending.append((specification.create_resource(target), resolved.resolver))
        pending.extend((sub, resolver.in_subresource(sub)) for sub in resource.subresources())


def _nodes(value: object) -> Iterator[object]:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            yield node
            stack.extend(node)


def _check_patterns(subschema: Mapping[str, Any]) -> None:
    pattern = subschema.get("pattern")
    patterns = [pattern] if isinstance(pattern, str) else []
    keyed = subschema.get("patternProperties")
    if isinstance(keyed, Mapping):
        patterns += [p for p in keyed if isinstance(p, str)]
    for each in patterns:
        if problem := pattern_problem(each):
            raise _BadPattern(each, problem)


class _BadPattern(Exception):
    def __init__(self, pattern: str, problem: str) -> None:
        super().__init__(pattern)
        self.pattern = pattern
        self.problem = problem


class _Refused(Exception):
    def __init__(self, ref: str) -> None:
        super().__init__(ref)
        self.ref = ref


def _refuse(uri: str) -> Resource[Any]:
    """The registry's retrieve function: nothing outside the schema is ever fetched."""
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(uri)


def _registry() -> Any:
    from referencing import Registry

    return Registry(retrieve=_refuse)  # type: ignore[call-arg]  # attrs field, untyped here


def _unresolvable() -> type[Exception]:
    from referencing.exceptions import Unresolvable

    return Unresolvable


def _jsonschema() -> Any:
    try:  # lazy: only tools declared by a raw JSON schema need it
        import jsonschema
        import jsonschema.validators
    except ImportError as exc:
        raise ConfigError(
            'tools declared by a raw JSON schema need: pip install "mainspring[jsonschema]"'
        ) from exc
    return jsonschema


def _input_error(tool_name: str, error: Any) -> ToolInputError:
    path = [str(x) for x in error.absolute_path]
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [k for k in error.validator_value if k not in error.instance]
        path += missing[:1]
    elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = error.schema.get("properties", {})
        extra = [k for k in error.instance if k not in allowed]
        path += [str(k) for k in extra[:1]]
    loc = ".".join(path)
    return ToolInputError(
        f"invalid arguments for tool {tool_name!r}: {loc or '(input)'}: {error.message}",
        tool=tool_name,
        field=loc,
    )
