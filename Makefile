# namesrv-grpc: every target creates its own virtual environment (.venv) on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BUF := npx --yes @bufbuild/buf@1.75.0

.PHONY: demo test lint proto proto-check clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

## demo: NameServer + three broker agents from examples/, print TopicTest's route, stop the slave
demo: $(STAMP)
	$(PY) scripts/demo.py

## test: lint (ruff, mypy, buf) and the whole test suite
test: $(STAMP) lint
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests scripts
	$(VENV)/bin/ruff format --check src tests scripts
	$(VENV)/bin/mypy
	$(BUF) lint protos

## proto: regenerate src/namesrv/v1 from protos/ (commit the result)
proto: $(STAMP)
	$(PY) scripts/gen_protos.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
