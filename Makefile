.PHONY: check test test-fast test-nightly lint format types bench demo docs docs-serve

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
