.PHONY: check test test-fast test-nightly lint format types bench demo docs docs-serve lock test-min test-latest

# The same steps as CI (.ci/run), in the same order of cost.
check: lint types test

lint:
	ruff format --check .
	ruff check .

format:
	ruff format .
	ruff check --fix .

types:
	mypy
	# Each example folder on its own: several have a main.py, one module name for mypy.
	for d in examples/*/; do set -- $$d*.py; [ -e "$$1" ] || continue; mypy "$$@" || exit 1; done

test:
	python -m pytest

# Everything but the tests marked slow (crash, property and fresh-install tests).
test-fast:
	python -m pytest -m "not slow and not nightly"

# The exhaustive depth of the properties whose quick depth every run has.
test-nightly:
	python -m pytest -m nightly

bench:
	python bench/bench.py

demo:
	mainspring demo

# The documentation site (pip install -e ".[docs]"): built strict, as CI does; served at :8000.
docs:
	NO_MKDOCS_2_WARNING=1 mkdocs build --strict

docs-serve:
	NO_MKDOCS_2_WARNING=1 mkdocs serve

# The installs (CONTRIBUTING.md, "Versions"): constraints/test.txt, the versions the
# suite passes with, and constraints/minimum.txt, pyproject's lower bounds.
lock:
	python .ci/lock.py

# The lowest versions pyproject.toml allows, in a fresh .venv-min: the tests that
# exercise dependencies, one line per adapter or store.
test-min:
	python3 -m venv --clear .venv-min
	.venv-min/bin/pip install -q -c constraints/minimum.txt -e ".[test]"
	MAINSPRING_CI=1 .venv-min/bin/python .ci/by_component.py

# The newest versions of everything, in a fresh .venv-latest: which adapter or store broke.
test-latest:
	python3 -m venv --clear .venv-latest
	.venv-latest/bin/pip install -q -U --upgrade-strategy eager -e ".[test]"
	MAINSPRING_CI=1 .venv-latest/bin/python .ci/by_component.py
