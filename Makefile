# Every target bootstraps .venv with only Python 3.11+ on the machine. `run`, `chat` and
# `bench` install the runtime only; `test` and `check` add the dev tools (the `dev` extra).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime-installed
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.docs-installed

.PHONY: run test check bench chat docs config-docs clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		(echo "sessiongate needs Python 3.11 or newer" >&2; exit 1)
	$(PYTHON) -m venv $(VENV)

$(RUNTIME): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	@touch $(RUNTIME)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(RUNTIME) $(STAMP)

run: $(RUNTIME)
	$(BIN)/sessiongate run $(ARGS)

chat: $(RUNTIME)
	$(BIN)/sessiongate chat $(ARGS)

# The suite runs on four workers (pytest-xdist), a test file per worker at a time, so a
# file's shared fixtures are built once; most tests wait on processes and sockets, so four
# workers keep two cores busy. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 4

test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(ARGS)

check: $(STAMP)
	$(BIN)/ruff format --no-cache --check src tests benchmarks examples
	$(BIN)/ruff check --no-cache src tests benchmarks examples
	$(BIN)/mypy

bench: $(RUNTIME)
	$(BIN)/sessiongate bench $(ARGS)

$(DOCS_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	@touch $(RUNTIME) $(DOCS_STAMP)

# The documentation site (mkdocs-material) in site/, strict: a broken link or anchor, a
# missing page or one left out of the navigation fails the build.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict $(ARGS)

# Regenerates docs/CONFIG.md from the settings model (tests/cli/test_config_docs.py checks it).
config-docs: $(RUNTIME)
	$(BIN)/python -m sessiongate.cli._config_docs > docs/CONFIG.md

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
