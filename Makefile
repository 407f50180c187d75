# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create .venv with a Python >= 3.12 found on this machine and install memjax into it.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.stamp-install
PYTEST_ARGS ?=
# pytest-xdist workers for `make test` (one per core of a 2-core CI machine; each worker holds its own JAX,
# ~2.5 GiB at peak). --dist loadfile keeps a module's tests, and so its module-scoped fixtures, on one worker.
TEST_JOBS ?= 2
# The CUDA PJRT plugin, compile-only, in .venv/cuda-aot (not on the venv's path: jax without JAX_PLATFORMS would try
# to start it): tests/e2e/benchmarks/test_gpu_aot.py compiles the engine loop and the recipe's train step for an H100
# without a GPU (the known GPU pathologies) in a child with PYTHONPATH=.venv/cuda-aot. --no-deps: no CUDA libraries
# (142 MB download, 413 MB installed); CUDA_AOT=0 leaves it out (those tests then skip with the reason).
CUDA_AOT ?= 1
CUDA_AOT_PKGS := jax-cuda13-plugin==0.11.2 jax-cuda13-pjrt==0.11.2

# jemalloc for the test tiers when the machine has it (Debian's libjemalloc2; .ci/run installs it): XLA:CPU compiles
# most of the suite's CPU time, and its compiler (LLVM, MLIR) spends ~15% of that in glibc's malloc (perf); jemalloc
# takes 7-13% off the CPU time of the engine and trainer modules. It changes no result: an allocator hands out memory,
# it does not compute. Without the library the tiers run on glibc's malloc, only slower. MEMJAX_JEMALLOC= turns it off.
MEMJAX_JEMALLOC ?= $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/aarch64-linux-gnu/libjemalloc.so.2 /usr/lib64/libjemalloc.so.2 /usr/local/lib/libjemalloc.so.2))
TEST_ENV := JAX_PLATFORMS=cpu $(if $(MEMJAX_JEMALLOC),LD_PRELOAD="$(strip $(MEMJAX_JEMALLOC) $(LD_PRELOAD))")

.PHONY: demo check test census test-gpu venv lock clean

$(STAMP): pyproject.toml constraints.txt Makefile
	@set -e; \
	if [ ! -x $(PY) ]; then \
	  base=$$(scripts/find_python.sh) || exit 1; \
	  echo "creating $(VENV) with $$base"; \
	  "$$base" -m venv $(VENV); \
	fi; \
	$(PY) -m pip install -q --upgrade pip; \
	$(PY) -m pip install -q -c constraints.txt -e '.[test]'; \
	if [ "$(CUDA_AOT)" = 1 ]; then $(PY) -m pip install -q --no-deps --target $(VENV)/cuda-aot $(CUDA_AOT_PKGS); fi; \
	touch $(STAMP)

venv: $(STAMP)

# constraints.txt pins every package `make venv` installs to the versions the suite last passed with, so that a
# release upstream changes nothing until someone re-locks and runs the suite. `make lock` re-locks: a fresh venv in a
# temporary folder, memjax with its test and tracker extras at the newest releases pyproject.toml's ranges allow, and
# its `pip freeze`. Review the diff, then `make test` on the new set before committing it.
lock:
	@set -e; base=$$(scripts/find_python.sh) || exit 1; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	"$$base" -m venv "$$tmp/venv"; "$$tmp/venv/bin/python" -m pip install -q --upgrade pip; \
	"$$tmp/venv/bin/python" -m pip install -q -e '.[test,track]'; \
	{ echo "# Every package \`make venv\` installs, at the version the suite passed with (made by \`make lock\`, Makefile)."; \
	  echo "# Python $$("$$tmp/venv/bin/python" -c 'import platform; print(platform.python_version())'); pins of packages a platform does not install are ignored there."; \
	  "$$tmp/venv/bin/python" -m pip freeze --exclude-editable; } > constraints.txt; \
	echo "constraints.txt: $$(grep -vc '^#' constraints.txt) packages"

demo: $(STAMP)
	$(PY) -m memjax.demo

# Quick tier (docs/testing.md): every test not marked e2e, learning, aot, peers or gpu; about 6 minutes on 2 cores.
QUICK := not (e2e or learning or aot or peers or gpu)

check: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest -n $(TEST_JOBS) --dist loadfile -m "$(QUICK)" --durations=25 $(PYTEST_ARGS)

# The whole CPU suite (what CI runs); --durations=25 puts the slowest tests in the log.
test: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest -n $(TEST_JOBS) --dist loadfile --durations=25 $(PYTEST_ARGS)

# The whole suite (or PYTEST_ARGS' part of it) with every XLA compile recorded in CENSUS, then the census's report
# (tests/compile_census.py): which programs it compiles, how often, for which test. tests/child_site on PYTHONPATH
# brings the hook into every child process too. A measurement, not a test tier.
CENSUS ?= /tmp/memjax-compile-census
census: $(STAMP)
	rm -rf $(CENSUS)
	status=0; MEMJAX_COMPILE_CENSUS=$(CENSUS) PYTHONPATH="$(CURDIR):$(CURDIR)/tests/child_site" $(TEST_ENV) \
	  $(PY) -m pytest -n $(TEST_JOBS) --dist loadfile $(PYTEST_ARGS) || status=$$?; \
	  $(PY) tests/compile_census.py $(CENSUS); exit $$status

# GPU tier: tests marked gpu (skipped with a reason on machines without an NVIDIA GPU)
test-gpu: $(STAMP)
	$(PY) -m pytest -m gpu $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
