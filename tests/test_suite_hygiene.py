"""The suite stays reliable on a busy two-core machine.

Every wait on a child process is bounded by its own timeout (a hung child
fails its test with a clear ``TimeoutExpired``, not the whole run at the
pytest-timeout limit), and lint and type checks are CI steps, not tests.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCKING = {"run", "check_output", "check_call", "call", "communicate"}


def unbounded_waits(source: str) -> list[int]:
    """Lines of ``subprocess.run(...)``-style calls or ``.communicate()`` without ``timeout=``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attr = node.func
        on_subprocess = isinstance(attr.value, ast.Name) and attr.value.id == "subprocess"
        if attr.attr not in BLOCKING or not (on_subprocess or attr.attr == "communicate"):
            continue
        if not any(k.arg == "timeout" for k in node.keywords):
            lines.append(node.lineno)
    return lines


def test_the_checker_sees_an_unbounded_wait() -> None:
    assert unbounded_waits("import subprocess\nsubprocess.run(['x'])\n") == [2]
    assert unbounded_waits("p.communicate()\n") == [1]
    assert unbounded_waits("subprocess.run(['x'], timeout=5)\np.communicate(timeout=5)\n") == []


def test_every_child_process_wait_has_a_timeout() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in ("tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "peers" not in path.relative_to(ROOT).parts  # the shared yardstick, kept as is
        and not any(part.startswith(".") for part in path.relative_to(ROOT).parts)  # caches
        for line in unbounded_waits(path.read_text())
    ]
    assert not found, "waits on a child process without timeout=: " + ", ".join(found)


def test_lint_and_types_are_ci_steps_not_tests() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    for step in ("ruff format --check .", "ruff check .", "mypy"):
        assert step in ci, f".ci/run lost its step {step!r}"
    for path in (ROOT / "tests").rglob("*.py"):
        text = path.read_text()
        assert '"mypy"' not in text or path.name == Path(__file__).name, path


def test_the_suite_runs_in_parallel_and_leaves_the_nightly_depth_out() -> None:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    addopts = config["addopts"]
    assert "-n auto" in addopts and "--dist worksteal" in addopts, addopts
    assert "-m 'not nightly'" in addopts, addopts
    assert any(m.startswith("nightly:") for m in config["markers"])
    makefile = (ROOT / "Makefile").read_text()
    assert "test-nightly:\n\tpython -m pytest -m nightly\n" in makefile


def test_node_packages_are_installed_only_under_the_file_lock() -> None:
    """Parallel workers share the npm caches: one installs, the others wait (tests/npm.py)."""
    found = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if path.name not in ("npm.py", Path(__file__).name)
        and '"install", "--prefix"' in path.read_text()
    ]
    assert not found, "npm install outside tests/npm.py: " + ", ".join(found)
