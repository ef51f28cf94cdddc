.PHONY: check test test-fast test-nightly lint format types bench demo

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
