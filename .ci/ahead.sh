#!/usr/bin/env bash
# `make ahead`: ansible-core 2.22 (requirements/ansible-core-2.22.txt) on the controller Pythons given, each in its own
# venv (.tmp/ahead-<core>-py<x.y>): every ansible-test sanity test and ansible-test units of tests/unit/plugins, on the
# copy `make sanity-copy` lays out. Not a gate: not part of `make test` (docs/development.md, "Ansible ahead").
# Prints one summary block; exits 1 when a run failed, 0 otherwise.
# Usage: ahead.sh CORE SANITY_ROOT PIP_TO_DOWNLOAD_WITH PYTHON... (a PYTHON that is "missing:<why>" is reported, not run)
set -uo pipefail
core=$1 sanity_root=$2 pip=$3
shift 3
here=$(cd "$(dirname "$0")/.." && pwd)
summary=() failed=0
for python in "$@"; do
  if [[ $python == missing:* ]]; then
    summary+=("SKIPPED  ${python#missing:}")
    continue
  fi
  ver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  venv=$here/.tmp/ahead-$core-py$ver
  req=$here/requirements/ansible-core-$core.txt
  if [ ! -f "$venv/.stamp" ] || [ "$req" -nt "$venv/.stamp" ]; then
    rm -rf "$venv"
    if ! { "$python" -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"; }; then
      summary+=("FAILED   ansible-core $core on Python $ver: could not install $req into $venv")
      failed=1
      continue
    fi
    touch "$venv/.stamp"
  fi
  got=$("$venv/bin/python" -c 'from ansible.release import __version__; print(__version__)')
  bash "$here/.ci/get-pip-standin.sh" "$venv/bin/python" "$pip"
  # A sanity test whose pinned requirements name a URL (2.22.0rc1's pylint: dill from a GitHub archive) cannot install
  # from the package index: it is skipped, and the summary says so with the requirement.
  skip=()
  reqdir=$("$venv/bin/python" -c 'import os, ansible_test; print(os.path.join(os.path.dirname(ansible_test.__file__), "_data", "requirements"))')
  for reqfile in "$reqdir"/sanity.*.txt; do
    url=$(grep -E '^[^#]*@ *https?://' "$reqfile" | head -n 1 | sed 's/#sha256=.*//')
    if [ -n "$url" ]; then
      test=$(basename "$reqfile" .txt); test=${test#sanity.}
      skip+=(--skip-test "$test")
      summary+=("SKIPPED  ansible-core $got, Python $ver: sanity test $test (its pinned requirement is not on the package index: $url)")
    fi
  done
  for what in sanity units; do
    echo "== ahead: ansible-core $got, Python $ver: ansible-test $what"
    if [ $what = sanity ]; then
      args=(sanity --color no --python "$ver" --requirements "${skip[@]}")
    else
      args=(units --color no --python "$ver" --requirements tests/unit/plugins/)
    fi
    log=$here/.tmp/ahead-$core-py$ver-$what.log
    start=$SECONDS
    (cd "$sanity_root" && "$venv/bin/ansible-test" "${args[@]}") > "$log" 2>&1
    rc=$?
    tail -n 25 "$log"
    if [ $rc -eq 0 ]; then
      summary+=("passed   ansible-core $got, Python $ver: ansible-test $what ($((SECONDS - start)) s)")
    else
      summary+=("FAILED   ansible-core $got, Python $ver: ansible-test $what, exit $rc ($((SECONDS - start)) s; $log)")
      failed=1
    fi
  done
done
echo
echo "================ ahead (ansible-core $core; NOT a gate: make test and CI do not run it) ================"
printf '  %s\n' "${summary[@]}"
echo "================================================================================================="
exit $failed
