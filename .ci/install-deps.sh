#!/usr/bin/env bash
# Install the Debian packages the gates and the simulated fleet need (idempotent; root).
# Used by `make deps`, which `make test` (and so .ci/run) and `make demo` run first.
set -euo pipefail

PACKAGES=(
  python3 python3-venv python3-pip make git rsync ca-certificates
  # simulated fleet: node roots, boot, network
  debootstrap systemd-container iproute2 openssh-client ethtool
  # EL-like nodes: dnf/rpm on Debian, local repositories
  dnf python3-dnf rpm createrepo-c
  # signing the local repositories (gpg, gpg-agent; rpmsign comes with rpm)
  gnupg
  # apt-side local repositories
  dpkg-dev
  # ansible-test sanity runs shellcheck on shell scripts
  shellcheck
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
