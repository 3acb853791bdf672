# Quick start: `make run` (a real paired evaluation on the process runtime), `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT ?= runs/quickstart
# The reliability fuzzers' depth in `make test` (CI); `make reliability` runs them at 1.
UB_FUZZ_SCALE ?= 0.25

.PHONY: constraints smoke-pythons test-all setup serve-setup serve-python-setup run test real-model reliability images lint typecheck bench clean

# llama.cpp is compiled from source once, for x86-64-v3 (AVX2, FMA, F16C) rather than
# -march=native, so what is kept runs on any machine of this kind: upstream `llama-server`
# (about 8 min on 2 cores, kept in ~/.cache/undobench/llama-server-VERSION) and, for the
# server comparison only, llama-cpp-python's wheel (about 11 min, kept in $(WHEELS)).
WHEELS ?= $(HOME)/.cache/undobench/wheels
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
# The versions CI tested, per Python (constraints/py3.X.txt); none for another Python.
PYVER := $(shell $(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
CONSTRAINTS := $(wildcard constraints/py$(PYVER).txt)
PIN := $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
SERVE_STAMP := $(VENV)/.serve-installed
SERVE_PY_STAMP := $(VENV)/.serve-python-installed

$(STAMP): pyproject.toml Makefile $(CONSTRAINTS)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(PIN) -e '.[eval,dev,docker,llm,train,ray,mcp,rl]'
	touch $(STAMP)

setup: $(STAMP)

$(SERVE_STAMP): $(STAMP) scripts/build_llama_server.sh
	PY=$(BIN)/python scripts/build_llama_server.sh $(LLAMA_CPP_VERSION)
	$(BIN)/pip install --quiet $(PIN) -e '.[serve]'
	$(BIN)/undobench models verify
	touch $@

$(SERVE_PY_STAMP): $(STAMP)
	ls $(WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || \
		CMAKE_ARGS="$(LLAMA_CMAKE)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
		$(BIN)/pip wheel --quiet --no-deps -w $(WHEELS) llama-cpp-python==$(LLAMA_CPP_VERSION)
	$(BIN)/pip install --quiet $(PIN) --find-links $(WHEELS) -e '.[serve-python]'
	touch $@

serve-python-setup: $(SERVE_PY_STAMP)

serve-setup: $(SERVE_STAMP)

run: $(STAMP)
	rm -rf $(OUT)
	$(BIN)/undobench run --workflows pay-charge-customer,pay-renew-subscription,pay-split-payout,db-transfer-funds \
		--method bare,B0,B2 --seeds 1-3 --out $(OUT)

# Self-contained tests (in-process services, statistics, oracle conformance on their own
# stacks) run on 2 xdist workers; the rest start stacks, docker containers and harness
# faults whose leak scans, `gc` by label and timings want the machine to themselves.
# The adversarial suite holds its episodes in one module fixture: `loadgroup` keeps its
# tests on one worker while the other worker runs the rest.
PARALLEL_TESTS := tests/envs tests/evaluation tests/proxies tests/test_actions.py \
	tests/test_catalogue.py tests/test_specs.py tests/test_oracles.py \
	tests/test_adversarial.py tests/test_adversarial_handover.py tests/test_no_tells.py \
	tests/test_golden_episodes.py tests/test_architecture.py tests/test_boundaries.py \
	tests/test_tiny_domain.py tests/test_trial_schema.py tests/test_readme.py \
	tests/agents/test_methods.py tests/agents/test_method_registry.py \
	tests/agents/test_resumption.py tests/agents/test_zero_privilege.py \
	tests/agents/test_prompt.py tests/agents/test_llm_interop.py \
	tests/rl/test_demos.py tests/rl/test_faults.py tests/rl/test_grpo_support.py \
	tests/rl/test_rewards.py tests/rl/test_trl_env.py tests/rl/test_train_grpo_tiny.py \
	tests/test_prestart.py
# What `make test` leaves out: `heavy` tests (minutes of CPU each, with a faster test of the
# same path in the suite) and GPU tests. `make test-all` runs the heavy ones too.
TEST_MARKS ?= not gpu and not heavy

# --durations: where CI's time goes, printed with every run.
test: $(STAMP)
	$(BIN)/python -m pytest -m "$(TEST_MARKS)" -q -n 2 --dist loadgroup --durations=15 $(PARALLEL_TESTS)
	UB_FUZZ_SCALE=$(UB_FUZZ_SCALE) $(BIN)/python -m pytest -m "$(TEST_MARKS)" -q --durations=40 \
		$(addprefix --ignore=,$(PARALLEL_TESTS))

test-all: $(STAMP)
	$(MAKE) test TEST_MARKS="not gpu"

# A real model in the loop (llama-server + SmolLM2 and Qwen2.5-Coder-1.5B on the CPU): CI's
# real-model sweep.
real-model: $(SERVE_STAMP)
	BIN=$(BIN) scripts/real_model_sweep.sh runs/real-model

reliability: $(STAMP)
	UB_FUZZ_SCALE=1 UB_FUZZ_RANDOM=1 $(BIN)/python -m pytest tests/reliability -m "not gpu" -q

images: $(STAMP)
	$(BIN)/undobench images build --offline

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	MYPY=$(abspath $(BIN))/mypy scripts/typecheck.sh

# The built wheel on every supported Python (scripts/smoke_python.sh): per version a venv in
# build/smoke-py3.X from this machine's interpreter, the wheel installed at the versions in
# constraints/, a paired sweep over every domain from outside the source tree; on 3.12 and
# 3.13 also F1 and F2 against the fake server, the MCP round trip and uvloop (`make test`
# runs the whole suite on 3.11). The three installs run at once (scripts/smoke_pythons.sh).
smoke-pythons:
	scripts/smoke_pythons.sh 3.11 3.12 3.13

# Freeze what was tested (the dev venv; full venvs of 3.12 and 3.13) into constraints/py3.X.txt.
constraints: $(STAMP)
	scripts/freeze_constraints.sh

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_core.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
