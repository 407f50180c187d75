# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create .venv with a Python >= 3.12 found on this machine and install memjax into it.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.stamp-install
PYTEST_ARGS ?=
# pytest-xdist workers for `make test` (one per core of a 2-core CI machine; each worker holds its own JAX,
# ~2.5 GiB at peak). --dist loadfile keeps a module's tests, and so its module-scoped fixtures, on one worker.
TEST_JOBS ?= 2

.PHONY: demo test test-gpu venv clean

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
	JAX_PLATFORMS=cpu $(PY) -m pytest -n $(TEST_JOBS) --dist loadfile $(PYTEST_ARGS)

# GPU tier: tests marked gpu (skipped with a reason on machines without an NVIDIA GPU)
test-gpu: $(STAMP)
	$(PY) -m pytest -m gpu $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
