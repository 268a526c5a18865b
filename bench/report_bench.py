# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The readiness report built for many synthetic hosts (`make bench-report`; not part of `make test`).

Each synthetic host's result is what gpufleet.nodeprep.readiness_info returns for one of the unit tests' nodes
(tests/unit/plugins/module_utils/rules/test_readiness_facts.py): a converged node (ready), a fresh node (not ready),
and, every 100th host, no result (unreachable). The readiness_report action runs as in the play (one call on the
controller, its hostvars a plain dict here, so Ansible's per-host variable lookup is not in the figure) and writes
report.json, junit.xml, report.html, report.txt, readiness.prom and exit-status into a temporary folder.

Environment: BENCH_REPORT_HOSTS (default 10000), BENCH_REPORT_NOT_READY (every Nth host not ready, default 10),
BENCH_OUT (folder of report-latest.json; default bench/results).
Prints and writes: wall and CPU seconds of the action's run, peak memory of the process, the size of each file.
"""

import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from unittest.mock import MagicMock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, '.tmp', 'collections'))

from ansible.playbook.play_context import PlayContext  # noqa: E402
from ansible.release import __version__ as ANSIBLE_VERSION  # noqa: E402

from ansible_collections.gpufleet.nodeprep.plugins.action import readiness_report  # noqa: E402
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import (  # noqa: E402
    test_readiness_facts as F)


def synthetic(hosts, not_ready_every):
    converged = {'checks': F.evaluate(*F.converged()), 'values': F.checked_values(*F.converged())}
    fresh = {'checks': F.evaluate(*F.fresh())}
    names = ['gpu-{0:05d}'.format(i) for i in range(hosts)]
    hostvars = {}
    for index, name in enumerate(names):
        if index % 100 == 99:
            hostvars[name] = {}
        elif index % not_ready_every == not_ready_every - 1:
            hostvars[name] = {'nodeprep_readiness': json.loads(json.dumps(fresh))}
        else:
            hostvars[name] = {'nodeprep_readiness': json.loads(json.dumps(converged))}
    return names, hostvars


def main():
    hosts = int(os.environ.get('BENCH_REPORT_HOSTS') or 10000)
    not_ready_every = int(os.environ.get('BENCH_REPORT_NOT_READY') or 10)
    out = os.environ.get('BENCH_OUT') or os.path.join(HERE, 'results')
    names, hostvars = synthetic(hosts, not_ready_every)
    dest = tempfile.mkdtemp(prefix='nodeprep-report-bench-')
    try:
        task = MagicMock()
        task.args = {'dest': dest, 'hosts': names}
        task.async_val = 0
        task.check_mode = False
        task.diff = False
        action = readiness_report.ActionModule(task, MagicMock(), PlayContext(), loader=None, templar=None,
                                               shared_loader_obj=None)
        cpu0, wall0 = time.process_time(), time.monotonic()
        result = action.run(task_vars={'ansible_play_hosts_all': names, 'hostvars': hostvars})
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        sizes = dict((os.path.basename(path), os.path.getsize(path)) for path in result['files'])
    finally:
        shutil.rmtree(dest)
    figures = {
        'date_utc': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
        'ansible_core': ANSIBLE_VERSION,
        'python': platform.python_version(),
        'load_average': [round(v, 1) for v in os.getloadavg()],
        'hosts': hosts,
        'summary': result['summary'],
        'wall_s': round(wall, 2),
        'cpu_s': round(cpu, 2),
        'peak_mb': round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0),
        'file_bytes': sizes,
    }
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, 'report-latest.json'), 'w') as handle:
        json.dump(figures, handle, indent=1, sort_keys=True)
        handle.write('\n')
    print(json.dumps(figures, indent=1, sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
