# kernelwiki: `make serve` sets up and serves the bundled wiki; `make test` sets up and runs every check.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test lint verify-compile pytest setup setup-test browser postgres sandbox bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,pg]'
	touch $(STAMP)

setup: $(STAMP)

## serve: index wiki/ into the embedded SQLite index and serve http://127.0.0.1:8000
serve: $(STAMP)
	$(BIN)/kernelwiki serve

## test: lint the wiki, compile every snippet for its targets, run the whole test suite
test: setup-test lint verify-compile pytest

setup-test: $(STAMP) browser postgres sandbox

browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

# bubblewrap: the runner's sandbox (docs/sandbox.md); without it snippets are neither compiled nor run
sandbox:
	@command -v bwrap >/dev/null 2>&1 || [ -n "$$KERNELWIKI_BWRAP" ] || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null)

postgres:
	@pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null || pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start 2>/dev/null || echo "PostgreSQL is not running: its tests will say so"

lint: $(STAMP)
	$(BIN)/kernelwiki lint --wiki wiki

verify-compile: $(STAMP)
	$(BIN)/kernelwiki verify --wiki wiki --compile-only --jobs 2 --no-store

pytest: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .kernelwiki artifacts
