# Everything needs only Python 3.11+ and make: the first target that needs the environment creates it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PACKAGES := packages/ctxbudget packages/langchain-ctxbudget packages/llamaindex-ctxbudget
VENV_LATEST := .venv-latest
# The store's own tests are left out: chromadb's newest release here is the pinned one. Which
# memory tests run is tests/install/latest_tests.py's answer: all of them, unless only framework
# releases differ from the pinned set (then those that reach a framework).
LATEST_TESTS := tests/install/latest_tests.py
# The suite runs on PYTEST_WORKERS processes (pytest-xdist): 2, this machine's cores; 0 runs it in
# one process (for -s or --pdb). Each test file runs whole on one worker, in its own order
# (loadfile): a module's shared fixtures see what they see in one process.
PYTEST_WORKERS ?= 2
XDIST := -n $(PYTEST_WORKERS) --dist loadfile
export ANONYMIZED_TELEMETRY := False
export ORT_DISABLE_TELEMETRY := 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: help venv test test-latest latest-venv test-fast lint typecheck demo bench docs clean

help:
	@echo "make demo    create the environment (first run) and run the ctxbudget demo"
	@echo "make test    create the environment (first run), lint, type-check and run every test"
	@echo "make test-latest  the adapter and memory tests on the newest releases (.venv-latest)"
	@echo "make lint    ruff and mypy"
	@echo "make bench   run the benchmarks in benchmarks/ and print their figures"
	@echo "make docs    build the documentation site"

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt $(addsuffix /pyproject.toml,$(PACKAGES))
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (PYTHON=$(PYTHON))")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# Everything, for development: every extra of every package. torch==2.13.0 is named in the
	# same command as sentence-transformers (ctxbudget's torch extra) so pip takes the local CPU
	# build instead of the registry's CUDA one.
	$(BIN)/python -m pip install --quiet -c constraints.txt torch==2.13.0 \
		-e "packages/ctxbudget[memory,torch,eval,mcp,otel]" \
		-e "packages/langchain-ctxbudget[agents,memory]" \
		-e "packages/llamaindex-ctxbudget[memory]" \
		-e ".[dev]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check packages tests benchmarks
	$(BIN)/ruff format --check packages tests benchmarks
	$(BIN)/mypy packages/ctxbudget/src packages/langchain-ctxbudget/src packages/llamaindex-ctxbudget/src

typecheck: $(STAMP)
	$(BIN)/mypy packages/ctxbudget/src packages/langchain-ctxbudget/src packages/llamaindex-ctxbudget/src

# The whole suite: lint, types, then every test (slow and integration included). pytest exits 5
# when it collects nothing, which is an error here: a suite that tests nothing must not pass.
test: lint
	$(BIN)/python tests/install/versions.py
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

# The adapter and memory tests on the newest releases that install here (README "Tested
# versions"): a second virtualenv, resolved again on every run without constraints.txt, so it
# takes whatever is newest within the declared ranges. torch==2.13.0 is named for the same reason
# as above (the torch and eval extras are there so the tests using LocalEmbedder and matplotlib run).
# Prints the versions it uses before the tests. .venv-latest ignores itself (its .gitignore).
# The model-based memory test runs its local 300 steps here (CI's 1,000 ran in `make test`):
# this run checks the newest releases, not more random histories.
# `make latest-venv` is the install alone: .ci/run starts it beside `make test` and then runs
# `make test-latest LATEST_READY=1`, which skips installing again.
test-latest:
	@if [ -z "$(LATEST_READY)" ]; then $(MAKE) --no-print-directory latest-venv; fi
	$(VENV_LATEST)/bin/python tests/install/versions.py
	tests=$$($(VENV_LATEST)/bin/python $(LATEST_TESTS)) && \
		CTXBUDGET_STATEFUL_STEPS=$${CTXBUDGET_STATEFUL_STEPS:-300} \
		$(VENV_LATEST)/bin/python -m pytest $(XDIST) $$tests $(PYTEST_ARGS)

latest-venv:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (PYTHON=$(PYTHON))")'
	test -x $(VENV_LATEST)/bin/python || $(PYTHON) -m venv $(VENV_LATEST)
	echo '*' > $(VENV_LATEST)/.gitignore
	$(VENV_LATEST)/bin/python -m pip install --quiet --upgrade pip
	$(VENV_LATEST)/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager torch==2.13.0 \
		-e "packages/ctxbudget[memory,torch,eval,mcp,otel]" \
		-e "packages/langchain-ctxbudget[agents,memory]" \
		-e "packages/llamaindex-ctxbudget[memory]" \
		"pytest>=8" "pytest-asyncio>=0.23" "pytest-xdist>=3.5" "hypothesis>=6.100" \
		"langchain-tests>=1.0" "opentelemetry-sdk>=1.30" "langmem>=0.0.30"

test-fast: $(STAMP)
	$(BIN)/python -m pytest $(XDIST) -m "not slow" $(PYTEST_ARGS)

demo: $(STAMP)
	$(BIN)/ctxbudget demo

# Prints the figures recorded in docs/benchmarks.md (bench_memory embeds 20,000 texts twice:
# several minutes on two cores).
bench: $(STAMP)
	$(BIN)/python benchmarks/bench_assemble.py
	$(BIN)/python benchmarks/bench_knapsack_gap.py
	$(BIN)/python benchmarks/bench_compact.py
	$(BIN)/python benchmarks/bench_memory.py
	$(BIN)/python benchmarks/bench_memory_start.py
	$(BIN)/python benchmarks/bench_middleware.py
	$(BIN)/python benchmarks/bench_scale.py --sizes 10000,100000
	$(BIN)/python benchmarks/bench_layouts.py
	$(BIN)/python benchmarks/bench_excerpts.py
	$(BIN)/python benchmarks/bench_telemetry.py

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) $(VENV_LATEST) site .pytest_cache .mypy_cache .ruff_cache .hypothesis
