# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The GPUs' NVLink fabric state (readiness check ``gpu.fabric``): one rule, pure, no Ansible import.

Input: the ``ansible_facts.nvidia.gpus`` list (parsers/_nvidia_smi_xml.py parses each GPU's ``<fabric>`` block into ``fabric``:
``state``, ``status``, ``clique_id``, ``cluster_uuid``, ``health``; None where nvidia-smi prints N/A).

The rule (NVML ``nvmlGpuFabricInfo_t``: the status means something only once the state is ``Completed``;
../shared/reference/REALITY.md R23):

* a GPU without a fabric block (N/A: PCIe GPUs, boards without NVSwitch) is not judged; when no GPU has one the check
  skips;
* every GPU with a fabric block must be in state ``Completed`` with status ``Success``; ``Not Started`` and
  ``In Progress`` fail (CUDA returns error 802 or hangs until the fabric is up), as does any other status;
* on a board that belongs to a multi-node NVLink domain (a GPU reports a cluster UUID other than all zeros: GB200/GB300
  NVL72 compute trays) every GPU must report the same cluster UUID and a clique id;
* a fabric health summary other than ``Healthy`` warns (the GPU works, with less fabric bandwidth or a recovery
  under way).

Whether the fabric manager service is wanted and runs is the nvidia_driver plan's (check ``fabric.manager``); this
module only reads what the GPUs report, so it applies the same way on a node where fabric manager must not run.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

PASS = 'pass'  # nosec B105
WARN = 'warn'
FAIL = 'fail'
SKIP = 'skip'

COMPLETED = 'Completed'
SUCCESS = 'Success'
HEALTHY = 'Healthy'

EXPECTED = ('every GPU that reports a fabric state is Completed with status Success; on a multi-node NVLink domain '
            '(non-zero cluster UUID) every GPU in the same cluster, with a clique id')

_ZERO_UUID = re.compile(r'^[0-]*$')


def _label(gpu):
    return 'GPU {0} ({1})'.format(gpu.get('index'), gpu.get('pci_bus_id'))


def in_domain(fabric):
    """True when a GPU's fabric block names a multi-node NVLink domain (a cluster UUID other than all zeros)."""
    uuid = (fabric or {}).get('cluster_uuid')
    return bool(uuid) and not _ZERO_UUID.match(str(uuid))


def check(gpus):
    """``(status, expected, observed)`` of ``gpu.fabric`` for the GPUs nvidia-smi listed."""
    reporting = [g for g in gpus or [] if isinstance(g.get('fabric'), dict) and g['fabric'].get('state')]
    if not gpus:
        return SKIP, EXPECTED, 'nvidia-smi lists no GPU'
    if not reporting:
        return SKIP, EXPECTED, 'no GPU reports a fabric state (no NVSwitch fabric on this board)'
    problems = []
    warnings = []
    for gpu in reporting:
        fabric = gpu['fabric']
        state, status = fabric.get('state'), fabric.get('status')
        if state != COMPLETED:
            problems.append('{0}: fabric state {1} (status {2}); CUDA cannot use the GPU until the fabric is '
                            'Completed'.format(_label(gpu), state, status or 'N/A'))
        elif status != SUCCESS:
            problems.append('{0}: fabric Completed with status {1}, want Success'.format(_label(gpu), status or 'N/A'))
        health = fabric.get('health')
        if health and health != HEALTHY:
            warnings.append('{0}: fabric health {1}'.format(_label(gpu), health))
    domain = [g for g in reporting if in_domain(g['fabric'])]
    observed_domain = ''
    if domain:
        clusters = sorted(set(str(g['fabric']['cluster_uuid']) for g in domain))
        outside = [g for g in reporting if not in_domain(g['fabric'])]
        if len(clusters) > 1:
            members = []
            for cluster in clusters:
                names = ['GPU {0}'.format(g.get('index')) for g in domain
                         if str(g['fabric']['cluster_uuid']) == cluster]
                members.append('{0}: {1}'.format(cluster, ', '.join(names)))
            problems.append('the GPUs report {0} NVLink clusters: {1}'.format(len(clusters), '; '.join(members)))
        for gpu in outside:
            problems.append('{0}: no cluster UUID, the other GPUs are in cluster {1}'.format(_label(gpu), clusters[0]))
        for gpu in domain:
            if gpu['fabric'].get('clique_id') in (None, ''):
                problems.append('{0}: in cluster {1} without a clique id'.format(
                    _label(gpu), gpu['fabric']['cluster_uuid']))
        cliques = sorted(set(str(g['fabric'].get('clique_id')) for g in domain
                             if g['fabric'].get('clique_id') not in (None, '')))
        observed_domain = '; cluster {0}, clique {1}'.format(', '.join(clusters), ', '.join(cliques) or 'none')
    if problems:
        return FAIL, EXPECTED, '; '.join(problems + warnings)
    if warnings:
        return WARN, EXPECTED, '; '.join(warnings)
    observed = 'all {0} GPUs Completed/Success{1}'.format(len(reporting), observed_domain)
    if len(reporting) < len(gpus):
        observed += ' ({0} GPUs report no fabric state)'.format(len(gpus) - len(reporting))
    return PASS, EXPECTED, observed
