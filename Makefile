# Two entry points: `make demo` (set up, run the example job end to end) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test check lint bench clean

$(BIN)/rivven: pyproject.toml
	scripts/ensure-java.sh
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

setup: $(BIN)/rivven

demo: setup
	$(BIN)/python examples/quickstart.py

test: setup
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check .

check: lint test

bench: setup
	$(BIN)/python tests/bench/bench_engine.py

clean:
	rm -rf $(VENV) rivven-data
