# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/parsers/_nvidia_smi_topo.py and rules/_topology.py: the topo -m parser on real captures (tests/fixtures/topo, SOURCES.md) and the
gpu.topology rule as a table (matrix + GPUs + NVSwitches -> status, observed)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _fitness_thresholds
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _topology as T
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _nvidia_smi_topo

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES

TOPO = os.path.join(FIXTURES, 'topo')


def read(name):
    with open(os.path.join(TOPO, name)) as handle:
        return handle.read()


def bundle_section(name):
    """The `nvidia-smi topo -m` section of an nvidia_gpu_exporter capture bundle, as it lies in the file."""
    lines = read(name).splitlines(True)
    start = [i for i, line in enumerate(lines) if line.startswith('# $ nvidia-smi topo -m')][0] + 2
    end = [i for i in range(start, len(lines)) if lines[i].startswith('####')][0]
    return ''.join(lines[start:end])


def gpus(count, name):
    return [{'index': i, 'name': name, 'pci_bus_id': '00000000:{0:02X}:00.0'.format(0x18 + 0x10 * i)}
            for i in range(count)]


# ---------------------------------------------------------------------------------------------------------------------
# the parser, on every capture

@pytest.mark.parametrize('name, count, nics, cell, cpu0', [
    ('a100-8gpu-nv12_topo-m_ml-engineering.txt', 8, 0, 'NV12', '0-23'),
    ('h100-8gpu-nv18-compact_topo-m_ml-engineering.txt', 8, 0, 'NV18', '0-51'),
    ('h100-8gpu-nv18_topo-m_ml-engineering.txt', 8, 0, 'NV18', '0-51,104-155'),
    ('h100-8gpu-9nic-nv18_topo-m_nccl-issue1453-excerpt.txt', 8, 9, 'NV18', '0-79'),
    ('b200-8gpu-8nic-nv18_topo-m_vllm-issue24513-excerpt.txt', 8, 8, 'NV18', '0-55,112-167'),
])
def test_parse_captures(name, count, nics, cell, cpu0):
    matrix = _nvidia_smi_topo.parse_topo_matrix(read(name))
    assert matrix['gpus'] == ['GPU{0}'.format(i) for i in range(count)]
    assert len(matrix['nics']) == nics
    for a in matrix['gpus']:
        for b in matrix['gpus']:
            assert matrix['links'][a][b] == ('X' if a == b else cell)
    assert matrix['affinity']['GPU0']['cpu'] == cpu0


def test_parse_nic_cells_of_a_real_capture():
    matrix = _nvidia_smi_topo.parse_topo_matrix(read('h100-8gpu-9nic-nv18_topo-m_nccl-issue1453-excerpt.txt'))
    assert matrix['links']['GPU0']['NIC8'] == 'PIX'
    assert matrix['links']['GPU7']['NIC1'] == 'PIX'
    assert matrix['links']['GPU0']['NIC0'] == 'SYS'
    assert matrix['affinity']['GPU4'] == {'cpu': '80-159', 'numa': '1', 'gpu_numa': 'N/A'}
    # the excerpt has NIC rows 0-5 only (the rest of the thread was not retrieved): the GPU rows decide
    assert sorted(matrix['links']) == sorted(matrix['gpus'] + ['NIC{0}'.format(i) for i in range(6)])


def test_parse_real_layout_with_ansi_header_one_gpu():
    text = bundle_section('h200-1gpu-drv590.48.01-capture-bundle_nvidia_gpu_exporter.txt')
    assert '\x1b[4m' in text
    matrix = _nvidia_smi_topo.parse_topo_matrix(text)
    assert matrix['devices'] == ['GPU0']
    assert matrix['affinity']['GPU0'] == {'cpu': '0-23', 'numa': '0', 'gpu_numa': 'N/A'}


def test_parse_nic_legend():
    text = read('b200-8gpu-8nic-nv18_topo-m_vllm-issue24513-excerpt.txt') + \
        '\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n'
    assert _nvidia_smi_topo.parse_topo_matrix(text)['nic_names'] == {'NIC0': 'mlx5_0', 'NIC1': 'mlx5_1'}


