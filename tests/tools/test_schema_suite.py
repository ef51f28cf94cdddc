"""The official JSON-Schema-Test-Suite (draft-07, 2020-12) through the tools' schema compiler.

The cases are vendored under ``tests/data/json-schema-test-suite`` (their
README says from where). A case that needs one of the suite's remote
documents (``http://localhost:1234/…``) must be refused when compiled:
references resolve only inside the schema, and nothing is fetched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mainspring.errors import ConfigError, ToolInputError
from mainspring.tools._schemas import compile_schema

SUITE = Path(__file__).resolve().parent.parent / "data" / "json-schema-test-suite"
DIALECTS = {
    "draft7": "http://json-schema.org/draft-07/schema#",
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
}
UNSUPPORTED_REGEX = {
    "pattern with Unicode property escape requires unicode mode",
    "patternProperties with Unicode property escape",
}
"""ECMA-262 ``\\p{…}`` escapes, which Python's ``re`` lacks: the schema is refused as invalid."""

FILES = sorted(
    (path.parent.name, path.name) for d in DIALECTS for path in (SUITE / d).glob("*.json")
)


def test_the_vendored_suite_is_there() -> None:
    assert (SUITE / "LICENSE").read_text().startswith("Copyright (c) 2012 Julian Berman")
    assert len([f for f in FILES if f[0] == "draft7"]) == 37
    assert len([f for f in FILES if f[0] == "draft2020-12"]) == 46


def in_dialect(schema: Any, dialect: str) -> Any:
    """The case's schema, declaring the dialect its folder is for (as the suite means it)."""
    if isinstance(schema, dict) and "$schema" not in schema:
        return {"$schema": DIALECTS[dialect], **schema}
    return schema


@pytest.mark.parametrize(("dialect", "name"), FILES)
def test_suite_file(dialect: str, name: str) -> None:
    checked = 0
    for case in json.loads((SUITE / dialect / name).read_text()):
        schema = in_dialect(case["schema"], dialect)
        where = f"{dialect}/{name}: {case['description']}"
        try:
            compiled = compile_schema(schema)
        except ConfigError as exc:
            if case["description"] in UNSUPPORTED_REGEX:
                assert "is not a 'regex'" in str(exc), where
                continue
            needs_remote = "localhost:1234" in json.dumps(schema)
            assert needs_remote, f"{where}: refused but needs no remote document: {exc}"
            assert "refused" in str(exc) or "unsupported dialect" in str(exc), where
            continue
        assert name != "refRemote.json", f"{where}: a remote reference was accepted"
        for test in case["tests"]:
            try:
                compiled.check("t", test["data"])
                valid = True
            except ToolInputError as exc:
                assert "unavailable" not in str(exc), f"{where}: {exc}"
                valid = False
            assert valid == test["valid"], f"{where}: {test['description']}"
            checked += 1
    if name not in ("refRemote.json", "vocabulary.json"):  # (those need remote documents)
        assert checked, f"{dialect}/{name}: no case ran"
