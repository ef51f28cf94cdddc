.PHONY: check test lint bench demo

check: lint test

lint:
	ruff format --check .
	ruff check .
	mypy

test:
	python -m pytest

bench:
	python bench/bench.py

demo:
	mainspring demo