@pytest.mark.parametrize('text, words', [
    ('', 'no header line'),
    ('GPU0\t X \tNV18\n', 'no header line'),
    ('\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-3\n', 'no row for GPU1'),
    ('\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-3\nGPU1\tNV18\tNV18\t0-3\n', 'not X'),
    ('\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \nGPU1\tNV18\t X \t0-3\n', 'does not have 2 link cells'),
    ('\tGPU0\tFOO\tCPU Affinity\n', 'FOO'),
    ('\tGPU0\tGPU1\tCPU Affinity\nGPU9\t X \tNV18\t0-3\n', "row 'GPU9'"),
])
def test_parse_refuses(text, words):
    with pytest.raises(_nvidia_smi_topo.TopologyParseError) as err:
        _nvidia_smi_topo.parse_topo_matrix(text)
    assert words in str(err.value)


# ---------------------------------------------------------------------------------------------------------------------
# the rule

H100 = 'NVIDIA H100 80GB HBM3'


def degrade(matrix, a, b, cell):
    out = copy.deepcopy(matrix)
    out['links'][a][b] = cell
    out['links'][b][a] = cell
    return out


def test_model_table():
    assert T.model_nvlinks('NVIDIA A100-SXM4-80GB') == (12, 'A100 SXM4')
    assert T.model_nvlinks(H100) == (18, 'H100 SXM5')
    assert T.model_nvlinks('NVIDIA H200') == (18, 'H200 SXM')
    assert T.model_nvlinks('NVIDIA B200') == (18, 'B200')
    assert T.model_nvlinks('NVIDIA GB200') == (18, 'GB200')
    # GB300: 18 from the figures table (oci-hpc), no longer labelled a guess
    assert T.model_nvlinks('NVIDIA GB300') == (18, 'GB300')
    assert T.model_nvlinks('NVIDIA H200 NVL') == (None, None)
    assert T.model_nvlinks('NVIDIA L40S') == (None, None)
    # A800 and H800: NVLink cut to 8 links (400 GB/s); the table said 12 and 18 before
    assert T.model_nvlinks('NVIDIA A800-SXM4-80GB') == (8, 'A800 SXM4')
    assert T.model_nvlinks('NVIDIA H800') == (8, 'H800 SXM5')
    assert T.model_nvlinks('NVIDIA H800 PCIe') == (None, None)
    assert T.model_nvlinks('Tesla V100-SXM2-16GB') == (6, 'V100 SXM2')
    assert T.model_layout('Tesla V100-SXM2-16GB') == T.HYBRID_CUBE_MESH
    assert T.model_nvlinks('NVIDIA H20') == (18, 'H20')
    assert T.model_nvlinks('NVIDIA A100-SXM-64GB') == (12, 'A100 SXM4')


def test_model_table_is_the_fitness_table():
    # one home for the NVLinks per GPU: every model of _fitness_thresholds with a count gives the same to the rule
    for name, key in (('NVIDIA H100 80GB HBM3', 'h100-sxm'), ('NVIDIA H200', 'h200'), ('NVIDIA B200', 'b200'),
                      ('NVIDIA B300', 'b300'), ('NVIDIA GB200', 'gb200'), ('NVIDIA GB300', 'gb300'),
                      ('NVIDIA A100-SXM4-80GB', 'a100-sxm4'), ('NVIDIA A800-SXM4-80GB', 'a800-sxm4'),
                      ('NVIDIA H800', 'h800-sxm'), ('Tesla V100-SXM2-32GB', 'v100-sxm2'), ('NVIDIA H20', 'h20')):
        entry = _fitness_thresholds.model_for(name)
        assert entry['key'] == key
        assert T.model_nvlinks(name)[0] == entry['nvlinks'] == _fitness_thresholds.thresholds(name)['nvlinks']['value']


