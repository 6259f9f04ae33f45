# Two commands do all the set-up on a fresh machine:
#   make demo   runs the main job (rolling maintenance) against the mock IMDS
#   make test   builds .venv from pinned requirements and runs every suite, network-isolated
# Run one suite with: make test SUITES="units sanity"

# The newest supported ansible-core (2.21) needs Python 3.12+: .venv, where every tool runs, is built
# with pyenv's 3.13 or Debian's python3.13 (tests/harness/find-python says where it looked).
# The oldest core (2.19) runs on the system's python3 (3.11 on Debian 12) in an environment of its own.
NEWEST_PYTHON ?= $(shell tests/harness/find-python 3.13 2>/dev/null)
PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
OLDEST := .cache/venv-oldest-core
SUITES ?=
JOBS   ?= 3

.PHONY: help venv venvs system-deps test demo build bench clean docs lint

help:
	@echo "make demo   - run rolling_maintenance against a mock fleet of three VMs"
	@echo "make test   - every suite (sanity, units, integration on the oldest and newest core; molecule, lint, changelog, docs, docsite, ee)"
	@echo "make docs   - regenerate the playbook and event source pages in docs/docsite/rst/reference"
	@echo "make lint   - ansible-lint as from a plain checkout (production profile, from .ansible-lint)"
	@echo "make bench  - the benchmarks under bench/ (prints figures)"
	@echo "make build  - ansible-galaxy collection build into build/ (the ansible-galaxy on PATH; no development venv)"

$(VENV)/.installed: tests/requirements.txt tests/constraints.txt tests/unit/requirements.txt
	@[ -n "$(NEWEST_PYTHON)" ] || tests/harness/find-python 3.13
	$(NEWEST_PYTHON) -m venv --clear $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt -c tests/constraints.txt
	touch $@

$(OLDEST)/.installed: tests/harness/requirements-oldest-core.txt tests/unit/requirements.txt tests/constraints.txt
	$(PYTHON) -m venv --clear $(OLDEST)
	$(OLDEST)/bin/python -m pip install --quiet --disable-pip-version-check \
	  -r tests/harness/requirements-oldest-core.txt -c tests/harness/constraints-oldest-core.txt
	touch $@

venv: $(VENV)/.installed

venvs: $(VENV)/.installed $(OLDEST)/.installed

# What the machine lacks (podman, shellcheck, ...) is installed first, as root, or named with the
# command that would install it; then the environments, then the suites.
system-deps:
	tests/harness/system-deps $(SUITES)

# The two environments build side by side (pip is mostly one core each): 35 s instead of 61 s here.
test: system-deps
	$(MAKE) --no-print-directory -j 2 venvs
	tests/harness/prepare $(SUITES)
	tests/harness/loopback-only $(VPY) tests/harness/run_suites.py -j $(JOBS) $(SUITES)

demo: venv
	tests/harness/loopback-only $(VPY) extensions/demo/run_demo.py

docs: venv
	tests/harness/loopback-only $(VPY) docs/generate_reference.py --write

# As from a plain checkout: .ansible-lint holds the profile; ansible-lint installs this checkout into
# .ansible/collections itself (offline: false; the collection declares no dependencies).
lint: venv
	$(VENV)/bin/ansible-lint

bench: venv
	tests/harness/loopback-only bash bench/run_all.sh $(VPY)

# The tarball needs ansible-galaxy and nothing else: the one on PATH, else .venv's if it exists, else
# a small environment with ansible-core alone (never the full development .venv for a 300 KB file).
BUILD_VENV := .cache/venv-build
build:
	mkdir -p build
	galaxy=$$(command -v ansible-galaxy || true); \
	if [ -z "$$galaxy" ] && [ -x $(VENV)/bin/ansible-galaxy ]; then galaxy=$(VENV)/bin/ansible-galaxy; fi; \
	if [ -z "$$galaxy" ]; then $(MAKE) --no-print-directory $(BUILD_VENV)/.installed && galaxy=$(BUILD_VENV)/bin/ansible-galaxy; fi; \
	"$$galaxy" collection build --force --output-path build .

$(BUILD_VENV)/.installed:
	$(PYTHON) -m venv $(BUILD_VENV)
	$(BUILD_VENV)/bin/python -m pip install --quiet --disable-pip-version-check 'ansible-core>=2.19,<2.22'
	touch $@

clean:
	rm -rf build tests/output .pytest_cache
