# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU double's nvidia-smi topo -m, its GB200/GB300 profiles and the fabric-in-progress and nvlink-down faults,
read by the collection's own parsers and rules (_topology, _gpu_fabric, _nvsmi)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_fabric
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _topology
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _nvidia_smi_topo
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import parse_nvsmi_xml
from ansible_collections.gpufleet.nodeprep.tests.unit.testbed import test_gpu_double

node = test_gpu_double.node  # the double's node fixture (a root with the double installed)

PROFILES = ['hgx-b200-8gpu', 'hgx-h100-8gpu', 'hgx-h200-8gpu', 'gb200-4gpu', 'gb300-4gpu']


def topo(node):  # noqa: F811
    out, rc = node.smi('topo', '-m')
    assert rc == 0, out
    return out, _nvidia_smi_topo.parse_topo_matrix(out)


def gpus(node):  # noqa: F811
    out, rc = node.smi('-q', '-x')
    assert rc == 0, out
    return parse_nvsmi_xml(out)['gpus']


@pytest.mark.parametrize('name, count, nics, words', [
    ('hgx-b200-8gpu', 8, 12, '8 of 8 GPUs with a NIC at PIX/PXB'),
    ('hgx-h100-8gpu', 8, 8, '8 of 8 GPUs with a NIC at PIX/PXB'),
    ('hgx-h200-8gpu', 8, 8, '8 of 8 GPUs with a NIC at PIX/PXB'),
    ('gb200-4gpu', 4, 4, 'GPU-NIC rails not judged on a Grace board'),
    ('gb300-4gpu', 4, 4, 'GPU-NIC rails not judged on a Grace board'),
])
def test_topo_m_of_every_profile_passes_the_rule(node, name, count, nics, words):  # noqa: F811
    node.ready(name)
    text, matrix = topo(node)
    assert text.startswith('\t\x1b[4mGPU0\tGPU1\t')
    assert '\nLegend:\n\n  X    = Self\n' in text
    assert (len(matrix['gpus']), len(matrix['nics'])) == (count, nics)
    assert matrix['nic_names']['NIC0'] == 'mlx5_0'
    status, _expected, observed = _topology.check(matrix, gpus(node), True)
    assert status == 'pass', observed
    assert observed.startswith('{0} GPU pairs at NV18'.format(count * (count - 1) // 2))
    assert words in observed


def test_topo_m_shape_of_the_b200_capture(node):  # noqa: F811
    # vllm-project/vllm#24513's GPU rows end in CPU affinity, NUMA affinity, an empty column and GPU NUMA ID
    node.ready('hgx-b200-8gpu')
    text, matrix = topo(node)
    gpu0 = [line for line in text.splitlines() if line.startswith('GPU0\t')][0]
    assert gpu0.startswith('GPU0\t X \tNV18\t')
    assert gpu0.endswith('\t0-55,112-167\t0\t\tN/A')
    assert matrix['affinity']['GPU7'] == {'cpu': '56-111,168-223', 'numa': '1', 'gpu_numa': 'N/A'}


def test_grace_nics_are_sys(node):  # noqa: F811
    node.ready('gb200-4gpu')
    _text, matrix = topo(node)
    assert set(matrix['links'][g][n] for g in matrix['gpus'] for n in matrix['nics']) == {'SYS'}
    assert matrix['affinity']['GPU1'] == {'cpu': '0-71', 'numa': '0,3-9,11-17', 'gpu_numa': '10'}


@pytest.mark.parametrize('text, pair, cell', [
    ('', ('GPU0', 'GPU1'), 'NODE'),
    ('1 6 12\n', ('GPU1', 'GPU6'), 'NV12'),
    ('2 5\n', ('GPU2', 'GPU5'), 'SYS'),
])
def test_nvlink_down_fault_fails_naming_the_pair(node, text, pair, cell):  # noqa: F811
    node.ready('hgx-h100-8gpu').fault('nvlink-down', text)
    _text, matrix = topo(node)
    assert matrix['links'][pair[0]][pair[1]] == matrix['links'][pair[1]][pair[0]] == cell
    listed = gpus(node)
    status, _expected, observed = _topology.check(matrix, listed, True)
    assert status == 'fail'
    bus = dict(('GPU{0}'.format(g['index']), g['pci_bus_id']) for g in listed)
    assert observed.startswith('NVLink degraded on 1 of 28 GPU pairs: {0} ({1})-{2} ({3}): {4}'.format(
        pair[0], bus[pair[0]], pair[1], bus[pair[1]], cell))


def test_topo_needs_m(node):  # noqa: F811
    node.ready('hgx-h100-8gpu')
    assert node.smi('topo')[1] == 2


@pytest.mark.parametrize('name, clique', [('gb200-4gpu', '2'), ('gb300-4gpu', '32766')])
def test_grace_fabric_completed_without_fabric_manager(node, name, clique):  # noqa: F811
    node.ready(name)
    listed = gpus(node)
    assert set((g['fabric']['state'], g['fabric']['status'], g['fabric']['clique_id']) for g in listed) == {
        ('Completed', 'Success', clique)}
    assert _gpu_fabric.check(listed)[0] == 'pass'


@pytest.mark.parametrize('name, text, index', [
    ('gb200-4gpu', '', 3),
    ('gb300-4gpu', '1\n', 1),
])
def test_fabric_in_progress_fault_fails_naming_the_gpu(node, name, text, index):  # noqa: F811
    node.ready(name).fault('fabric-in-progress', text)
    listed = gpus(node)
    states = [g['fabric']['state'] for g in listed]
    assert states == ['In Progress' if i == index else 'Completed' for i in range(4)]
    status, _expected, observed = _gpu_fabric.check(listed)
    assert status == 'fail'
    assert observed == ('GPU {0} ({1}): fabric state In Progress (status N/A); CUDA cannot use the GPU until the '
                        'fabric is Completed'.format(index, listed[index]['pci_bus_id']))


def _testbed():
    import os
    import sys
    from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT
    sys.path.insert(0, os.path.join(ROOT, 'tests', 'testbed'))
    import testbed
    return testbed


@pytest.mark.parametrize('kind, gpu, value, content', [
    ('fabric-in-progress', None, None, ''),
    ('fabric-in-progress', '2', None, '2\n'),
    ('nvlink-down', None, None, '0 1 0\n'),
    ('nvlink-down', '3 4', '12', '3 4 12\n'),
])
def test_fleet_fault_files(kind, gpu, value, content):
    tb = _testbed()

    class Args(object):
        pass
    args = Args()
    args.gpu, args.value = gpu, value
    assert kind in tb.FAULTS
    assert tb.fault_content(kind, args) == content


def test_gb200_kind_only_when_asked_for():
    tb = _testbed()
    assert 'el9-gb200' not in [tb.template_key(t) for t in tb.select_templates(None)]
    nodes = tb.plan_fleet(1, 'el9-gb200')
    assert (nodes[0]['name'], nodes[0]['profile'], nodes[0]['branch']) == ('el9-gb200-01', 'gb200-4gpu', '580')
