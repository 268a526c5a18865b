# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Compare a check-mode run with the real run that followed it, task by task and host by host.

Usage: compare_runs.py CHECK_DIR REAL_DIR [PLAYBOOK]
Each folder holds the files the nodeprep_record callback wrote; the oldest file of each is compared (in REAL_DIR, the
oldest run of PLAYBOOK, a file name such as converge.yml, when it is given). Exit 0 when, on
every host, the tasks check mode said would change are exactly the tasks the real run changed (same names, same
number of times); otherwise print each difference and exit 1.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import collections
import json
import os
import sys


def oldest(folder, playbook=None):
    for name in sorted(n for n in os.listdir(folder) if n.endswith('.json')):
        with open(os.path.join(folder, name)) as handle:
            run = json.load(handle)
        if playbook is None or run.get('playbook') == playbook:
            return run
    raise SystemExit('compare_runs: no recorded run{0} in {1}'.format(' of ' + playbook if playbook else '', folder))


def differences(check, real):
    out = []
    if not check.get('check_mode'):
        out.append('the first run was not a check-mode run')
    if real.get('check_mode'):
        out.append('the second run was a check-mode run')
    for host in sorted(set(check['hosts']) | set(real['hosts'])):
        c = check['hosts'].get(host)
        r = real['hosts'].get(host)
        if c is None or r is None:
            out.append('{0}: only in the {1} run'.format(host, 'real' if c is None else 'check'))
            continue
        for run, entry in (('check', c), ('real', r)):
            if entry['failed'] or entry['unreachable']:
                out.append('{0}: the {1} run failed: {2}'.format(host, run, entry['failed'] or 'unreachable'))
        predicted = collections.Counter(c['changed'])
        changed = collections.Counter(r['changed'])
        for task in sorted(set(predicted) | set(changed)):
            if predicted[task] != changed[task]:
                out.append('{0}: "{1}" changed {2} time(s) in the real run, check mode predicted {3}'.format(
                    host, task, changed[task], predicted[task]))
    return out


def main(argv):
    if len(argv) not in (3, 4):
        raise SystemExit(__doc__)
    check, real = oldest(argv[1]), oldest(argv[2], argv[3] if len(argv) == 4 else None)
    diff = differences(check, real)
    hosts = len(real['hosts'])
    tasks = sum(len(h['changed']) for h in real['hosts'].values())
    if diff:
        print('\n'.join(diff))
        print('check mode mispredicted {0} task result(s) over {1} host(s)'.format(len(diff), hosts))
        return 1
    print('check mode predicted all {0} changed task result(s) on {1} host(s)'.format(tasks, hosts))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
