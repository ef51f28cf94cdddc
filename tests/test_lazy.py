"""lazy_module: a stand-in that imports its module when an attribute is first read."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mainspring._lowlevel.lazy import lazy_module


def test_an_imported_module_is_returned_as_it_is() -> None:
    assert lazy_module("json") is json


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return out.stdout.strip()


def test_the_module_loads_on_first_use_from_any_thread_once() -> None:
    code = """
import sys, threading
from mainspring._lowlevel.lazy import lazy_module
wave = lazy_module("wave")
before = "wave" in sys.modules
results = []
def use():
    results.append(wave.Error is sys.modules["wave"].Error)
threads = [threading.Thread(target=use) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join(timeout=30)
print(before, results.count(True), wave.open is sys.modules["wave"].open)
"""
    assert _run(code) == "False 8 True"


def test_a_missing_name_or_module_fails_clearly_when_used() -> None:
    missing = lazy_module("mainspring_no_such_module")
    with pytest.raises(ModuleNotFoundError, match="mainspring_no_such_module"):
        missing.anything  # noqa: B018
    with pytest.raises(AttributeError, match="no_such_name"):
        lazy_module("json").no_such_name  # noqa: B018
    code = (
        "from mainspring._lowlevel.lazy import lazy_module\n"
        "m = lazy_module('colorsys')\n"
        "try:\n    m.no_such_name\nexcept AttributeError as e:\n    print('no_such_name' in str(e))"
    )
    assert _run(code) == "True"
