# Simulated fleet targets (tests/testbed). The top-level Makefile includes this file.
#   make testbed-up [NODES=4]            bring the fleet up, write .testbed/inventory.yml
#   make testbed-up SLURM=1 [KINDS=el9-b200,ubuntu2404-h200]
#                                        the same plus a Slurm head (slurmctld) and slurmd on every GPU node
#   make slurm-fleet                     a Slurm fleet of its own (prefix npsl): jobs, drain, reboots; then down
#   make rolling-fleet                   playbooks/rolling_upgrade.yml on a Slurm fleet of its own (prefix nprr); then down
#   make memlock-fleet                   memlock as a job sees it, on a Slurm fleet of its own (prefix npmf); then down
#   make imex-fleet                      an IMEX domain of three GB200 trays, fleet of its own (prefix npix); then down
#   make sliced-fleet                    site.yml and readiness.yml as AWX slices + the merge vs an unsliced run (prefix npsf)
#   make hung-fleet                      a hung node costs only its limits: wall times with and without one (prefix npsf)
#   make testbed-down                    stop it; no namespace, mount or process is left
#   make testbed-status
#   make testbed-selftest                 ethtool -K, signed repositories and key refusals on the running nodes
#   make testbed-fault NODE=<name> FAULT=<kind> [GPU=<index>] [VALUE=<v>]
#   make testbed-heal NODE=<name> [FAULT=<kind>]
# Needs root. Kinds: gpu-missing gpu-removed nvidia-smi-hang driver-unloaded xid retired-pages
# remapped-rows clocks-capped power-capped secure-boot shm-full node-down limits-site-file ssh-hang; issue 28:
# hw-slowdown pcie-downtrained nvlink-inactive rows-pending mig-enabled allreduce-slow; slow-boot; issue 30: imex-peer-down
# (tests/testbed/testbed.py FAULTS).
# TESTBED_SLURM_VERSION=24.11 (default, Debian 13's) or 22.05 (Debian 12's) picks the Slurm of a Slurm fleet.

TESTBED_PYTHON ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)
TESTBED := $(TESTBED_PYTHON) tests/testbed/testbed.py
NODES ?= 4
SLURM ?=
IMEX ?=
KINDS ?=

.PHONY: testbed-up testbed-down testbed-status testbed-fault testbed-heal testbed-selftest slurm-fleet rolling-fleet \
        memlock-fleet imex-fleet sliced-fleet hung-fleet

testbed-up:
	$(TESTBED) up --nodes $(NODES) $(if $(filter 1 yes true,$(SLURM)),--slurm) $(if $(filter 1 yes true,$(IMEX)),--imex) \
		$(if $(KINDS),--kinds $(KINDS))

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

# A real Slurm (Debian 13's 24.11; TESTBED_SLURM_VERSION=22.05: Debian 12's) on a fleet of its own (head + 2 GPU nodes; TESTBED_PREFIX npsl, TESTBED_SUBNET
# 10.236, .testbed-slurm): sbatch, squeue, drain/resume, reboots under ReturnToService 1 and 2; taken down at the end.
slurm-fleet:
	$(TESTBED_PYTHON) tests/testbed/slurm_fleet.py

# playbooks/rolling_upgrade.yml on a real Slurm fleet of its own (head + 2 GPU nodes; TESTBED_PREFIX nprr, TESTBED_SUBNET
# 10.239, .testbed-rolling; ROLLING_FLEET_PREFIX/SUBNET/DIR change them), always on fresh nodes (taken down first):
# check mode, typed settings and AWX-slice refusals, batches (50 %, 100 %, 2) and the min_available refusal, a busy
# node under skip and fail, an admin's drain, include_held (and its SlurmdTimeout refusal on 24.11), the lock, a
# killed run and its rerun under busy=wait with a Slurm reboot and a failed verification, the max_failed stop, a
# 150 s reboot under SlurmdTimeout=60 resumed by the run, a fleet on target, readiness's verdict in Slurm; taken down
# at the end. TESTBED_SLURM_VERSION=22.05 runs it on Debian 12's Slurm (default 24.11). Not part of `make test`
# (77 checks; measured 1036 s on 24.11 at a load of 3 to 7 and 1634 s on 22.05 at a load of 9 to 11, 2 cores shared
# with other jobs).
rolling-fleet: collection-link
	$(TESTBED_PYTHON) tests/testbed/rolling_fleet.py

# memlock as a job sees it, on a real Slurm fleet of its own (head + 2 GPU nodes; TESTBED_PREFIX npmf, TESTBED_SUBNET
# 10.241, .testbed-memlock; MEMLOCK_FLEET_PREFIX/SUBNET/DIR change them, MEMLOCK_FLEET_REUSE=1 keeps a fleet up): the
# memlock role and readiness against the fault limits-site-file, Slurm's default propagation and a slurmd held low,
# each compared with what an srun job really gets; taken down at the end. Not part of `make test` (which is near
# its 40-minute bound): measured 87 s with the layers cached, on 2 shared cores at a load of 4 to 7.
memlock-fleet: collection-link
	$(TESTBED_PYTHON) tests/testbed/memlock_fleet.py

# An NVIDIA IMEX domain (playbooks/imex.yml, readiness imex.domain) on a fleet of its own: three el9-gb200 trays
# (TESTBED_PREFIX npix, TESTBED_SUBNET 10.252, .testbed-imex; IMEX_FLEET_PREFIX/SUBNET/DIR change them), always fresh
# (taken down first): the driver and nvidia-imex, check mode exact, the same ordered node list on every tray, channel0
# made again after a reboot, the imex-peer-down fault named by readiness, healed; taken down at the end. Not part of
# `make test` (measured 400 s, under 7 minutes, on 2 cores shared with other jobs at a load of 10 to 12).
imex-fleet: collection-link
	$(TESTBED_PYTHON) tests/testbed/imex_fleet.py

# site.yml and readiness.yml as N = 2 and 3 slices the way AWX slices a job (ansible-runner, at the same time), each
# followed by the merge playbook, compared with an unsliced run on a fleet of its own (TESTBED_PREFIX npsf,
# TESTBED_SUBNET 10.237, .testbed-sliced; SLICED_FLEET_PREFIX/SUBNET/DIR/NODES change them, SLICED_FLEET_REUSE=1
# keeps the fleet up); taken down at the end. Not part of `make test`.
sliced-fleet: collection-link
	$(TESTBED_PYTHON) tests/testbed/sliced_fleet.py

# A hung node costs the run no more than its limits: no-op site.yml and readiness.yml timed with and without a hung
# node (fault ssh-hang), nvidia-smi hung (fault nvidia-smi-hang), and a node hung after its connection was made (the
# whole gather's limit); on the same fleet as sliced-fleet, taken down at the end. Not part of `make test`.
hung-fleet: collection-link
	$(TESTBED_PYTHON) tests/testbed/hung_fleet.py
