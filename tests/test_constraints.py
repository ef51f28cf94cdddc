"""The constraints files agree with pyproject.toml.

``constraints/test.txt`` pins what the README's test command installs: a requirement
it does not pin would install whatever is newest (pip says nothing), and a pin outside
pyproject's range would fail the install. ``constraints/minimum.txt`` must be what
``make lock`` writes from pyproject's bounds now, or ``make test-min`` tests stale ones.
"""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pins(name: str) -> dict[str, Version]:
    lines = (ROOT / "constraints" / name).read_text().splitlines()
    found: dict[str, Version] = {}
    for line in lines:
        if line.strip() and not line.startswith("#"):
            package, _, version = line.partition("==")
            assert version and canonicalize_name(package) == package, line
            assert package not in found, f"{package} pinned twice in {name}"
            found[package] = Version(version)
    return found


def requirements(*extras: str) -> list[Requirement]:
    specs = list(PROJECT["dependencies"])
    for extra in extras:
        specs += PROJECT["optional-dependencies"][extra]
    return [
        r for r in map(Requirement, specs) if r.marker is None or r.marker.evaluate({"extra": ""})
    ]


def lock_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lock", ROOT / ".ci" / "lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_test_and_docs_requirement_is_pinned_within_its_range() -> None:
    locked = pins("test.txt")
    assert "mainspring" not in locked
    for requirement in requirements("test", "docs"):
        name = canonicalize_name(requirement.name)
        assert name in locked, f"constraints/test.txt does not pin {name}: run make lock"
        assert requirement.specifier.contains(locked[name], prereleases=True), (
            f"constraints/test.txt pins {name}=={locked[name]}, outside {requirement}:"
            " run make lock"
        )


def test_the_minimum_pins_are_pyprojects_lower_bounds_now() -> None:
    bounds, _unbounded = lock_script().lower_bounds()
    assert pins("minimum.txt") == bounds, "constraints/minimum.txt is stale: run make lock"


def test_the_minimum_pins_are_within_every_range() -> None:
    minimum = pins("minimum.txt")
    for requirement in requirements("test"):
        name = canonicalize_name(requirement.name)
        if name in minimum:
            assert requirement.specifier.contains(minimum[name], prereleases=True), requirement
