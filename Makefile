# gpufleet.nodeprep — developer entry points.  Everything runs from the virtualenv at .venv/.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT        := $(abspath .)
VENV        := $(ROOT)/.venv
PY          := $(VENV)/bin/python
BIN         := $(VENV)/bin
TMP         := $(ROOT)/.tmp
COLL_ROOT   := $(TMP)/collections
COLL_LINK   := $(COLL_ROOT)/ansible_collections/gpufleet/nodeprep
SITE_PKGS    = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# Our collection first, then the collections bundled in the `ansible` package (community.general, ansible.posix).
export ANSIBLE_COLLECTIONS_PATH = $(COLL_ROOT):$(SITE_PKGS)
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH = false
export ANSIBLE_NOCOLOR = 1
SANITY_ROOT := $(TMP)/sanity/ansible_collections/gpufleet/nodeprep
SANITY_PY   ?= $(shell $(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
PIP_VERSION ?= $(shell $(PY) -c 'import re,ansible_test._internal.python_requirements as r, inspect; print(re.search(r"pip=.([0-9.]+)", inspect.getsource(r.get_venv_packages)).group(1))' 2>/dev/null)
VERSION      = $(shell $(PY) -c 'import yaml; print(yaml.safe_load(open("galaxy.yml"))["version"])')
PY36_PATHS  := plugins/modules plugins/module_utils


.PHONY: deps help venv collection-link test units sanity lint py36 security build docs-check changelog-lint molecule \
        demo bench clean

deps: ## Install the Debian packages the gates and the simulated fleet need (root)
	bash .ci/install-deps.sh

help: ## List the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | sed -e 's/:.*## /\t/' | expand -t 20

$(VENV)/.stamp: requirements/dev.txt requirements/controller.txt
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/pip install -q --disable-pip-version-check -r requirements/dev.txt
	touch $@

venv: $(VENV)/.stamp ## Create .venv/ with everything the gates need

collection-link: venv
	@mkdir -p $(dir $(COLL_LINK))
	@if [ "$$(readlink $(COLL_LINK) || true)" != "$(ROOT)" ]; then rm -rf $(COLL_LINK); ln -s $(ROOT) $(COLL_LINK); fi

test: units py36 security sanity lint build changelog-lint molecule ## Run every gate (what CI runs)

units: collection-link ## pytest unit tests (tests/unit mirrors plugins/)
	$(BIN)/pytest -q -p no:cacheprovider

py36: venv ## Modules and module_utils must run on Python 3.6 (EL8 platform-python)
	$(BIN)/vermin -t=3.6- --no-tips --violations --eval-annotations --backport argparse $(PY36_PATHS)

security: venv ## bandit on plugins/: clean, or each finding justified inline
	$(BIN)/bandit -q -r plugins

sanity: venv ## ansible-test sanity on a copy laid out as ansible_collections/gpufleet/nodeprep
	@test -z "$$(cat tests/sanity/ignore-*.txt)" || { echo "tests/sanity/ignore-*.txt must stay empty"; exit 1; }
	@if [ ! -f ~/.ansible/test/cache/get_pip_$(subst .,_,$(PIP_VERSION)).py ]; then \
	  mkdir -p ~/.ansible/test/cache && \
	  $(BIN)/pip download -q --disable-pip-version-check --no-deps --only-binary=:all: -d ~/.ansible/test/cache pip==$(PIP_VERSION) && \
	  cp .ci/get_pip_standin.py ~/.ansible/test/cache/get_pip_$(subst .,_,$(PIP_VERSION)).py; fi
	rm -rf $(TMP)/sanity && mkdir -p $(SANITY_ROOT)
	git ls-files -co --exclude-standard -z | rsync -a --from0 --files-from=- ./ $(SANITY_ROOT)/
	cd $(SANITY_ROOT) && git init -q && git add -A && \
	  git -c user.name=ci -c user.email=ci@localhost commit -qm sanity && \
	  $(BIN)/ansible-test sanity --color no --python $(SANITY_PY) --requirements

lint: collection-link ## ansible-lint (production profile) on roles and playbooks
	$(BIN)/ansible-lint --profile production

build: collection-link ## Build the collection, install the tarball, render every module/role with ansible-doc
	rm -rf $(TMP)/dist $(TMP)/install
	$(BIN)/ansible-galaxy collection build --force --output-path $(TMP)/dist
	ANSIBLE_COLLECTIONS_PATH=$(TMP)/install $(BIN)/ansible-galaxy collection install --no-deps --force -p $(TMP)/install \
	  $(TMP)/dist/gpufleet-nodeprep-$(VERSION).tar.gz
	ANSIBLE_COLLECTIONS_PATH=$(TMP)/install:$(SITE_PKGS) $(PY) tests/docs_check.py $(TMP)/install/ansible_collections/gpufleet/nodeprep

changelog-lint: venv ## antsibull-changelog lint (fragments well-formed)
	$(BIN)/antsibull-changelog lint

molecule: collection-link ## Molecule scenarios on the simulated fleet (needs root)
	@# molecule links .testbed/inventory.yml before create writes it: start from an inventory with no node.
	@# A run that was killed leaves molecule's state saying the fleet exists (create would be skipped): destroy first.
	@mkdir -p .testbed && { [ -s .testbed/inventory.yml ] || printf 'all:\n  hosts: {}\n' > .testbed/inventory.yml; }
	PATH=$(BIN):$$PATH $(BIN)/molecule destroy
	@mkdir -p .testbed && { [ -s .testbed/inventory.yml ] || printf 'all:\n  hosts: {}\n' > .testbed/inventory.yml; }
	PATH=$(BIN):$$PATH $(BIN)/molecule test

-include tests/testbed/testbed.mk

demo: deps collection-link ## The main job on a simulated fleet: up, converge, converge again (changed=0), readiness
	bash tests/testbed/demo.sh

bench: deps collection-link ## Benchmarks: the parser, then the simulated fleet (root; BENCH_SIZES, BENCH_REPEATS: docs/performance.md)
	$(PY) bench/bench_nvsmi.py || echo "bench: the parser missed its goal (see above); going on with the fleet"
	$(PY) bench/fleet_bench.py

clean: ## Remove build outputs (keeps .venv/)
	rm -rf $(TMP) .pytest_cache
