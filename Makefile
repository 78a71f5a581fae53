# Tessera developer entry points. Run as root on a fresh Debian bookworm machine:
#   make demo    install what is missing, build, compile a model (examples/model_demo.py) and
#                print its latency vs eager PyTorch and Inductor
#   make test    install what is missing, build, run the C++ and Python tests
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
APT_PACKAGES := build-essential cmake ninja-build llvm-14-dev libgtest-dev libgmock-dev \
	pybind11-dev libsqlite3-dev libxgboost-dev clang-format zlib1g-dev libncurses-dev \
	libxml2-dev libffi-dev

# Ninja when present: faster no-op rebuilds. setup.py makes the same choice, and whichever
# configures ./build first fixes the generator for both.
CMAKE_GENERATOR_FLAG := $(if $(shell command -v ninja),-G Ninja,)

.PHONY: all deps apt-deps python-deps configure build install test demo format clean

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

install:
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
test: build
	@log=$$(mktemp -d); \
	echo "== C++ tests (ctest)"; \
	set +e; \
	( cd $(BUILD_DIR) && ctest --output-on-failure --no-tests=ignore -j$(JOBS) ) \
		2>&1 | tee $$log/ctest.txt; cpp_rc=$${PIPESTATUS[0]}; \
	echo "== Python tests (pytest)"; \
	$(PYTHON) -m pytest -q tests/python 2>&1 | tee $$log/pytest.txt; py_rc=$${PIPESTATUS[0]}; \
	set -e; \
	cpp_total=$$(sed -nE 's/.* tests failed out of ([0-9]+).*/\1/p' $$log/ctest.txt | tail -1); \
	cpp_failed=$$(sed -nE 's/.*, ([0-9]+) tests failed out of.*/\1/p' $$log/ctest.txt | tail -1); \
	cpp_total=$${cpp_total:-0}; cpp_failed=$${cpp_failed:-0}; \
	last=$$(grep -E '(passed|failed|error|skipped|no tests ran)' $$log/pytest.txt | tail -1); \
	count() { sed -nE "s/.*[^0-9]([0-9]+) $$1.*/\1/p; s/^([0-9]+) $$1.*/\1/p" <<<"$$last" \
		| head -1; }; \
	py_passed=$$(count passed); py_failed=$$(count failed); py_errors=$$(count error); \
	py_skipped=$$(count skipped); \
	passed=$$(( cpp_total - cpp_failed + $${py_passed:-0} )); \
	failed=$$(( cpp_failed + $${py_failed:-0} + $${py_errors:-0} )); \
	skipped=$${py_skipped:-0}; \
	rm -rf $$log; \
	if [ $$cpp_rc -ne 0 ] && [ $$cpp_failed -eq 0 ]; then failed=$$((failed + 1)); fi; \
	if [ $$py_rc -ne 0 ] && [ $${py_failed:-0} -eq 0 ] && [ $${py_errors:-0} -eq 0 ]; then \
		failed=$$((failed + 1)); fi; \
	echo "C++: $$((cpp_total - cpp_failed)) passed, $$cpp_failed failed (ctest exit $$cpp_rc);" \
		"Python: $${py_passed:-0} passed, $${py_failed:-0} failed, $${py_errors:-0} errors" \
		"(pytest exit $$py_rc)"; \
	if [ $$skipped -gt 0 ]; then \
		echo "summary: $$passed passed, $$failed failed, $$skipped skipped"; \
	else \
		echo "summary: $$passed passed, $$failed failed"; \
	fi; \
	[ $$cpp_rc -eq 0 ] && [ $$py_rc -eq 0 ] && [ $$failed -eq 0 ]

demo: build
	$(PYTHON) examples/model_demo.py

# ---------------------------------------------------------------------------------------------
format:
	find csrc tests/cpp \( -name '*.h' -o -name '*.cc' \) -print0 | xargs -0 -r clang-format -i

clean:
	rm -rf $(BUILD_DIR) torch_backend/*.egg-info
	rm -f torch_backend/tessera/_C*.so
