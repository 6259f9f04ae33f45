# Two commands do all the set-up on a fresh machine:
#   make demo   runs the main job (rolling maintenance) against the mock IMDS
#   make test   builds .venv from pinned requirements and runs every suite, network-isolated
# Run one suite with: make test SUITES="units sanity"

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
SUITES ?=

.PHONY: help venv test demo build bench clean docs

help:
	@echo "make demo   - run rolling_maintenance against a mock fleet of three VMs"
	@echo "make test   - every suite (sanity, units, integration, molecule, lint, changelog, docs)"
	@echo "make docs   - regenerate docs/reference from the plugins' documentation"
	@echo "make bench  - the benchmarks under bench/ (prints figures)"
	@echo "make build  - ansible-galaxy collection build into build/"

$(VENV)/.installed: tests/requirements.txt tests/constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt -c tests/constraints.txt
	touch $@

venv: $(VENV)/.installed

test: venv
	tests/harness/prepare
	tests/harness/loopback-only $(VPY) tests/harness/run_suites.py $(SUITES)

demo: venv
	tests/harness/loopback-only $(VPY) extensions/demo/run_demo.py

docs: venv
	$(VPY) docs/generate_reference.py --write

bench: venv
	tests/harness/loopback-only bash bench/run_all.sh $(VPY)

build: venv
	mkdir -p build
	$(VENV)/bin/ansible-galaxy collection build --force --output-path build .

clean:
	rm -rf build tests/output .pytest_cache
