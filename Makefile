# Tessera developer entry points. Run as root on a fresh Debian bookworm machine:
#   make demo    install what is missing, build, compile a model (examples/model_demo.py) and
#                print its latency vs eager PyTorch and Inductor
#   make test    install what is missing, build, run the C++ and Python tests, fuzz the
#                expression frontend for FUZZ_SECONDS
# Also: make fuzz (the fuzzer alone, FUZZ_SECONDS=300 for a longer run), make sanitize (C++
# tests and a Python smoke run under ASan + UBSan, in ./build-sanitize; not part of `test`),
# make zoo (benchmarks/zoo.py: two dozen architectures against eager and Inductor, about an hour;
# ZOO_ARGS="--models bert t5" for some, the JSON in $(ZOO_JSON)).
# Every step checks before it acts, so a second run only re-checks (a few seconds).

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := build

PYTHON ?= python3
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

# Pins. torch is never installed unpinned: an unpinned (or range) request can pull the newest
# CUDA build with several GB of dependencies. transformers does not depend on torch, so this pin
# keeps torch as it is; every pip call below also names torch==$(TORCH_VERSION) to make sure.
TORCH_VERSION := 2.13.0
TRANSFORMERS_VERSION := 5.18.0

# What the build links or runs. LLVM is used as the shared libLLVM-14.so, so only the -dev
# packages that LLVM's CMake config looks for are needed (ffi, terminfo via ncurses, zlib, xml2).
# clang-14 and its runtime libraries build the libFuzzer target (make fuzz, part of make test).
APT_PACKAGES := build-essential cmake ninja-build llvm-14-dev libgtest-dev libgmock-dev \
	pybind11-dev libsqlite3-dev libxgboost-dev clang-format zlib1g-dev libncurses-dev \
	libxml2-dev libffi-dev clang-14 libclang-rt-14-dev nlohmann-json3-dev

# Ninja when present: faster no-op rebuilds. setup.py makes the same choice, and whichever
# configures ./build first fixes the generator for both.
CMAKE_GENERATOR_FLAG := $(if $(shell command -v ninja),-G Ninja,)

FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
SANITIZE_DIR ?= build-sanitize

.PHONY: all deps apt-deps python-deps configure build install test demo format clean \
	fuzz fuzz-build fuzz-run sanitize zoo peers tvm-peer

all: build

# ---------------------------------------------------------------------------------------------
# deps
# ---------------------------------------------------------------------------------------------
deps: apt-deps python-deps

apt-deps:
	@installed=$$( (dpkg-query -W -f='$${Package}\t$${db:Status-Abbrev}\n' $(APT_PACKAGES) \
		2>/dev/null || true) | awk -F'\t' '$$2 ~ /^ii/ {print $$1}'); \
	missing=""; \
	for p in $(APT_PACKAGES); do \
		grep -qxF "$$p" <<<"$$installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "deps: installing apt packages:$$missing"; \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq; \
		DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends \
			$$missing; \
	fi

# Prints the pip requirement strings that are not satisfied (nothing when all are). Reads
# package metadata only: importing torch would cost seconds on every make.
define PY_DEPS_CHECK
import importlib.metadata as md
want = {
    "torch": "==$(TORCH_VERSION)",
    "transformers": "==$(TRANSFORMERS_VERSION)",
    "numpy": "", "pybind11": "", "pytest": "", "tqdm": "",
    "ray": "==2.60.0",  # tessera.runners: search measurements on a Ray cluster
    "matplotlib": "",  # tessera.explain's chart in notebooks
    "setuptools": ">=64", "wheel": "",
}
def release(v):
    return tuple(int(x) for x in v.split("+")[0].split(".")[:3] if x.isdigit())
for name, spec in want.items():
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        print(name + spec)
        continue
    if spec.startswith("==") and have.split("+")[0] != spec[2:]:
        print(name + spec)
    elif spec.startswith(">=") and release(have) < release(spec[2:]):
        print(name + spec)
endef
export PY_DEPS_CHECK

python-deps:
	@missing=$$($(PYTHON) -c "$$PY_DEPS_CHECK"); \
	if [ -n "$$missing" ]; then \
		echo "deps: installing python packages:" $$missing; \
		$(PYTHON) -m pip install -q --root-user-action=ignore torch==$(TORCH_VERSION) $$missing; \
		$(PYTHON) -c "import torch, sys; v = torch.__version__.split('+')[0]; \
			sys.exit(0 if v == '$(TORCH_VERSION)' else 'torch changed to ' + torch.__version__)"; \
	fi

# ---------------------------------------------------------------------------------------------
# build
# ---------------------------------------------------------------------------------------------
configure: deps
	@if [ ! -f $(BUILD_DIR)/CMakeCache.txt ]; then \
		cmake -S . -B $(BUILD_DIR) $(CMAKE_GENERATOR_FLAG) -DCMAKE_BUILD_TYPE=Release \
			-DPYTHON_EXECUTABLE="$$($(PYTHON) -c 'import sys; print(sys.executable)')"; \
	fi

