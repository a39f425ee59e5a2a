# optserve: `make serve` starts the service with the bundled models; `make test` runs the test suite.
# Both create or refresh .venv and install everything they need on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROTO_SRC := proto/optserve/v1/optserve.proto
PROTO_OUT := optserve/v1/optserve_pb2.py
APT_PACKAGES := clang-19 llvm-19 llvm-19-dev csmith libcsmith-dev postgresql

.PHONY: serve test lint proto system-deps bench clean image

serve: $(STAMP) $(PROTO_OUT)
	$(VENV)/bin/optserve serve

# One pytest process per test folder, TEST_JOBS of them at a time, longest first
# (optserve/testing/folders.py). The serve, clients, reliability and observability folders each start their
# own Ray Serve app, with settings the others cannot share (TLS, per-function lists, limits, token), on ports
# and in a Ray instance of their own, so folders can run side by side: TEST_JOBS=2 took the folders 1,026 s
# against 2,126 s in series on a shared machine (docs/structure_audit.md, W14). In series by default: on 2
# cores, tests/serve's checks of health latency and of a deadline failed beside another folder (a
# fresh-clone CI), so side by side is for machines with cores to spare.
TEST_DIRS := $(filter-out tests/data/,$(sort $(wildcard tests/*/)))
TEST_JOBS ?= 1

test: $(STAMP) $(PROTO_OUT) system-deps
	$(VENV)/bin/ruff check .
	$(PY) tests/contracts/lint_imports.py
	$(PY) -m optserve.testing.folders --jobs $(TEST_JOBS) $(TEST_DIRS)

# The tests that need no live Ray Serve app (marker `service`, tests/conftest.py), all folders in one pytest
# process: a few minutes, for a quick check while working. `make test` (all of them) stays the CI command.
.PHONY: test-fast
test-fast: $(STAMP) $(PROTO_OUT) system-deps
	$(PY) -m pytest -q -p no:cacheprovider -m "not service" $(TEST_DIRS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The virtual environment, refreshed whenever pyproject.toml or setup.py changes: everything (the service,
# the training wing and the test tools; a build machine that needs only optcc installs the base package).
# PyPI's torchvision/torchaudio/torchcodec do not match torch 2.13.0+cpu and break transformers: remove them.
$(STAMP): pyproject.toml setup.py
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (optserve needs Python 3.11)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e '.[serve,train,dev]'
	$(PY) -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
	touch $(STAMP)

# gRPC stubs are generated from proto/ by the build (setup.py; here for a changed .proto), never committed.
$(PROTO_OUT): $(PROTO_SRC) $(STAMP)
	$(PY) -m grpc_tools.protoc -Iproto --python_out=. --grpc_python_out=. --pyi_out=. $(PROTO_SRC)
proto: $(PROTO_OUT)

# clang-19 compiles the C programs the tests and the corpus use, csmith generates corpus programs, the tuning
# store's tests start a private PostgreSQL server (its binaries: initdb, pg_ctl), llvm-19-dev's headers build
# optcc's bitcode tap (clients/bitcode_tap.py; optional: without them units take two clang processes);
# install when missing.
system-deps:
	@if command -v clang-19 >/dev/null && command -v llvm-extract-19 >/dev/null && command -v csmith >/dev/null \
	  && { command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; }; then exit 0; fi; \
	echo "installing $(APT_PACKAGES) with apt-get"; \
	SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	$$SUDO apt-get install -y -q $(APT_PACKAGES) >/dev/null \
	  || { $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q $(APT_PACKAGES) >/dev/null; } \
	  || { echo "error: could not install $(APT_PACKAGES); install them (Debian: apt-get install $(APT_PACKAGES)) and retry"; exit 1; }

# The service image without a registry or docker daemon (as root): mmdebstrap base + buildah (serve/image/).
image:
	serve/image/build.sh

clean:
	rm -rf $(VENV) optserve/v1/*_pb2*.py optserve/v1/*_pb2*.pyi build *.egg-info
