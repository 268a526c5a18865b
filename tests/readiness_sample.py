# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write a sample readiness report (report.json, junit.xml, report.html, report.txt) from the unit-test data.

    .venv/bin/python tests/readiness_sample.py /tmp/readiness-sample

Hosts: a converged 8x B200 node, the same node freshly provisioned, one with a GPU off the bus and a full /dev/shm,
an unreachable one, one never reached and one whose gather failed. docs/readiness.md shows how to screenshot it.
"""
from __future__ import absolute_import, division, print_function

import copy
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# tests/unit/conftest.py lays this checkout out as ansible_collections/gpufleet/nodeprep and puts it on sys.path.
_SPEC = importlib.util.spec_from_file_location('nodeprep_conftest', os.path.join(HERE, 'unit', 'conftest.py'))
_SPEC.loader.exec_module(importlib.util.module_from_spec(_SPEC))

from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as F  # noqa: E402

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_report as rr  # noqa: E402


def sample_report():
    """The report of six hosts built from tests/unit/plugins/module_utils/rules/test_readiness_facts.py."""
    results = {}
    converged = F.converged()
    fresh = F.fresh()
    degraded = copy.deepcopy(converged)
    facts, settings, probe = degraded
    del facts['nvidia']['gpus'][4]
    facts['shm']['free_bytes'] = 10 * 1024 ** 2
    facts['nics']['ens3f0np0']['features']['generic-receive-offload']['enabled'] = True
    probe['kernel_log']['lines'] = ['2026-01-05T07:58:01+0000 gpu-a03 kernel: NVRM: Xid (PCI:0000:c4:00): 79, '
                                    'pid=0, GPU has fallen off the bus.']
    for host, (facts, settings, probe) in (('gpu-a01', converged), ('gpu-a02', fresh), ('gpu-a03', degraded)):
        results[host] = {'checks': F.evaluate(facts, settings, probe),
                         'values': F.checked_values(facts, settings, probe)}
    results['gpu-a04'] = {'unreachable': True, 'msg': 'Failed to connect to the host via ssh: No route to host'}
    results['gpu-a06'] = {'failed': True, 'msg': 'Gather the node facts: limits facts: /etc/security/limits.d/x.conf '
                                                 'line 3: cannot parse'}
    return rr.build_report(['gpu-a01', 'gpu-a02', 'gpu-a03', 'gpu-a04', 'gpu-a05', 'gpu-a06'], results,
                           '2026-01-05T08:00:00Z')


def main(argv):
    dest = argv[1] if len(argv) > 1 else 'readiness-sample'
    if not os.path.isdir(dest):
        os.makedirs(dest)
    report = sample_report()
    for name, render in rr.FILES:
        with open(os.path.join(dest, name), 'w') as handle:
            handle.write(render(report))
    print(os.path.join(os.path.abspath(dest), 'report.html'))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