# CMake writes _C into torch_backend/tessera/, so the editable install is needed once per
# checkout: afterwards `import tessera` already sees every rebuild.
build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)
	@$(MAKE) --no-print-directory install

# Needs the Python packages (wheel, pybind11, torch) the editable install builds with; the C++
# build it links comes from `make build`.
install: python-deps
	@where=$$($(PYTHON) -c "import importlib.util as u; s = u.find_spec('tessera'); \
		print(s.origin if s else '')" 2>/dev/null || true); \
	if [ "$$where" != "$(CURDIR)/torch_backend/tessera/__init__.py" ]; then \
		echo "install: pip install --no-build-isolation -e ."; \
		TESSERA_BUILD_DIR=$(BUILD_DIR) $(PYTHON) -m pip install -q --root-user-action=ignore \
			--no-build-isolation -e . torch==$(TORCH_VERSION); \
	fi

# ---------------------------------------------------------------------------------------------
# test: C++ (ctest over the GoogleTest cases) then Python (pytest). Both always run; the last
# line is "summary: N passed, N failed[, N skipped]" and the exit status is non-zero on any
# failure.
# ---------------------------------------------------------------------------------------------
test: build fuzz-build
	@log=$$(mktemp -d); \
	echo "== C++ tests (ctest)"; \
	set +e; \
	( cd $(BUILD_DIR) && ctest --output-on-failure --no-tests=ignore -j$(JOBS) ) \
		2>&1 | tee $$log/ctest.txt; cpp_rc=$${PIPESTATUS[0]}; \
	echo "== Python tests (pytest)"; \
	$(PYTHON) -m pytest -q tests/python 2>&1 | tee $$log/pytest.txt; py_rc=$${PIPESTATUS[0]}; \
	echo "== Fuzzing the expression frontend ($(FUZZ_SECONDS) s)"; \
	$(MAKE) --no-print-directory fuzz-run 2>&1 | tee $$log/fuzz.txt; fuzz_rc=$${PIPESTATUS[0]}; \
	set -e; \
	cpp_total=$$(sed -nE 's/.* tests failed out of ([0-9]+).*/\1/p' $$log/ctest.txt | tail -1); \
	cpp_failed=$$(sed -nE 's/.*, ([0-9]+) tests failed out of.*/\1/p' $$log/ctest.txt | tail -1); \
	cpp_total=$${cpp_total:-0}; cpp_failed=$${cpp_failed:-0}; \
	last=$$(grep -E '(passed|failed|error|skipped|no tests ran)' $$log/pytest.txt | tail -1); \
	count() { sed -nE "s/.*[^0-9]([0-9]+) $$1.*/\1/p; s/^([0-9]+) $$1.*/\1/p" <<<"$$last" \
		| head -1; }; \
	py_passed=$$(count passed); py_failed=$$(count failed); py_errors=$$(count error); \
	py_skipped=$$(count skipped); \
	fuzz_ok=$$(( fuzz_rc == 0 ? 1 : 0 )); \
	passed=$$(( cpp_total - cpp_failed + $${py_passed:-0} + fuzz_ok )); \
	failed=$$(( cpp_failed + $${py_failed:-0} + $${py_errors:-0} + 1 - fuzz_ok )); \
	skipped=$${py_skipped:-0}; \
	rm -rf $$log; \
	if [ $$cpp_rc -ne 0 ] && [ $$cpp_failed -eq 0 ]; then failed=$$((failed + 1)); fi; \
	if [ $$py_rc -ne 0 ] && [ $${py_failed:-0} -eq 0 ] && [ $${py_errors:-0} -eq 0 ]; then \
		failed=$$((failed + 1)); fi; \
	echo "C++: $$((cpp_total - cpp_failed)) passed, $$cpp_failed failed (ctest exit $$cpp_rc);" \
		"Python: $${py_passed:-0} passed, $${py_failed:-0} failed, $${py_errors:-0} errors" \
		"(pytest exit $$py_rc); fuzzer exit $$fuzz_rc"; \
	if [ $$skipped -gt 0 ]; then \
		echo "summary: $$passed passed, $$failed failed, $$skipped skipped"; \
	else \
		echo "summary: $$passed passed, $$failed failed"; \
	fi; \
	[ $$cpp_rc -eq 0 ] && [ $$py_rc -eq 0 ] && [ $$fuzz_rc -eq 0 ] && [ $$failed -eq 0 ]

demo: build
	$(PYTHON) examples/model_demo.py

ZOO_JSON ?= zoo.json
ZOO_ARGS ?=
zoo: build
	$(PYTHON) benchmarks/zoo.py --json $(ZOO_JSON) $(ZOO_ARGS)

# Peer runtimes the benchmarks time beside Tessera (benchmarks/peer_runtimes.py): benchmark-only,
# never needed by the build or the tests. `make zoo ZOO_ARGS=--openvino` then adds the column.
OPENVINO_VERSION ?= 2026.4.1
peers: python-deps
	$(PYTHON) -c "import openvino" 2>/dev/null || \
		$(PYTHON) -m pip install -q --root-user-action=ignore openvino==$(OPENVINO_VERSION)