A100 = _nvidia_smi_topo.parse_topo_matrix(read('a100-8gpu-nv12_topo-m_ml-engineering.txt'))
H100_NICS = _nvidia_smi_topo.parse_topo_matrix(read('h100-8gpu-9nic-nv18_topo-m_nccl-issue1453-excerpt.txt'))
B200_NICS = _nvidia_smi_topo.parse_topo_matrix(read('b200-8gpu-8nic-nv18_topo-m_vllm-issue24513-excerpt.txt'))
H100_PLAIN = _nvidia_smi_topo.parse_topo_matrix(read('h100-8gpu-nv18_topo-m_ml-engineering.txt'))
H800_NICS = _nvidia_smi_topo.parse_topo_matrix(read('h800-8gpu-9nic-nv8_topo-m_sglang-issue28424.txt'))
V100_DGX1 = _nvidia_smi_topo.parse_topo_matrix(read('v100-sxm2-8gpu-4nic-dgx1_topo-m_pytorch-ddp-readme.txt'))
H800 = 'NVIDIA H800'
A800 = 'NVIDIA A800-SXM4-80GB'
V100 = 'Tesla V100-SXM2-16GB'


@pytest.mark.parametrize('matrix, model, switched, status, words', [
    (A100, 'NVIDIA A100-SXM4-80GB', True, 'pass', ['28 GPU pairs at NV12 (A100 SXM4 with NVSwitches: NV12)']),
    (H100_PLAIN, H100, True, 'pass', ['28 GPU pairs at NV18 (H100 SXM5 with NVSwitches: NV18)']),
    (H100_NICS, H100, True, 'pass', ['28 GPU pairs at NV18', '8 of 8 GPUs with a NIC at PIX/PXB']),
    (B200_NICS, 'NVIDIA B200', True, 'pass', ['28 GPU pairs at NV18 (B200 with NVSwitches', '8 of 8 GPUs']),
    # an A100 board read as H100 by the table: every pair short of 18 fails
    (A100, H100, True, 'fail', ['NVLink degraded on 28 of 28 GPU pairs', 'GPU0 (00000000:18:00.0)-GPU1 '
                                '(00000000:28:00.0): NV12, want NV18', 'and 20 more']),
    # one pair down to 12 links on a switched board
    (degrade(H100_PLAIN, 'GPU2', 'GPU5', 'NV12'), H100, True, 'fail',
     ['NVLink degraded on 1 of 28 GPU pairs: GPU2 (00000000:38:00.0)-GPU5 (00000000:68:00.0): NV12, want NV18']),
    # a pair with no NVLink at all (the real B200 of vllm-project/vllm#16336 shows NODE/SYS for a GPU that lost them)
    (degrade(B200_NICS, 'GPU0', 'GPU2', 'NODE'), 'NVIDIA B200', True, 'fail',
     ['GPU0 (00000000:18:00.0)-GPU2 (00000000:38:00.0): NODE (no NVLink), want NV18']),
    # without NVSwitches (direct-connect) every pair as the best pair
    (degrade(H100_PLAIN, 'GPU2', 'GPU5', 'NV12'), H100, False, 'fail', ['NV12, want NV18',
                                                                        'no NVSwitch on this node']),
    (A100, H100, False, 'pass', ['28 GPU pairs at NV12 (every pair as the best pair, NV12 (no NVSwitch on this']),
    (A100, 'NVIDIA Future 1', None, 'pass', ['model not in the NVLink table']),
    (H100_NICS, H100, None, 'pass', ['NVSwitches unknown']),
])
def test_rule(matrix, model, switched, status, words):
    got, expected, observed = T.check(matrix, gpus(8, model), switched)
    assert got == status, observed
    assert expected == T.EXPECTED
    for word in words:
        assert word in observed


def a800_matrix():
    # No public A800 capture with the model named was found: the real H800 board's matrix (NV8, the same NVSwitch
    # layout), read as A800 SXM4 GPUs (constructed from a real capture).
    return copy.deepcopy(H800_NICS)


