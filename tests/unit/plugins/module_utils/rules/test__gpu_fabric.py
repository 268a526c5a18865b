# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/rules/_gpu_fabric.py: gpu.fabric on the real GB200, B200 and H100 captures (tests/fixtures/
nvidia-smi-xml) and as a table of fabric blocks."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_fabric as G
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import parse_nvsmi_xml

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES


def gpus_of(name):
    with open(os.path.join(FIXTURES, 'nvidia-smi-xml', name)) as handle:
        return parse_nvsmi_xml(handle.read())['gpus']


GB200 = gpus_of('gb200-4gpu-arm64_k8s-test-infra.xml')
B200 = gpus_of('b200-8gpu_k8s-test-infra.xml')
H100 = gpus_of('h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml')


@pytest.mark.parametrize('gpus, observed', [
    (GB200, 'all 4 GPUs Completed/Success; cluster 00000001-0000-0000-0000-000000000001, clique 2'),
    (B200, 'all 8 GPUs Completed/Success'),
    (H100, 'all 8 GPUs Completed/Success'),
])
def test_real_captures_pass(gpus, observed):
    assert G.check(gpus) == ('pass', G.EXPECTED, observed)


def with_fabric(gpus, index, **values):
    out = copy.deepcopy(gpus)
    out[index]['fabric'].update(values)
    return out


@pytest.mark.parametrize('gpus, status, words', [
    (with_fabric(GB200, 3, state='In Progress', status=None), 'fail',
     'GPU 3 (00000000:B2:00.0): fabric state In Progress (status N/A); CUDA cannot use the GPU until the fabric is '
     'Completed'),
    (with_fabric(H100, 0, state='Not Started', status=None), 'fail', 'GPU 0 (00000000:53:00.0): fabric state Not '
                                                                     'Started'),
    (with_fabric(B200, 5, status='Failure'), 'fail', 'fabric Completed with status Failure, want Success'),
    (with_fabric(GB200, 1, clique_id=None), 'fail', 'without a clique id'),
    (with_fabric(GB200, 2, cluster_uuid='00000002-0000-0000-0000-000000000002'), 'fail',
     'the GPUs report 2 NVLink clusters'),
    (with_fabric(GB200, 0, cluster_uuid='00000000-0000-0000-0000-000000000000'), 'fail',
     'no cluster UUID, the other GPUs are in cluster 00000001-0000-0000-0000-000000000001'),
    (with_fabric(GB200, 0, health='Unhealthy'), 'warn', 'fabric health Unhealthy'),
])
def test_faults(gpus, status, words):
    got, _expected, observed = G.check(gpus)
    assert got == status, observed
    assert words in observed


@pytest.mark.parametrize('gpus, words', [
    ([], 'nvidia-smi lists no GPU'),
    ([{'index': 0, 'pci_bus_id': 'x', 'fabric': None}], 'no GPU reports a fabric state'),
    ([{'index': 0, 'pci_bus_id': 'x', 'fabric': {'state': None, 'status': None}}], 'no GPU reports a fabric state'),
])
def test_skips(gpus, words):
    assert G.check(gpus) == ('skip', G.EXPECTED, words if 'lists' in words else
                             'no GPU reports a fabric state (no NVSwitch fabric on this board)')


def test_some_gpus_without_fabric_block():
    gpus = copy.deepcopy(H100)
    gpus[7]['fabric'] = None
    assert G.check(gpus)[2] == 'all 7 GPUs Completed/Success (1 GPUs report no fabric state)'
