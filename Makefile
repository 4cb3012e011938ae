# Every target bootstraps .venv with only Python 3.11+ on the machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test check bench chat clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		(echo "sessiongate needs Python 3.11 or newer" >&2; exit 1)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/sessiongate run $(ARGS)

chat: $(STAMP)
	$(BIN)/sessiongate chat $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest $(ARGS)

check: $(STAMP)
	$(BIN)/ruff format --no-cache --check src tests benchmarks
	$(BIN)/ruff check --no-cache src tests benchmarks
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/sessiongate bench $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
