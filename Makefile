# The README's commands. Each is idempotent and does its own set-up on a fresh
# machine: Debian packages, the project venv (.venv: torch, cmake 4), the build.
#   make demo   build, run `forge build` on examples/tiny, then the example under `forge run`
#   make test   build, then run every test
#   make check  build, then the fast tier: the tests labelled unit (CMakeLists.txt)
#   make test-LABEL  build, then one tier (test-torch, test-daemon, test-gui, test-gpu)
#   make build  just build (build/forge)
.PHONY: all build demo test check deps venv format clean

VENV     := .venv
PYTHON   := $(VENV)/bin/python
CMAKE    := $(VENV)/bin/cmake
TORCH    ?= torch==2.14.1
export PATH := $(abspath $(VENV))/bin:$(PATH)

all: build

deps:
	@scripts/install-deps.sh

# torch 2.14.1 is the CUDA build: it runs on the CPU and carries the CUDA headers
# that let CUDA-side code compile on machines without a GPU.
$(VENV)/.ready: scripts/install-deps.sh
	@$(MAKE) --no-print-directory deps
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install -q --disable-pip-version-check "$(TORCH)" "cmake>=4" numpy
	touch $@

venv: $(VENV)/.ready

build/build.ninja: $(VENV)/.ready CMakeLists.txt
	$(CMAKE) -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release

build: build/build.ninja
	@$(MAKE) --no-print-directory deps
	$(CMAKE) --build build

demo: build
	build/forge -C examples/tiny build
	build/forge -C examples/tiny run -- env OMP_NUM_THREADS=1 python transformer.py

# The GUI's browser test drives Debian's chromium with playwright-core (gui/);
# without it (offline), that one test is skipped, visibly.
gui/node_modules/.ready: gui/package-lock.json
	cd gui && npm ci --no-audit --no-fund --loglevel=error || echo "gui: npm ci failed; the browser test will be skipped"
	@[ -d gui/node_modules/playwright-core ] && touch $@ || true

test: build gui/node_modules/.ready
	$(VENV)/bin/ctest --test-dir build --output-on-failure -j2

# No torch, daemons, browser or GPU: under a minute of tests on a 2-core machine.
check: build
	$(VENV)/bin/ctest --test-dir build --output-on-failure -j2 -L '^unit$$'

test-%: build gui/node_modules/.ready
	$(VENV)/bin/ctest --test-dir build --output-on-failure -j2 -L '^$*$$'

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf build
