"""The schema keywords that match regular expressions, run on RE2 when this process has it.

``jsonschema`` matches ``pattern``, ``patternProperties`` (and, through
them, ``additionalProperties`` and ``unevaluatedProperties``) with Python's
``re``, inside a call's argument check on the event loop: a server's
``(a+)+$`` would freeze every session. :func:`validator_class` is the
dialect's validator with those four keywords replaced by the same logic
matching through :func:`search` (messages unchanged), and
:func:`pattern_problem` is the check every schema pattern passes when the
tool is listed (:func:`mainspring.tools._schemas.compile_schema`):

- with RE2 (``pip install "mainspring[re2]"``): the pattern compiles for RE2
  (no backreference, no lookaround) and is at most :data:`MAX_PATTERN_CHARS`
  long; matching is then linear in the text.
- without it: matching runs on ``re``, so the pattern must also pass
  :func:`mainspring.tools._regex.backtracking_risk` (no repeated group with
  a quantifier or an alternation inside): the exponential shapes are
  refused, polynomial ones are not; RE2 is the fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from functools import cache, lru_cache
from typing import Any

from mainspring.tools._regex import RegexRefused, backtracking_risk, compile_re2, re2_available

__all__ = ["MAX_PATTERN_CHARS", "pattern_problem", "search", "validator_class"]

MAX_PATTERN_CHARS = 1000
"""The longest regular expression a tool's schema may hold (``pattern``, ``patternProperties``)."""


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` may not be matched against a call's arguments, or ``None``."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"is longer than {MAX_PATTERN_CHARS} characters ({len(pattern)})"
    try:
        if re2_available():
            compile_re2(pattern)
            return None
        risk = backtracking_risk(pattern)
    except RegexRefused as exc:
        return f"cannot be matched in linear time: {exc.reason}"
    if risk:
        return (
            f"could take exponential time on Python's re: {risk} "
            '(pip install "mainspring[re2]" to match it in linear time)'
        )
    return None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (RE2 when available)."""
    return _matcher(pattern)(text) is not None


@lru_cache(maxsize=64)
def _matcher(pattern: str) -> Callable[[str], object]:
    if re2_available():
        search = compile_re2(pattern).search

        def over_utf8(text: str) -> object:  # RE2's str wrapper costs 3x its bytes search
            return search(text.encode("utf-8", "surrogatepass"))

        return over_utf8
    return re.compile(pattern).search


@cache
def validator_class(base: type[Any]) -> type[Any]:
    """``base`` (a ``jsonschema`` validator class), its regex keywords matched by :func:`search`."""
    from jsonschema.validators import extend

    keywords = base.VALIDATORS
    replaced = {keyword: ours for keyword, ours in _OURS.items() if keyword in keywords}
    if "unevaluatedProperties" in keywords:
        legacy = "2019-09" in str(base.META_SCHEMA.get("$schema", ""))
        replaced["unevaluatedProperties"] = (
            _unevaluated_properties_2019 if legacy else _unevaluated_properties
        )
    extended: type[Any] = extend(base, validators=replaced)  # (jsonschema is untyped here)
    return extended


def _error(message: str) -> Any:
    from jsonschema.exceptions import ValidationError

    return ValidationError(message)


def _pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not search(patrn, instance):
        yield _error(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(
    validator: Any, pattern_properties: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for k, v in instance.items():
            if search(pattern, k):
                yield from validator.descend(v, subschema, path=k, schema_path=pattern)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> Iterator[str]:
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    for property in instance:
        if property not in properties and not any(search(p, property) for p in patterns):
            yield property


def _extras_msg(extras: list[Any]) -> str:
    verb = "was" if len(extras) == 1 else "were"
    return f"{', '.join(repr(extra) for extra in extras)} {verb}"


def _additional_properties(
    validator: Any, ap: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    extras = set(_additional(instance, schema))
    if validator.is_type(ap, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], ap, path=extra)
    elif not ap and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield _error(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            extra = _extras_msg(sorted(extras, key=str))
            yield _error(f"Additional properties are not allowed ({extra} unexpected)")


def _valid(errors: Iterator[Any]) -> bool:
    return next(errors, None) is None


def _evaluated_keys(validator: Any, instance: Any, schema: Any, *, legacy: bool) -> list[str]:
    """The keys ``schema`` evaluates (``jsonschema``'s own walk, matching by :func:`search`)."""
    if validator.is_type(schema, "boolean"):
        return []
    keys = _by_reference(validator, instance, schema, legacy=legacy)
    keys += _by_properties(validator, instance, schema, legacy=legacy)
    for property, subschema in schema.get("dependentSchemas", {}).items():
        if property in instance:
            keys += _evaluated_keys(validator, instance, subschema, legacy=legacy)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if _valid(validator.descend(instance, subschema)):
                keys += _evaluated_keys(validator, instance, subschema, legacy=legacy)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys += _evaluated_keys(validator, instance, schema["if"], legacy=legacy)
            if "then" in schema:
                keys += _evaluated_keys(validator, instance, schema["then"], legacy=legacy)
        elif "else" in schema:
            keys += _evaluated_keys(validator, instance, schema["else"], legacy=legacy)
    return keys


def _by_reference(validator: Any, instance: Any, schema: Any, *, legacy: bool) -> list[str]:
    resolved: list[Any] = []
    if (ref := schema.get("$ref")) is not None:
        resolved.append(validator._resolver.lookup(ref))
    if legacy and "$recursiveRef" in schema:
        from referencing.jsonschema import lookup_recursive_ref

        resolved.append(lookup_recursive_ref(validator._resolver))
    if not legacy and (dynamic := schema.get("$dynamicRef")) is not None:
        resolved.append(validator._resolver.lookup(dynamic))
    keys: list[str] = []
    for each in resolved:
        evolved = validator.evolve(schema=each.contents, _resolver=each.resolver)
        keys += _evaluated_keys(evolved, instance, each.contents, legacy=legacy)
    return keys


def _by_properties(validator: Any, instance: Any, schema: Any, *, legacy: bool) -> list[str]:
    keys: list[str] = []
    if legacy:
        for keyword in ("properties", "additionalProperties", "unevaluatedProperties"):
            value = schema.get(keyword)
            if validator.is_type(value, "boolean") and value:
                keys += instance.keys()
            elif validator.is_type(value, "object"):
                keys += [p for p in value if p in instance]
    else:
        properties = schema.get("properties")
        if validator.is_type(properties, "object"):
            keys += properties.keys() & instance.keys()
        for keyword in ("additionalProperties", "unevaluatedProperties"):
            if (subschema := schema.get(keyword)) is not None:
                keys += [k for k, v in instance.items() if _valid(validator.descend(v, subschema))]
    for pattern in schema.get("patternProperties", {}):
        keys += [property for property in instance if search(pattern, property)]
    return keys


def _unevaluated(
    validator: Any, up: Any, instance: Any, schema: Any, *, legacy: bool
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema, legacy=legacy)
    unevaluated = [
        property
        for property in instance
        if property not in evaluated
        for _ in validator.descend(instance[property], up, path=property, schema_path=property)
    ]
    if not unevaluated:
        return
    if up is False:
        extra = _extras_msg(sorted(unevaluated, key=str))
        yield _error(f"Unevaluated properties are not allowed ({extra} unexpected)")
    else:
        extra = _extras_msg(unevaluated)
        yield _error(
            f"Unevaluated properties are not valid under the given schema ({extra} "
            "unevaluated and invalid)"
        )


def _unevaluated_properties(validator: Any, up: Any, instance: Any, schema: Any) -> Iterator[Any]:
    return _unevaluated(validator, up, instance, schema, legacy=False)


def _unevaluated_properties_2019(
    validator: Any, up: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    return _unevaluated(validator, up, instance, schema, legacy=True)


_OURS: dict[str, Callable[..., Iterator[Any]]] = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}