@pytest.mark.parametrize('matrix, model, switched, status, words', [
    # sgl-project/sglang#28424: 8 x H800, NV8 between every pair, a NIC at PIX per GPU (failed before: want NV18)
    (H800_NICS, H800, True, 'pass', ['28 GPU pairs at NV8 (H800 SXM5 with NVSwitches: NV8)',
                                     '8 of 8 GPUs with a NIC at PIX/PXB']),
    (H800_NICS, H800, None, 'pass', ['28 GPU pairs at NV8']),
    (a800_matrix(), A800, True, 'pass', ['28 GPU pairs at NV8 (A800 SXM4 with NVSwitches: NV8)']),
    # a real defect still fails: one pair lost half its links, or a GPU lost NVLink to a peer
    (degrade(H800_NICS, 'GPU1', 'GPU6', 'NV4'), H800, True, 'fail',
     ['NVLink degraded on 1 of 28 GPU pairs: GPU1 (00000000:28:00.0)-GPU6 (00000000:78:00.0): NV4, want NV8']),
    (degrade(a800_matrix(), 'GPU0', 'GPU7', 'SYS'), A800, True, 'fail',
     ['GPU0 (00000000:18:00.0)-GPU7 (00000000:88:00.0): SYS (no NVLink), want NV8']),
    # pytorch/pytorch DDP README: a DGX-1 with 8 x V100 SXM2, hybrid cube-mesh (failed before: NV1 pairs and SYS
    # pairs below the best pair NV2)
    (V100_DGX1, V100, False, 'pass', ['8 GPUs with 6 NVLinks each to their peers (V100 SXM2, hybrid cube-mesh']),
    (V100_DGX1, V100, None, 'pass', ['8 GPUs with 6 NVLinks each']),
    # a lost link: the NV2 pair GPU0-GPU3 down to NV1 fails both GPUs, naming their pairs
    (degrade(V100_DGX1, 'GPU0', 'GPU3', 'NV1'), V100, False, 'fail',
     ['NVLink degraded on 2 of 8 GPUs of a hybrid cube-mesh board: GPU0 (00000000:18:00.0): 5 NVLinks to its '
      'peers, want 6 (GPU1=NV1 GPU2=NV1 GPU3=NV1 GPU4=NV2)', 'GPU3 (00000000:48:00.0): 5 NVLinks']),
    # a pair that lost its only link (NV1 -> SYS)
    (degrade(V100_DGX1, 'GPU4', 'GPU5', 'SYS'), V100, False, 'fail', ['GPU4 (00000000:58:00.0): 5 NVLinks',
                                                                      'GPU5 (00000000:68:00.0): 5 NVLinks']),
])
def test_rule_nv8_and_cube_mesh(matrix, model, switched, status, words):
    got, _expected, observed = T.check(matrix, gpus(8, model), switched)
    assert got == status, observed
    for word in words:
        assert word in observed, observed


def test_parse_h800_and_v100_captures():
    assert H800_NICS['gpus'] == ['GPU{0}'.format(i) for i in range(8)]
    assert H800_NICS['nic_names']['NIC8'] == 'mlx5_bond_0'
    assert V100_DGX1['nics'] == ['mlx5_2', 'mlx5_0', 'mlx5_3', 'mlx5_1']
    row = [V100_DGX1['links']['GPU0'][g] for g in V100_DGX1['gpus']]
    assert row == ['X', 'NV1', 'NV1', 'NV2', 'NV2', 'SYS', 'SYS', 'SYS']


def test_rule_cube_mesh_part_of_the_board_is_not_judged():
    # a VM given 4 of the 8 V100s: the per-GPU count of the whole board does not hold, so it is reported only
    part = copy.deepcopy(V100_DGX1)
    keep = ['GPU0', 'GPU1', 'GPU2', 'GPU3']
    part['gpus'] = keep
    status, _expected, observed = T.check(part, gpus(4, V100), False)
    assert status == 'pass', observed
    assert '4 of the 8 GPUs of a hybrid cube-mesh board (V100 SXM2): NVLinks per GPU GPU0 4, GPU1 4' in observed


