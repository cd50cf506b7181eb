# Two commands: `make demo` runs the product, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
ARGS ?=

.PHONY: demo test install browser lint typecheck bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed

# Debian's Chromium for the browser tests (the suite never downloads a browser of its own).
browser:
	@command -v chromium >/dev/null || { echo "installing chromium with apt-get" >&2; \
	  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

demo: install
	PORT=$(PORT) QM_LOG_FORMAT=$${QM_LOG_FORMAT:-console} $(PY) manage.py demo --port $(PORT)

test: install browser
	scripts/test-services.sh scripts/run-tests.sh $(PY) $(ARGS)

lint: install
	$(VENV)/bin/ruff check scheduler_core controlplane frontend tests bench

typecheck: install
	$(VENV)/bin/mypy --strict scheduler_core

# The engine's two headline benchmarks (docs/engine.md): a full cycle on 10,000 GPUs, and the
# seed's week at three loads side by side with the seed's scheduler. The rest: docs/benchmarks.md.
bench: install
	$(PY) -m scheduler_core.bench --json
	$(PY) bench/seed_week.py

clean:
	rm -rf $(VENV) var .pytest_cache
