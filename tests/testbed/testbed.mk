# Simulated fleet targets (tests/testbed). The top-level Makefile includes this file.
#   make testbed-up [NODES=4]            bring the fleet up, write .testbed/inventory.yml
#   make testbed-down                    stop it; no namespace, mount or process is left
#   make testbed-status
#   make testbed-selftest                 ethtool -K, signed repositories and key refusals on the running nodes
#   make testbed-fault NODE=<name> FAULT=<kind> [GPU=<index>] [VALUE=<v>]
#   make testbed-heal NODE=<name> [FAULT=<kind>]
# Needs root. Kinds: gpu-missing gpu-removed nvidia-smi-hang driver-unloaded xid retired-pages
# remapped-rows clocks-capped power-capped secure-boot shm-full node-down.

TESTBED_PYTHON ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
TESTBED := $(TESTBED_PYTHON) tests/testbed/testbed.py
NODES ?= 4

.PHONY: testbed-up testbed-down testbed-status testbed-fault testbed-heal testbed-selftest

testbed-up:
	$(TESTBED) up --nodes $(NODES)

testbed-down:
	$(TESTBED) down

testbed-status:
	$(TESTBED) status

testbed-fault:
	@test -n "$(NODE)" || { echo "usage: make testbed-fault NODE=<name> FAULT=<kind>"; exit 2; }
	@test -n "$(FAULT)" || { echo "usage: make testbed-fault NODE=<name> FAULT=<kind>"; exit 2; }
	$(TESTBED) fault $(NODE) $(FAULT) $(if $(GPU),--gpu $(GPU)) $(if $(VALUE),--value $(VALUE))

testbed-heal:
	@test -n "$(NODE)" || { echo "usage: make testbed-heal NODE=<name> [FAULT=<kind>]"; exit 2; }
	$(TESTBED) heal $(NODE) $(FAULT)

# Check the running nodes can do what a real root shell can (ethtool -K, signed repositories, key refusals).
testbed-selftest:
	$(TESTBED) selftest
