# ctxweb: `make run` to try it, `make test` to check it. Both install what they need first.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
# Everything the app, its tests and every summarizer need, at the tested versions.
EXTRAS := web,anthropic,openai,folding,dev
HOST ?= 127.0.0.1
PORT ?= 8000
CHROMIUM := /usr/bin/chromium
# The Claude Code CLI, a real client of the proxy in the tests (offline, against a fake API):
# the pinned newest and an older 2.1.x, each in its own folder .venv/claude-code-<version>.
CLAUDE_CODE_VERSION := 2.1.332
CLAUDE_CODE_OLDER_VERSION := 2.1.328
CLAUDE_CODE_VERSIONS := $(CLAUDE_CODE_VERSION) $(CLAUDE_CODE_OLDER_VERSION)
# The Codex CLI (npm @openai/codex), the Responses API client of the proxy tests, into
# .venv/codex-<version>; 0.165.0 was tried too and sends the same requests, so one version.
CODEX_VERSION := 0.171.0
PG_URL ?= postgresql://postgres@127.0.0.1:5432
# axe-core, injected by Playwright into every page of the browser tests (tests/browser/
# test_axe.py): 0 serious or critical accessibility findings. Into .venv/axe-core-<version>.
AXE_CORE_VERSION := 4.14.1

.PHONY: install run dev test lint typecheck pytest pytest-postgres chromium claude-code axe-core codex bench bench-smoke screenshot clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	set -o pipefail; $(BIN)/python -m pip install --quiet --disable-pip-version-check \
		-c constraints.txt -e '.[$(EXTRAS)]' 2>&1 \
		| { grep -v "^WARNING: Location 'file:" || true; }
	@rm -f $(VENV)/.installed-*
	@touch $@

# Debian's chromium for the browser tests; skipped (with a message) where apt is not ours to use.
chromium:
	@if [ -x $(CHROMIUM) ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing Debian's chromium for the browser tests"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
			|| echo "chromium could not be installed: browser tests will be skipped"; \
	else echo "no $(CHROMIUM) and no root: browser tests will be skipped"; fi

# npm's registry only; skipped (with a message) where npm is missing or cannot fetch it.
claude-code:
	@for version in $(CLAUDE_CODE_VERSIONS); do \
		prefix=$(VENV)/claude-code-$$version; \
		if [ -x $$prefix/node_modules/.bin/claude ]; then continue; fi; \
		if ! command -v npm >/dev/null; then \
			echo "no npm: the Claude Code CLI tests will be skipped"; exit 0; fi; \
		echo "installing the Claude Code CLI $$version for the proxy tests"; \
		npm install --silent --no-audit --no-fund --prefix $$prefix \
			@anthropic-ai/claude-code@$$version >/dev/null \
			|| echo "the Claude Code CLI $$version could not be installed: its tests will be skipped"; \
	done

# npm's registry only; skipped (with a message) where npm is missing or cannot fetch it.
codex:
	@prefix=$(VENV)/codex-$(CODEX_VERSION); \
	if [ -x $$prefix/node_modules/.bin/codex ]; then exit 0; fi; \
	if ! command -v npm >/dev/null; then \
		echo "no npm: the Codex CLI tests will be skipped"; exit 0; fi; \
	echo "installing the Codex CLI $(CODEX_VERSION) for the proxy tests"; \
	npm install --silent --no-audit --no-fund --prefix $$prefix \
		@openai/codex@$(CODEX_VERSION) >/dev/null \
		|| echo "the Codex CLI $(CODEX_VERSION) could not be installed: its tests will be skipped"

# npm's registry only; skipped (with a message) where npm is missing or cannot fetch it.
axe-core:
	@prefix=$(VENV)/axe-core-$(AXE_CORE_VERSION); \
	if [ -f $$prefix/node_modules/axe-core/axe.min.js ]; then exit 0; fi; \
	if ! command -v npm >/dev/null; then echo "no npm: the accessibility tests will be skipped"; exit 0; fi; \
	echo "installing axe-core $(AXE_CORE_VERSION) for the accessibility tests"; \
	npm install --silent --no-audit --no-fund --prefix $$prefix axe-core@$(AXE_CORE_VERSION) >/dev/null \
		|| echo "axe-core could not be installed: the accessibility tests will be skipped"

run: install
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py ensure_admin
	$(BIN)/python manage.py seed_demo
	@echo "ctxweb: open http://$(HOST):$(PORT)/ and log in as admin (the password is printed above when the user is first created)"
	@trap 'kill 0' EXIT INT TERM; \
	$(BIN)/python manage.py db_worker & \
	$(BIN)/python manage.py devserver $(HOST):$(PORT)

# `make run` with Django's technical error pages (URL patterns, tracebacks) instead of the
# app's own 404/500 pages: for whoever debugs the app itself, never for trying it.
dev: export CTXWEB_DEBUG_PAGES = 1
dev: run

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

typecheck: install
	$(BIN)/mypy .

pytest: install chromium claude-code codex axe-core
	$(BIN)/python -m pytest -n 2 --dist loadgroup

# The whole suite again on a throwaway database of the local PostgreSQL, when one answers.
pytest-postgres: install chromium claude-code codex axe-core
	@if $(BIN)/python scripts/pg_available.py "$(PG_URL)"; then \
		db=ctxweb_test_$$$$; \
		DATABASE_URL="$(PG_URL)/$$db" $(BIN)/python -m pytest -n 2 --dist loadgroup \
			-p no:cacheprovider; \
	else echo "PostgreSQL not reachable at $(PG_URL): PostgreSQL run skipped"; fi

test: lint typecheck pytest pytest-postgres bench-smoke

# Every benchmark, one after the other; bench/results.md is written from the run.
bench: install
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[bench]'
	$(BIN)/python -m bench --output bench/results.md

# Every benchmark with tiny sizes, so none can rot; no figure is checked or kept.
bench-smoke: install
	$(BIN)/python -m bench --smoke --output $(VENV)/bench-smoke.md

# docs/screenshot.png, the README's view of the session page, from a throwaway data dir.
screenshot: install chromium
	$(BIN)/python scripts/readme_screenshot.py

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
