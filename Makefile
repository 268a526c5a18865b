# gpufleet.nodeprep — developer entry points.  Everything runs from the virtualenv at .venv/.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT        := $(abspath .)
# The Python of .venv/: ansible-core 2.21 needs 3.12 or newer on the controller, and Debian 12's python3 is 3.11, so it
# is pyenv's 3.13 (part of the CI machine's image), else pyenv's 3.12, else a python3.13/python3.12 on PATH.
# `make PYTHON=/path/to/python3.12 ...` picks another one. docs/development.md says why 2.21 on 3.13.
PYENV_ROOT  ?= $(HOME)/.pyenv
PYTHON      ?= $(firstword $(wildcard $(PYENV_ROOT)/versions/3.13*/bin/python3) \
                 $(wildcard $(PYENV_ROOT)/versions/3.12*/bin/python3) \
                 $(shell command -v python3.13 python3.12 2>/dev/null))
# ansible-core 2.20's venv: Python 3.12 (pyenv's), else the same Python as .venv/.
PYTHON_3_12 ?= $(firstword $(wildcard $(PYENV_ROOT)/versions/3.12*/bin/python3) $(shell command -v python3.12 2>/dev/null) \
                 $(PYTHON))
VENV        := $(ROOT)/.venv
PY          := $(VENV)/bin/python
BIN         := $(VENV)/bin
TMP         := $(ROOT)/.tmp
COLL_ROOT   := $(TMP)/collections
COLL_LINK   := $(COLL_ROOT)/ansible_collections/gpufleet/nodeprep
BUNDLED     := $(TMP)/bundled-collections
SITE_PKGS    = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# Our collection first, then the collections bundled in the `ansible` package (community.general, ansible.posix).
export ANSIBLE_COLLECTIONS_PATH = $(COLL_ROOT):$(SITE_PKGS)
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH = false
export ANSIBLE_NOCOLOR = 1
SANITY_ROOT := $(TMP)/sanity/ansible_collections/gpufleet/nodeprep
SANITY_PY   ?= $(shell $(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
VERSION      = $(shell $(PY) -c 'import yaml; print(yaml.safe_load(open("galaxy.yml"))["version"])')
PY36_PATHS  := plugins/modules plugins/module_utils
# Python 3.6 (EL8's platform-python) for `make py36-units`: pyenv's.
PYTHON_3_6  ?= $(firstword $(wildcard $(PYENV_ROOT)/versions/3.6*/bin/python3) $(shell command -v python3.6 2>/dev/null))
PY36_VENV   := $(TMP)/py36
# ansible-core releases checked besides the venv's own (2.21): each in its own venv .tmp/core-<x.y>, pinned by
# requirements/ansible-core-<x.y>.txt. 2.16 to 2.19 run on Debian 12's python3 (3.11, a controller Python of each);
# 2.20 needs Python >= 3.12 on the controller: $(PYTHON_3_12).
CORE_MATRIX := 2.16 2.17 2.18 2.19 2.20
core_python  = $(if $(filter 2.16 2.17 2.18 2.19,$(1)),python3,$(PYTHON_3_12))
TARBALL      = $(TMP)/dist/gpufleet-nodeprep-$(VERSION).tar.gz


.PHONY: deps help venv collection-link test units units-ansible-test sanity sanity-copy sanity-matrix units-matrix lint py36 py36-units security \
        build docs-rst docs-rst-check settings-gen settings-check importer docs-lint docsite ee changelog-lint molecule slurm-fleet demo report-screenshots bench bench-scale bench-report ahead clean

deps: ## Install the Debian packages the gates and the simulated fleet need (root)
	bash .ci/install-deps.sh

help: ## List the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | sed -e 's/:.*## /\t/' | expand -t 20

$(VENV)/.stamp: requirements/dev.txt requirements/controller.txt
	@[ -n "$(PYTHON)" ] || { echo "make venv: no Python 3.12 or newer found (looked for $(PYENV_ROOT)/versions/3.13*," \
	  "3.12*, python3.13 and python3.12 on PATH); ansible-core 2.21 needs one: install it (pyenv install 3.13)" \
	  "or name it: make PYTHON=/path/to/python3.12" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 12))' || { echo "make venv: $(PYTHON) is older than" \
	  "3.12; ansible-core 2.21 needs 3.12 or newer" >&2; exit 1; }
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/pip install -q --disable-pip-version-check -r requirements/dev.txt
	touch $@

venv: $(VENV)/.stamp ## Create .venv/ with everything the gates need

collection-link: venv
	@mkdir -p $(dir $(COLL_LINK))
	@if [ "$$(readlink $(COLL_LINK) || true)" != "$(ROOT)" ]; then rm -rf $(COLL_LINK); ln -s $(ROOT) $(COLL_LINK); fi
	@# The `ansible` package's collections under a path that does not name the venv's Python (molecule.yml uses it).
	@mkdir -p $(BUNDLED)
	@ln -sfn $(SITE_PKGS)/ansible_collections $(BUNDLED)/ansible_collections

# deps first: on a fresh Debian 12 machine (root) `make test` alone installs python3-venv, debootstrap, ... itself.
test: deps settings-check units units-ansible-test units-matrix py36 py36-units security sanity sanity-matrix lint docs-rst-check build importer docs-lint docsite ee changelog-lint \
      molecule slurm-fleet ## Run every gate (what CI runs)

units: collection-link ## pytest unit tests (tests/unit mirrors plugins/)
	$(BIN)/pytest -q -p no:cacheprovider

py36: venv ## Modules and module_utils must run on Python 3.6 (EL8 platform-python)
	$(BIN)/vermin -t=3.6- --no-tips --violations --eval-annotations --backport argparse $(PY36_PATHS)

$(PY36_VENV)/.stamp: requirements/py36-units.txt $(TMP)/core-2.16/.stamp
	@[ -n "$(PYTHON_3_6)" ] || { echo "make py36-units: no Python 3.6 found ($(PYENV_ROOT)/versions/3.6*, python3.6);" \
	  "install it (pyenv install 3.6.15) or name it: make PYTHON_3_6=/path/to/python3.6" >&2; exit 1; }
	rm -rf $(PY36_VENV)
	$(PYTHON_3_6) -m venv $(PY36_VENV)
	$(PY36_VENV)/bin/pip install -q --disable-pip-version-check pip==21.3.1
	$(PY36_VENV)/bin/pip install -q --disable-pip-version-check --only-binary=:all: -r $<
	@# ansible.module_utils of ansible-core 2.16 alone (as ansible-test units gives module tests), not its controller
	mkdir -p $(PY36_VENV)/ansible-lib/ansible && : > $(PY36_VENV)/ansible-lib/ansible/__init__.py
	cp -r $$($(TMP)/core-2.16/bin/python -c 'import os, ansible.module_utils as m; print(os.path.dirname(m.__file__))') \
	  $(PY36_VENV)/ansible-lib/ansible/module_utils
	touch $@

py36-units: $(PY36_VENV)/.stamp ## The module and module_utils unit tests on Python 3.6 (ansible-core 2.16's module_utils)
	@# The tests that run `ansible localhost -m ...` use ansible-core 2.16's command line, the module on Python 3.6.
	PYTHONPATH=$(PY36_VENV)/ansible-lib NODEPREP_TEST_ANSIBLE_BIN=$(TMP)/core-2.16/bin \
	  $(PY36_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/unit/plugins/modules tests/unit/plugins/module_utils

security: venv ## bandit on plugins/: clean, or each finding justified inline
	$(BIN)/bandit -q -r plugins

sanity-copy: venv
	@# No ignore file may exist: every sanity finding is fixed, not ignored.
	@if ls tests/sanity/ignore-*.txt >/dev/null 2>&1; then echo "tests/sanity/ignore-*.txt must not exist"; exit 1; fi
	rm -rf $(TMP)/sanity && mkdir -p $(SANITY_ROOT)
	git ls-files -co --exclude-standard -z | rsync -a --from0 --files-from=- ./ $(SANITY_ROOT)/
	cd $(SANITY_ROOT) && git init -q && git add -A && git -c user.name=ci -c user.email=ci@localhost commit -qm sanity

sanity: sanity-copy ## ansible-test sanity (every test) on a copy laid out as ansible_collections/gpufleet/nodeprep
	bash .ci/get-pip-standin.sh $(PY) $(BIN)/pip
	cd $(SANITY_ROOT) && $(BIN)/ansible-test sanity --color no --python $(SANITY_PY) --requirements

$(TMP)/core-%/.stamp: requirements/ansible-core-%.txt
	rm -rf $(TMP)/core-$*
	$(call core_python,$*) -m venv $(TMP)/core-$*
	$(TMP)/core-$*/bin/pip install -q --disable-pip-version-check -r $<
	touch $@

# Interpreters for the compile test: PATH without pyenv's shims (a shim for a version pyenv does not enable exits 127,
# which ansible-test takes for a broken interpreter), plus every pyenv version when there are some.
MATRIX_PATH ?= $(subst $(eval) ,:,$(strip $(wildcard $(HOME)/.pyenv/versions/*/bin) \
                 $(filter-out %/shims,$(subst :, ,$(PATH)))))

sanity-matrix: sanity-copy $(foreach v,$(CORE_MATRIX),$(TMP)/core-$(v)/.stamp) ## ansible-test compile (every Python found) and import on ansible-core 2.16 to 2.20
	@set -e; for v in $(CORE_MATRIX); do \
	  bash .ci/get-pip-standin.sh $(TMP)/core-$$v/bin/python $(BIN)/pip; \
	  py=$$($(TMP)/core-$$v/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	  echo "== ansible-core $$v: ansible-test sanity --test compile, on every Python found"; \
	  ( cd $(SANITY_ROOT) && PATH=$(MATRIX_PATH) $(TMP)/core-$$v/bin/ansible-test sanity --color no --test compile ); \
	  echo "== ansible-core $$v: ansible-test sanity --test import --python $$py (its venv's)"; \
	  ( cd $(SANITY_ROOT) && $(TMP)/core-$$v/bin/ansible-test sanity --color no --requirements --test import \
	      --python $$py ); \
	done

units-ansible-test: sanity-copy ## the plugin unit tests (tests/unit/plugins) under ansible-test units (the harness Ansible's own CI uses)
	bash .ci/get-pip-standin.sh $(PY) $(BIN)/pip
	cd $(SANITY_ROOT) && $(BIN)/ansible-test units --color no --python $(SANITY_PY) --requirements tests/unit/plugins/

# ansible-core releases whose ansible-test units also run tests/unit/plugins (besides .venv's 2.21).
UNITS_MATRIX := 2.20

units-matrix: sanity-copy $(foreach v,$(UNITS_MATRIX),$(TMP)/core-$(v)/.stamp) ## ansible-test units of tests/unit/plugins on ansible-core 2.20
	@set -e; for v in $(UNITS_MATRIX); do \
	  bash .ci/get-pip-standin.sh $(TMP)/core-$$v/bin/python $(BIN)/pip; \
	  py=$$($(TMP)/core-$$v/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	  echo "== ansible-core $$v: ansible-test units --python $$py tests/unit/plugins/"; \
	  ( cd $(SANITY_ROOT) && $(TMP)/core-$$v/bin/ansible-test units --color no --python $$py --requirements \
	      tests/unit/plugins/ ); \
	done

# Ansible ahead: the next ansible-core (a release candidate now) and the next controller Python, NOT a gate: `make test`
# (and so CI) does not run it; `make ahead` fails only itself. Python 3.14 where one is installed (pyenv's, or
# python3.14 on PATH); else the summary says it was skipped and why.
AHEAD_CORE  := 2.22
PYTHON_3_14 ?= $(firstword $(wildcard $(PYENV_ROOT)/versions/3.14*/bin/python3) $(shell command -v python3.14 2>/dev/null))

ahead: sanity-copy ## Not a gate: ansible-test sanity and units on ansible-core 2.22 (rc) with Python 3.13, and 3.14 if installed
	bash .ci/ahead.sh $(AHEAD_CORE) $(SANITY_ROOT) $(BIN)/pip $(PYTHON) \
	  $(if $(PYTHON_3_14),$(PYTHON_3_14),"missing:Python 3.14: none installed (looked for $(PYENV_ROOT)/versions/3.14* and python3.14 on PATH)")

lint: collection-link ## ansible-lint (production profile) on roles and playbooks
	$(BIN)/ansible-lint --profile production

settings-gen: collection-link ## Write each role's argument_specs options, defaults/main.yml and README variable table from its SETTINGS (then docs-rst)
	PYTHONPATH=$(COLL_ROOT) $(PY) .ci/settings_gen.py
	$(PY) .ci/docs_md2rst.py

settings-check: collection-link ## The roles' argument_specs options, defaults and README tables as committed are what their SETTINGS generate
	PYTHONPATH=$(COLL_ROOT) $(PY) .ci/settings_gen.py --check

docs-rst: venv ## Regenerate docs/docsite/rst/*.rst (the docsite's guides, committed) from docs/*.md
	$(PY) .ci/docs_md2rst.py

docs-rst-check: venv ## docs/docsite/rst/*.rst as committed are what docs/*.md generates (a plain `ansible-galaxy collection build` ships them)
	$(PY) .ci/docs_md2rst.py --check

build: collection-link docs-rst-check ## Build the collection, install the tarball, render every module/role with ansible-doc
	rm -rf $(TMP)/dist $(TMP)/install
	$(BIN)/ansible-galaxy collection build --force --output-path $(TMP)/dist
	@# The bench (its replay connection plugin and callbacks) and the EE definition never ship (galaxy.yml build_ignore).
	@if tar tzf $(TARBALL) | grep -E '^(bench/|execution-environment\.yml$$|\.tmp/)'; then \
	  echo "build: the files above must not be in the tarball (galaxy.yml build_ignore)"; exit 1; fi
	ANSIBLE_COLLECTIONS_PATH=$(TMP)/install $(BIN)/ansible-galaxy collection install --no-deps --force -p $(TMP)/install \
	  $(TARBALL)
	ANSIBLE_COLLECTIONS_PATH=$(TMP)/install:$(SITE_PKGS) $(PY) tests/docs_check.py $(TMP)/install/ansible_collections/gpufleet/nodeprep

importer: build ## galaxy-importer on the tarball (container steps off): no error, no warning but the explained ones
	rm -rf $(TMP)/importer && mkdir -p $(TMP)/importer
	cd $(TMP)/importer && PATH=$(BIN):$$PATH GALAXY_IMPORTER_CONFIG=$(ROOT)/.ci/galaxy-importer.cfg \
	  $(PY) -m galaxy_importer.main $(TARBALL) > importer.log 2>&1 || { cat importer.log; exit 1; }
	$(PY) .ci/importer_check.py $(TMP)/importer/importer.log .ci/importer-allowed-warnings.txt

docs-lint: collection-link docs-rst-check ## antsibull-docs lint-collection-docs --plugin-docs (markup, links, extra docs)
	PATH=$(BIN):$$PATH $(BIN)/antsibull-docs lint-collection-docs --plugin-docs $(COLL_LINK)

docsite: collection-link docs-rst-check ## Sphinx docsite (antsibull-docs sphinx-init): no warning but unreachable intersphinx
	rm -rf $(TMP)/docsite && mkdir -m 700 -p $(TMP)/docsite
	PATH=$(BIN):$$PATH $(BIN)/antsibull-docs sphinx-init --use-current --dest-dir $(TMP)/docsite gpufleet.nodeprep
	chmod og-w $(TMP)/docsite/rst
	cd $(TMP)/docsite && PATH=$(BIN):$$PATH $(BIN)/antsibull-docs --config-file antsibull-docs.cfg collection \
	  --cleanup everything --use-current --dest-dir rst gpufleet.nodeprep
	@# antsibull-docs copies the guides' text, not their pictures: the guides' images go beside them.
	mkdir -p $(TMP)/docsite/rst/collections/gpufleet/nodeprep/docsite/images
	cp docs/images/*.png $(TMP)/docsite/rst/collections/gpufleet/nodeprep/docsite/images/
	cd $(TMP)/docsite && PATH=$(BIN):$$PATH $(BIN)/sphinx-build -M html rst build -c . -q -w warnings.log --keep-going
	$(PY) .ci/docsite_check.py $(TMP)/docsite/warnings.log

ee: build ## execution-environment.yml: ansible-builder create (the build context); the context's introspection of the tarball
	rm -rf $(TMP)/ee && mkdir -p $(TMP)/ee
	$(BIN)/ansible-builder create --file execution-environment.yml --context $(TMP)/ee/context \
	  --output-filename Containerfile
	@test -s $(TMP)/ee/context/Containerfile
	@test -s $(TMP)/ee/context/_build/collection/$(notdir $(TARBALL)) || { echo "ee: $(notdir $(TARBALL)) is not in" \
	  "the build context ($(TMP)/ee/context/_build/collection/)"; exit 1; }
	@grep -q '^RUN ansible-galaxy collection install .* collection/gpufleet-nodeprep-\*\.tar\.gz$$' \
	  $(TMP)/ee/context/Containerfile || { echo "ee: the Containerfile does not install the collection's tarball"; exit 1; }
	@# The introspection the image's builder stage runs (the context's own script), on the installed tarball: it must
	@# find the ssh client in meta/execution-environment.yml.
	$(PY) $(TMP)/ee/context/_build/scripts/introspect.py introspect --sanitize --write-pip $(TMP)/ee/pip.txt \
	  --write-bindep $(TMP)/ee/bindep.txt $(TMP)/install > $(TMP)/ee/introspect.log
	@grep -q '^openssh-client' $(TMP)/ee/bindep.txt || { echo "introspect: openssh-client missing"; exit 1; }
	@echo "ok  ee: ansible-builder create ($(TMP)/ee/context), introspect: $$(grep -v '^#' $(TMP)/ee/bindep.txt | tr '\n' ' ')"

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

report-screenshots: venv ## Readiness report at 4 and 500 nodes: HTML size per host, headless Chromium PNGs in docs/images/
	@command -v chromium >/dev/null || [ -n "$${CHROMIUM:-}" ] || { echo "make report-screenshots: no chromium;" \
	  "install Debian's package (apt-get install chromium) or set CHROMIUM=/path/to/chromium" >&2; exit 1; }
	$(PY) tests/report_screenshots.py $(TMP)/report-screenshots docs/images

bench: deps collection-link ## Benchmarks: the parser, then the simulated fleet (root; BENCH_SIZES, BENCH_REPEATS: docs/performance.md)
	$(PY) bench/bench_nvsmi.py || echo "bench: the parser missed its goal (see above); going on with the fleet"
	$(PY) bench/fleet_bench.py

# Not part of `make test`: a measurement (about 20-30 minutes on 2 cores), not a gate. BENCH_RECORDING=<folder> replays
# a recording made before (no fleet, no root needed for that part).
bench-scale: deps collection-link ## The controller at 100, 250 and 1,000 hosts: record on the fleet, replay (root; docs/performance.md)
	$(PY) bench/scale_bench.py

# Not part of `make test`: the readiness report built for BENCH_REPORT_HOSTS (default 10,000) synthetic hosts.
bench-report: collection-link ## The readiness report for 10,000 synthetic hosts: CPU, wall, memory (docs/performance.md)
	$(PY) bench/report_bench.py

clean: ## Remove build outputs (keeps .venv/)
	rm -rf $(TMP) .pytest_cache