def test_rule_no_rail_warns_naming_the_gpu():
    matrix = copy.deepcopy(H100_NICS)
    matrix['nic_names'] = {'NIC5': 'mlx5_5'}
    for nic in matrix['nics']:
        matrix['links']['GPU3'][nic] = {'NIC5': 'NODE'}.get(nic, 'SYS')
    status, _expected, observed = T.check(matrix, gpus(8, H100), True)
    assert status == 'warn'
    assert observed.startswith('GPU3 (00000000:48:00.0): no NIC at PIX or PXB (no GPUDirect RDMA rail); nearest '
                               'NIC5 (mlx5_5) at NODE')
    assert '7 of 8 GPUs with a NIC at PIX/PXB' in observed


def test_rule_grace_board_skips_rails():
    # GB200 compute tray as sgl-project/sglang#11208 shows it: 4 GPUs at NV18, every NIC at SYS (constructed table)
    devices = ['GPU0', 'GPU1', 'GPU2', 'GPU3', 'NIC0', 'NIC1']
    links = dict((a, dict((b, 'X' if a == b else ('NV18' if a.startswith('GPU') and b.startswith('GPU') else 'SYS'))
                          for b in devices)) for a in devices)
    matrix = {'devices': devices, 'gpus': devices[:4], 'nics': devices[4:], 'links': links, 'affinity': {},
              'nic_names': {}}
    status, _expected, observed = T.check(matrix, gpus(4, 'NVIDIA GB200'), True)
    assert status == 'pass', observed
    assert 'GPU-NIC rails not judged on a Grace board' in observed


@pytest.mark.parametrize('count, model, words', [
    (1, H100, 'one GPU: no GPU pair to check'),
    (0, H100, 'nvidia-smi lists no GPU'),
    (2, 'NVIDIA H100 PCIe', 'PCIe GPUs (NVIDIA H100 PCIe)'),
    (2, 'NVIDIA L40S', 'PCIe GPUs'),
])
def test_rule_skips(count, model, words):
    status, _expected, observed = T.check(H100_PLAIN, gpus(count, model), True)
    assert status == 'skip'
    assert words in observed


def test_rule_no_nvlink_at_all():
    pcie = copy.deepcopy(H100_PLAIN)
    for a in pcie['gpus']:
        for b in pcie['gpus']:
            if a != b:
                pcie['links'][a][b] = 'SYS'
    assert T.check(pcie, gpus(8, 'NVIDIA Future 1'), False)[0] == 'skip'
    status, _expected, observed = T.check(pcie, gpus(8, H100), True)
    assert status == 'fail'
    assert 'NVLink degraded on 28 of 28 GPU pairs' in observed


def test_rule_gpu_missing_from_matrix():
    status, _expected, observed = T.check(H100_PLAIN, gpus(9, H100), True)
    assert status == 'fail'
    assert 'nvidia-smi topo -m has no row for GPU8' in observed


@pytest.mark.parametrize('kind, gpu_list, want', [
    ('pci', [], True),
    ('nvlink5', [], True),
    ('none', [], False),
    (None, [], None),
    ('none', [{'fabric': {'cluster_uuid': '00000001-0000-0000-0000-000000000001'}}], True),
    ('none', [{'fabric': {'cluster_uuid': '00000000-0000-0000-0000-000000000000'}}], False),
])
def test_is_switched(kind, gpu_list, want):
    assert T.is_switched(kind, gpu_list) is want


@pytest.mark.parametrize('nvidia, status, words', [
    ({'gpus': gpus(8, H100), 'topology': {'matrix': H100_PLAIN, 'error': None}}, 'pass', '28 GPU pairs'),
    ({'gpus': gpus(8, H100), 'topology': {'matrix': None, 'error': 'rc 9: boom'}}, 'fail',
     'nvidia-smi topo -m failed: rc 9: boom'),
    ({'gpus': gpus(8, H100), 'topology': {'matrix': None, 'error': None}}, 'fail', 'gave no matrix'),
    ({'gpus': gpus(8, H100)}, 'skip', 'was not gathered'),
    ({'gpus': gpus(1, H100)}, 'skip', 'one GPU'),
])
def test_from_facts(nvidia, status, words):
    got, _expected, observed = T.from_facts(nvidia, 'pci')
    assert got == status
    assert words in observed
