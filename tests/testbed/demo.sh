#!/usr/bin/env bash
# `make demo`: the whole job on the simulated fleet.
#   1. bring the fleet up (fresh nodes: distro kernel, no driver, nouveau loaded, default limits and /dev/shm)
#   2. readiness before: what is wrong on every node
#   3. site.yml: converge (reboots where the driver needs one, since the testbed allows it)
#   4. site.yml again: must report changed=0 on every host
#   5. readiness after: must pass on every host; the report is in readiness-report/
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=.venv/bin
INVENTORY=.testbed/inventory.yml
LOGS=.tmp/demo
mkdir -p "$LOGS"

say() { printf '\n==> %s\n' "$*"; }

recap_all_clean() {
  # Every host of the recap in $1 has changed=0, unreachable=0 and failed=0.
  local log=$1 hosts bad
  hosts=$(grep -cE '^\S+\s+: ok=' "$log" || true)
  bad=$(grep -E '^\S+\s+: ok=' "$log" | grep -vcE 'changed=0 +unreachable=0 +failed=0' || true)
  [ "$hosts" -gt 0 ] && [ "$bad" -eq 0 ]
}

say "Bringing up the simulated fleet (${NODES:-4} nodes)"
"$VENV/python" tests/testbed/testbed.py up --nodes "${NODES:-4}"

say "Readiness of the fresh fleet (expected: not ready)"
"$VENV/ansible-playbook" -i "$INVENTORY" playbooks/readiness.yml -e nodeprep_readiness_fail=false \
  -e nodeprep_readiness_report_dir=.tmp/demo/readiness-before | tail -n 12

say "Converging the fleet with playbooks/site.yml"
"$VENV/ansible-playbook" -i "$INVENTORY" playbooks/site.yml | tee "$LOGS/site-1.log" | grep -E '^(PLAY|TASK \[.*reboot|\S+ +: ok=)' || true
grep -qE 'failed=[1-9]|unreachable=[1-9]' "$LOGS/site-1.log" && { echo "demo: the first run failed, see $LOGS/site-1.log"; exit 1; }

say "Running site.yml again: nothing may change"
"$VENV/ansible-playbook" -i "$INVENTORY" playbooks/site.yml > "$LOGS/site-2.log"
grep -A20 'PLAY RECAP' "$LOGS/site-2.log"
recap_all_clean "$LOGS/site-2.log" || { echo "demo: the second run changed something, see $LOGS/site-2.log"; exit 1; }

say "Readiness of the converged fleet"
"$VENV/ansible-playbook" -i "$INVENTORY" playbooks/readiness.yml | tee "$LOGS/readiness.log" | \
  sed -n '/Print the readiness matrix/,/^$/p'

cat <<EOT

The fleet is up and ready. Look around:
  python3 tests/testbed/testbed.py status            # nodes and their addresses
  python3 tests/testbed/testbed.py ssh el9-b200-01   # a shell on a node; then: nvidia-smi, nvidia-smi -q -x
  open readiness-report/report.html                  # the per-host readiness matrix (also report.json, junit.xml)
  make testbed-fault NODE=el9-b200-01 FAULT=gpu-missing && ansible-playbook -i $INVENTORY playbooks/readiness.yml
Take it down (no namespace, mount or process is left):
  make testbed-down
EOT