# TVM MetaSchedule for benchmarks/peer.py, in an environment of its own (its bundled LLVM never
# shares a process with Tessera's kernels) that sees this one's torch and Tessera. apache-tvm
# 0.27.0.post1 needs apache-tvm-ffi 0.1.14.post1: later ffi releases crash when MetaSchedule
# serialises TIR.
TVM_VENV ?= build-peers/tvm-venv
tvm-peer: install
	test -x $(TVM_VENV)/bin/python || $(PYTHON) -m venv --system-site-packages $(TVM_VENV)
	$(TVM_VENV)/bin/python -c "import tvm" 2>/dev/null || $(TVM_VENV)/bin/python -m pip install \
		-q apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1 psutil

# ---------------------------------------------------------------------------------------------
# fuzz: libFuzzer over the tessera.op frontend (tests/fuzz), built with clang in $(FUZZ_DIR).
# The corpus grows in $(FUZZ_DIR)/corpus from the seeds in tests/fuzz/corpus; a crash leaves
# its input in $(FUZZ_DIR)/crash-* and fails the target.
# ---------------------------------------------------------------------------------------------
fuzz: fuzz-build
	@$(MAKE) --no-print-directory fuzz-run

fuzz-build: deps
	@if [ ! -f $(FUZZ_DIR)/CMakeCache.txt ]; then \
		CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_DIR) $(CMAKE_GENERATOR_FLAG) \
			-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_BUILD_FUZZERS=ON \
			-DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_PYTHON=OFF > /dev/null; \
	fi
	cmake --build $(FUZZ_DIR) --target tessera_fuzz_expression -j$(JOBS)

fuzz-run:
	@mkdir -p $(FUZZ_DIR)/corpus
	@rc=0; $(FUZZ_DIR)/tessera_fuzz_expression -max_total_time=$(FUZZ_SECONDS) -max_len=512 \
		-timeout=10 -rss_limit_mb=2048 -dict=tests/fuzz/expression.dict -print_final_stats=1 \
		-artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus tests/fuzz/corpus \
		> $(FUZZ_DIR)/fuzz.log 2>&1 || rc=$$?; \
	grep -E '^(Done|stat::new_units_added)' $(FUZZ_DIR)/fuzz.log || true; \
	if [ $$rc -ne 0 ]; then tail -n 60 $(FUZZ_DIR)/fuzz.log; echo "fuzz: FAILED (exit $$rc)"; \
	else echo "fuzz: no crash in $(FUZZ_SECONDS) s"; fi; exit $$rc

# ---------------------------------------------------------------------------------------------
# sanitize: the C++ tests and a Python smoke run (tests/sanitize/smoke.py) with everything built
# under ASan + UBSan in $(SANITIZE_DIR). The Python run needs the ASan runtime loaded first, and
# libstdc++ with it (else ASan cannot find the real __cxa_throw and aborts on the first C++
# exception):
#   LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libstdc++.so)"
#   ASAN_OPTIONS=detect_leaks=0 python3 ...
# (leaks are not checked there: CPython and torch keep their allocations until exit).
# ---------------------------------------------------------------------------------------------
SANITIZE_ENV := ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

sanitize: deps
	@if [ ! -f $(SANITIZE_DIR)/CMakeCache.txt ]; then \
		cmake -S . -B $(SANITIZE_DIR) $(CMAKE_GENERATOR_FLAG) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
			-DTESSERA_SANITIZE=address,undefined \
			-DTESSERA_PYTHON_OUTPUT_DIR=$(CURDIR)/$(SANITIZE_DIR)/python/tessera \
			-DPYTHON_EXECUTABLE="$$($(PYTHON) -c 'import sys; print(sys.executable)')" > /dev/null; \
	fi
	cmake --build $(SANITIZE_DIR) -j$(JOBS)
	@echo "== C++ tests under ASan + UBSan"
	cd $(SANITIZE_DIR) && $(SANITIZE_ENV) ctest --output-on-failure --no-tests=error -j$(JOBS)
	@echo "== Python smoke run under ASan + UBSan"
	@cd torch_backend && find tessera -name '*.py' -exec install -D -m 644 {} \
		$(CURDIR)/$(SANITIZE_DIR)/python/{} \;
	$(SANITIZE_ENV) LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libstdc++.so)" \
		PYTHONPATH=$(CURDIR)/$(SANITIZE_DIR)/python $(PYTHON) tests/sanitize/smoke.py

# ---------------------------------------------------------------------------------------------
format:
	find csrc tests/cpp \( -name '*.h' -o -name '*.cc' \) -print0 | xargs -0 -r clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(FUZZ_DIR) $(SANITIZE_DIR) torch_backend/*.egg-info
	rm -f torch_backend/tessera/_C*.so
