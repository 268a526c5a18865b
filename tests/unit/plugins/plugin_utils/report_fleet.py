# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Data only (no tests): readiness results of a 4-node fleet and of a generated fleet of any size, for the
renderer's tests and for ``make report-screenshots``.

Every result is what readiness_info returns for a fact set of test_readiness_facts.py (a converged 8x B200 node,
the same node freshly provisioned) or a small change of one (a GPU off the bus, a full /dev/shm, GRO left on, an
Xid in the kernel log, a persistence daemon stopped): real shapes, not hand-written check lists. The generated
fleet picks the variant of each host with a seeded random generator, so a size always gives the same report.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import random

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_report as rr

from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as F

GENERATED = '2026-01-05T08:00:00Z'


def _result(facts, settings, probe):
    return {'checks': F.evaluate(facts, settings, probe), 'values': F.checked_values(facts, settings, probe)}


def _xid(probe, code, host):
    probe['kernel_log']['lines'] = ['2026-01-05T07:58:01+0000 {0} kernel: NVRM: Xid (PCI:0000:c4:00): {1}, '
                                    'pid=0, name=python3'.format(host, code)]


def variants():
    """name -> readiness result: the node states the samples are made of."""
    out = {}
    out['converged'] = _result(*F.converged())
    out['fresh'] = _result(*F.fresh())

    facts, settings, probe = F.converged()
    del facts['nvidia']['gpus'][4]
    facts['nvidia']['attached_gpus'] = 7
    # The performance gates ran on the 7 GPUs nvidia-smi listed (the gather passes -g 7).
    facts[F.r.PERF_FACT] = {'all_reduce_perf': F.perf_run('all_reduce_perf', F.allreduce_output(7, 820.0)),
                            'nvbandwidth': F.perf_run('nvbandwidth', F.nvbandwidth_output(7, 55.0, 55.5, 750.0))}
    _xid(probe, 79, 'gpu-node')
    out['gpu_lost'] = _result(facts, settings, probe)

    facts, settings, probe = F.converged()
    facts['shm']['free_bytes'] = 10 * 1024 ** 2
    out['shm_full'] = _result(facts, settings, probe)

    facts, settings, probe = F.converged()
    facts['nics']['ens3f0np0']['features']['generic-receive-offload']['enabled'] = True
    out['gro_on'] = _result(facts, settings, probe)

    facts, settings, probe = F.converged()
    _xid(probe, 13, 'gpu-node')
    out['xid_warn'] = _result(facts, settings, probe)

    facts, settings, probe = F.converged()
    probe['services']['nvidia-persistenced.service']['active_state'] = 'inactive'
    out['persistenced_off'] = _result(facts, settings, probe)

    out['unreachable'] = {'unreachable': True, 'msg': 'Failed to connect to the host via ssh: ssh: connect to host '
                                                      'gpu-node port 22: No route to host'}
    out['gather_failed'] = {'failed': True, 'msg': 'Gather the node facts and plan every role: nvidia-smi timed out '
                                                   'after 60 s'}
    return out


def four_nodes():
    """The 4-node report: a converged node, one with a GPU off the bus (Xid 79), one with a non-fatal Xid (a
    warning) and one that could not be reached."""
    v = variants()
    results = {'gpu-a01': v['converged'], 'gpu-a02': v['gpu_lost'], 'gpu-a03': v['xid_warn'],
               'gpu-a04': v['unreachable']}
    return rr.build_report(['gpu-a01', 'gpu-a02', 'gpu-a03', 'gpu-a04'], results, GENERATED)


# variant -> weight (per 1000 hosts) of the generated fleet; the rest is converged.
_MIX = (('fresh', 4), ('gpu_lost', 12), ('shm_full', 16), ('gro_on', 30), ('xid_warn', 40),
        ('persistenced_off', 20), ('unreachable', 8), ('gather_failed', 4))


def fleet(nodes, seed=21, racks_of=20):
    """A generated report of ``nodes`` hosts named gpu-rRRnNN (``racks_of`` per rack), mostly converged, some in
    each of the other variants (about 12% need attention)."""
    v = variants()
    rng = random.Random(seed)
    hosts = []
    results = {}
    for index in range(nodes):
        host = 'gpu-r{0:02d}n{1:02d}'.format(index // racks_of + 1, index % racks_of + 1)
        hosts.append(host)
        pick = rng.randrange(1000)
        name = 'converged'
        for variant, weight in _MIX:
            if pick < weight:
                name = variant
                break
            pick -= weight
        results[host] = v[name]
    return rr.build_report(hosts, results, GENERATED)
