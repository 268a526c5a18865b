# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""make hung-fleet: a hung node costs the run no more than its limits, measured on a converged fleet.

The same fleet as make sliced-fleet (TESTBED_PREFIX npsf, TESTBED_SUBNET 10.237, .testbed-sliced; the SLICED_FLEET_*
variables change them; SLICED_FLEET_REUSE=1 uses a fleet already up and leaves it up), converged by site.yml. Each run
connects cold (a control path directory of its own) unless said otherwise. For a no-op site.yml and for readiness.yml,
the wall time of:

  1. the fleet as it is (twice: the spread between the two is the machine's noise);
  2. one node hung (fault ssh-hang: every process frozen, its kernel still accepts TCP; sshd never sends a banner):
     the SSH connect limit (ansible_ssh_timeout, 10 s) - the node is unreachable, the others finish, and the run
     summary (site.yml) or the readiness report names the node and the limit;
  3. nvidia-smi hung on one node (fault nvidia-smi-hang) with nodeprep_command_timeout=20 and
     nodeprep_readiness_nvidia_timeout=20: the command limit (then KILL 5 s after TERM) - site.yml's summary names
     the node, the command and the limit; readiness's driver.loaded says nvidia-smi was killed after 20 s;
  4. the whole gather's limit (nodeprep_gather_timeout=30) on a node that hangs after its SSH connection was made: a
     run leaves its ssh master connections (ControlPersist 60 s, no ServerAliveInterval), the node freezes, site.yml
     runs again at once over those connections: only the task's timeout ends the wait, and the summary says so.

Checks that every run ended, that each faulty run took at most the slower baseline plus the limit (and the 5 s
between TERM and KILL for a command) plus a margin for the machine's noise (HUNG_FLEET_MARGIN, 15 s), and that the
summary and the report name the node and the limit. Writes .tmp/hung-fleet/results.json and prints the table. Heals
the faults and takes the fleet down in every case (unless SLICED_FLEET_REUSE=1). Run as root; not part of make test.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleetlib  # noqa: E402

# The fleet of make sliced-fleet; its lines start "sliced-fleet:", as they always have.
FLEET = fleetlib.ConvergedFleet('sliced-fleet', os.path.join(fleetlib.REPO, '.tmp', 'hung-fleet'))
WORK = FLEET.work
MARGIN = float(os.environ.get('HUNG_FLEET_MARGIN') or 15)
KILL_AFTER = 5
NO_ALIVE = '-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR'
ROWS = []
say, check, testbed = FLEET.say, FLEET.check, FLEET.testbed


def run(label, playbook, report_dir, *extra, **kw):
    os.makedirs(report_dir, exist_ok=True)
    args = ['-e', 'nodeprep_readiness_report_dir=' + report_dir, '-e', 'nodeprep_readiness_fail=false'] + list(extra)
    rc, text, seconds = FLEET.ansible_playbook(label, playbook, *args, control=kw.get('control'))
    say('{0}: rc {1}, {2:.1f} s'.format(label, rc, seconds))
    return rc, text, seconds


def load(path):
    with open(path) as f:
        return json.load(f)


def row(playbook, case, seconds, baseline, limit, detail):
    allowed = baseline + limit + MARGIN
    ROWS.append({'playbook': playbook, 'case': case, 'seconds': round(seconds, 1), 'baseline_max': round(baseline, 1),
                 'limit': limit, 'grew_by': round(seconds - baseline, 1), 'allowed': round(allowed, 1),
                 'detail': detail})
    check(seconds <= allowed, '{0} {1}: {2:.1f} s, at most the slower baseline {3:.1f} s + the limit {4} s '
          '(+ {5:.0f} s noise)'.format(playbook, case, seconds, baseline, limit, MARGIN))


def scenario():
    hosts = sorted(FLEET.hosts())
    hung = hosts[-1]
    small = ['-e', 'nodeprep_command_timeout=20', '-e', 'nodeprep_readiness_nvidia_timeout=20']
    for playbook in ('site.yml', 'readiness.yml'):
        name = playbook.split('.', maxsplit=1)[0]
        times = []
        for attempt in (1, 2):
            rc, text, seconds = run('{0}-baseline-{1}'.format(name, attempt), playbook,
                                    os.path.join(WORK, name, 'baseline'), *small)
            check(rc == 0, '{0}: the healthy fleet\'s run succeeds'.format(playbook), text[-1500:])
            times.append(seconds)
        baseline = max(times)
        ROWS.append({'playbook': playbook, 'case': 'baseline (2 runs)', 'seconds': [round(t, 1) for t in times]})

        # 2. the hung node: the SSH connect limit
        testbed('fault', hung, 'ssh-hang', check=True)
        try:
            folder = os.path.join(WORK, name, 'ssh-hang')
            rc, text, seconds = run('{0}-ssh-hang'.format(name), playbook, folder, *small)
        finally:
            testbed('heal', hung, 'ssh-hang', check=True)
        recap = fleetlib.recap(text)
        # site.yml: unreachable in the recap; readiness (ignore_unreachable, so that the report lists it): ignored
        key = 'unreachable' if playbook == 'site.yml' else 'ignored'
        check(recap.get(hung, {}).get(key) == 1 and all(
            recap.get(h, {}).get('unreachable') == 0 and recap.get(h, {}).get('failed') == 0
            for h in hosts if h != hung),
            '{0} ssh-hang: {1} {2} in the recap, every other node finished without failing'.format(
                playbook, hung, key), str(recap))
        detail = named(playbook, folder, hung, 'ssh_connect', 10)
        row(playbook, 'ssh-hang on {0}'.format(hung), seconds, baseline, 10, detail)

        # 3. nvidia-smi hangs: the command limit (20 s here), then KILL 5 s later at most
        testbed('fault', hung, 'nvidia-smi-hang', check=True)
        try:
            folder = os.path.join(WORK, name, 'nvidia-smi-hang')
            rc, text, seconds = run('{0}-nvidia-smi-hang'.format(name), playbook, folder, *small)
        finally:
            testbed('heal', hung, 'nvidia-smi-hang', check=True)
        detail = named(playbook, folder, hung, 'command', 20)
        row(playbook, 'nvidia-smi-hang on {0} (limit 20 s)'.format(hung), seconds, baseline, 20 + KILL_AFTER, detail)

    # 4. the whole gather's limit: a node that hangs after its connection was made
    control = '/tmp/{0}-hung-cp-{1}'.format(FLEET.prefix, os.getpid())
    os.makedirs(control, exist_ok=True)
    alive = ['-e', json.dumps({'ansible_ssh_common_args': NO_ALIVE})]
    try:
        rc, text, seconds = run('site-masters', 'site.yml', os.path.join(WORK, 'gather', 'masters'),
                                *(small + alive), control=control)
        start = time.time()
        rc, text, baseline = run('site-warm-baseline', 'site.yml', os.path.join(WORK, 'gather', 'warm'),
                                 *(small + alive), control=control)
        testbed('fault', hung, 'ssh-hang', check=True)
        try:
            folder = os.path.join(WORK, 'gather', 'hung')
            rc, text, seconds = run('site-gather-limit', 'site.yml', folder,
                                    *(small + alive + ['-e', 'nodeprep_gather_timeout=30']), control=control)
        finally:
            testbed('heal', hung, 'ssh-hang', check=True)
        say('warm runs within {0:.0f} s of the first (ControlPersist 60 s)'.format(time.time() - start))
        detail = named('site.yml', folder, hung, 'gather', 30)
        row('site.yml', 'hung after its connection (warm, gather limit 30 s) on {0}'.format(hung), seconds,
            baseline, 30, detail)
    finally:
        fleetlib.stop_masters(control)


def named(playbook, folder, host, limit, seconds):
    """Check that the run's summary (site.yml) or report (readiness.yml) names the node and the limit."""
    if playbook == 'site.yml':
        summary = load(os.path.join(folder, 'run-summary.json'))
        found = (summary.get('limits') or {}).get(host) or []
        ok = any(item.get('limit') == limit and item.get('seconds') == seconds for item in found)
        check(ok, 'site.yml run-summary.json names {0}: limit {1}, {2} s'.format(host, limit, seconds),
              json.dumps(summary.get('limits')))
        return found
    report = load(os.path.join(folder, 'report.json'))
    entry = report['hosts'][host]
    if limit == 'ssh_connect':
        text = entry.get('msg') or ''
        ok = entry['status'] == 'unreachable' and 'ansible_ssh_timeout' in text and '10 s' in text
    else:
        loaded = [c for c in entry['checks'] if c['id'] == 'driver.loaded']
        text = loaded[0]['observed'] if loaded else ''
        ok = bool(loaded) and loaded[0]['status'] == 'fail' and '{0} seconds'.format(seconds) in text
    check(ok, 'readiness report names {0} and the {1} limit'.format(host, limit), text)
    return text


def report(total):
    with open(os.path.join(WORK, 'results.json'), 'w') as f:
        json.dump({'rows': ROWS, 'margin_s': MARGIN, 'seconds': round(time.time() - total),
                   'load': os.getloadavg()}, f, indent=1)
    for item in ROWS:
        say('  {0}'.format(json.dumps(item)))
    say('hung-fleet, all steps: {0:.0f} s; {1}'.format(time.time() - total, 'FAILED: ' + '; '.join(
        FLEET.failed) if FLEET.failed else 'PASSED'))


def main():
    return FLEET.run('hung-fleet', scenario, report)


if __name__ == '__main__':
    sys.exit(main())
