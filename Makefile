# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create .venv with a Python >= 3.12 found on this machine and install memjax into it.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.stamp-install
PYTEST_ARGS ?=

.PHONY: demo test venv clean

$(STAMP): pyproject.toml
	@set -e; \
	if [ ! -x $(PY) ]; then \
	  base=$$(scripts/find_python.sh) || exit 1; \
	  echo "creating $(VENV) with $$base"; \
	  "$$base" -m venv $(VENV); \
	fi; \
	$(PY) -m pip install -q --upgrade pip; \
	$(PY) -m pip install -q -e '.[test]'; \
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m memjax.demo

test: $(STAMP)
	JAX_PLATFORMS=cpu $(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
