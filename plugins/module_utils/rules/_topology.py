# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The readiness rule ``gpu.topology`` over a parsed ``nvidia-smi topo -m`` (parsers/_nvidia_smi_topo.py).  Pure
functions, no Ansible import.

check(matrix, gpus, switched) applies the rule:

* fewer than 2 GPUs, or a PCIe GPU model (NVLink there is at most a bridge between two cards): skip;
* every GPU pair must be at ``NV<n>``.  With NVSwitches (``switched``: NVSwitches on the PCI bus, NVLink 5 switch
  bridges, or the GPUs in a multi-node NVLink domain) each GPU's links all go to the switches, so every pair shows
  all of them and n comes from NVLINKS below.  Without NVSwitches (direct-connect boards) or for a model not in the
  table, every pair must show as many links as the best pair of the node.  A pair below that fails, naming both
  GPUs; a board whose model has NVLink but where no pair shows any fails too;
* when the matrix has NIC columns, every GPU should have a NIC at ``PIX`` or ``PXB`` (behind the same PCIe switch:
  its GPUDirect RDMA rail).  A GPU without one warns, naming it and its nearest NIC: NCCL still runs, through the CPU
  or through another GPU's NIC (PXN), at less bandwidth - a design limit of the board, not a fault a reboot or a role
  mends.  Grace boards (GB200/GB300) are not judged on this: their GPUs reach the PCIe NICs through the Grace CPU, and
  ``topo -m`` shows ``SYS`` for every GPU-NIC pair of a healthy tray (sgl-project/sglang#11208).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_topo import nvlinks

PASS = 'pass'  # nosec B105
WARN = 'warn'
FAIL = 'fail'
SKIP = 'skip'


# NVLinks per GPU by product name (nvidia-smi ``product_name``), first match wins. Sources (tests/fixtures/SOURCES.md
# has the captures): A100 SXM4 NV12 (stas00/ml-engineering 8x A100 capture; NVIDIA/nccl#1505 DGX A100); H100 SXM5
# NV18 (stas00/ml-engineering 8x H100; NVIDIA/nccl#1453); H200 NV18 (../shared/reference/REALITY.md R29: HGX H200 as
# H100); H20 NV18 (vllm-project/vllm#5001); B200 NV18 (vllm-project/vllm#24513, unslothai/unsloth#3872); B300 NV18
# (sgl-project/sglang#28659); GB200 NV18 (sgl-project/sglang#11208, NVIDIA/k8s-test-infra#371 nvlink -s: links
# 0-17); GB300 NV18 is a guess (no public topo -m capture found: Blackwell Ultra keeps NVLink 5, as the B300 capture
# shows NV18).
NVLINKS = (
    (re.compile(r'A100-SXM|A800-SXM'), 12, 'A100 SXM4'),
    (re.compile(r'\bH100 80GB HBM3\b|\bH100[- ]SXM|\bH800\b(?! PCIe)'), 18, 'H100 SXM5'),
    (re.compile(r'\bH200\b(?! NVL)'), 18, 'H200 SXM'),
    (re.compile(r'\bH20\b'), 18, 'H20'),
    (re.compile(r'\bGB200\b'), 18, 'GB200'),
    (re.compile(r'\bGB300\b'), 18, 'GB300 (guess)'),
    (re.compile(r'\bB200\b'), 18, 'B200'),
    (re.compile(r'\bB300\b'), 18, 'B300'),
)
# PCIe cards: NVLink, where present, is a bridge between two cards (NVL products) - not judged.
PCIE_MODEL = re.compile(r'PCIe|\bNVL\b|\bL40|\bL4\b|\bA10G?\b|\bT4\b|RTX|Quadro|GeForce')
# Grace-Blackwell superchips: GPUs reach the NICs through the Grace CPU (C2C), never behind a shared PCIe switch.
GRACE_MODEL = re.compile(r'\bG[BH]\d{3}\b')

RAIL_LINKS = ('PIX', 'PXB')

EXPECTED = ('every GPU pair at NV<n>, n the NVLinks per GPU of the model with NVSwitches (else the best pair of the '
            'node); every GPU with a NIC at PIX or PXB where the matrix shows NICs')


def model_nvlinks(name):
    """``(links, label)`` for a GPU product name from NVLINKS; ``(None, None)`` for a model not in the table."""
    for pattern, links, label in NVLINKS:
        if pattern.search(name or ''):
            return links, label
    return None, None


def _pair_cell(matrix, a, b):
    """The worse of the two cells of a GPU pair (the matrix is symmetric on real nodes)."""
    one = matrix['links'].get(a, {}).get(b)
    two = matrix['links'].get(b, {}).get(a)
    if one is None or two is None:
        return one or two
    return one if nvlinks(one) <= nvlinks(two) else two


def _by_index(gpus):
    out = {}
    for gpu in gpus or []:
        try:
            out['GPU{0}'.format(int(gpu.get('index')))] = gpu
        except (TypeError, ValueError):
            continue
    return out


def _gpu_text(name, gpu):
    if gpu and gpu.get('pci_bus_id'):
        return '{0} ({1})'.format(name, gpu['pci_bus_id'])
    return name


def _nic_text(matrix, nic):
    real = matrix.get('nic_names', {}).get(nic)
    return '{0} ({1})'.format(nic, real) if real else nic


def _shorten(items, most=8):
    if len(items) <= most:
        return '; '.join(items)
    return '{0}; and {1} more'.format('; '.join(items[:most]), len(items) - most)


def check(matrix, gpus, switched):
    """``(status, expected, observed)`` of ``gpu.topology``.

    ``matrix``: parse_topo_matrix's result; ``gpus``: ``ansible_facts.nvidia.gpus`` (index, name, pci_bus_id);
    ``switched``: True when the node has NVSwitches (see the module docstring), False without, None when unknown.
    """
    gpus = gpus or []
    if len(gpus) < 2:
        return SKIP, EXPECTED, 'one GPU: no GPU pair to check' if gpus else 'nvidia-smi lists no GPU'
    names = sorted(set(g.get('name') or 'unknown model' for g in gpus))
    if all(PCIE_MODEL.search(name) for name in names):
        return SKIP, EXPECTED, 'PCIe GPUs ({0}): NVLink, if any, is a bridge between two cards; not checked'.format(
            ', '.join(names))
    listed = _by_index(gpus)
    order = [g for g in matrix['gpus'] if g in listed] or list(matrix['gpus'])
    absent = sorted(set(listed) - set(matrix['gpus']))
    problems = []
    if absent:
        problems.append('nvidia-smi topo -m has no row for {0}'.format(', '.join(absent)))
    pairs = [(a, b, _pair_cell(matrix, a, b)) for i, a in enumerate(order) for b in order[i + 1:]]
    best = max([nvlinks(cell) for _a, _b, cell in pairs] or [0])
    table = [model_nvlinks(name) for name in names]
    known = [links for links, _label in table if links]
    if known and len(known) == len(table) and switched:
        want = min(known)
        basis = '{0} with NVSwitches: NV{1}'.format(', '.join(label for _links, label in table), want)
    elif best:
        want = best
        basis = 'every pair as the best pair, NV{0} ({1})'.format(
            best, 'no NVSwitch on this node' if switched is False and known else
            'NVSwitches unknown' if known else 'model not in the NVLink table')
    elif known:
        want = min(known)
        basis = '{0}: NV{1}'.format(', '.join(label for _links, label in table), want)
    else:
        return SKIP, EXPECTED, 'no NVLink between the GPUs ({0}: a PCIe board)'.format(', '.join(names))
    degraded = []
    for a, b, cell in pairs:
        if nvlinks(cell) < want:
            degraded.append('{0}-{1}: {2}, want NV{3}'.format(
                _gpu_text(a, listed.get(a)), _gpu_text(b, listed.get(b)),
                cell if nvlinks(cell) else '{0} (no NVLink)'.format(cell), want))
    if degraded:
        problems.append('NVLink degraded on {0} of {1} GPU pairs: {2}'.format(len(degraded), len(pairs),
                                                                              _shorten(degraded)))
    observed = ['{0} GPU pairs at NV{1} ({2})'.format(len(pairs) - len(degraded), want, basis)]
    warnings = []
    if matrix['nics']:
        if any(GRACE_MODEL.search(name) for name in names):
            observed.append('{0} NICs; GPU-NIC rails not judged on a Grace board (the NICs hang off the Grace '
                            'CPU)'.format(len(matrix['nics'])))
        else:
            railed = 0
            for gpu in order:
                row = matrix['links'].get(gpu, {})
                near = [nic for nic in matrix['nics'] if row.get(nic) in RAIL_LINKS]
                if near:
                    railed += 1
                    continue
                closest = sorted(matrix['nics'], key=lambda nic: _distance(row.get(nic)))[0]
                warnings.append('{0}: no NIC at PIX or PXB (no GPUDirect RDMA rail); nearest {1} at {2}'.format(
                    _gpu_text(gpu, listed.get(gpu)), _nic_text(matrix, closest), row.get(closest)))
            observed.append('{0} of {1} GPUs with a NIC at PIX/PXB'.format(railed, len(order)))
    text = '; '.join(problems + warnings + observed)
    if problems:
        return FAIL, EXPECTED, text
    if warnings:
        return WARN, EXPECTED, text
    return PASS, EXPECTED, text


_DISTANCE = ('PIX', 'PXB', 'PHB', 'NODE', 'SYS')


def _distance(cell):
    return _DISTANCE.index(cell) if cell in _DISTANCE else len(_DISTANCE)


def is_switched(fabric_kind, gpus):
    """Whether the GPUs' NVLinks go through NVSwitches: ``fabric_kind`` (the kernel facts' ``pci`` or ``nvlink5``,
    see _nvswitch_fabric.nvswitch_fabric) or a GPU in a multi-node NVLink domain (GB200/GB300 trays: the switches are in
    other trays). None when neither is known."""
    if fabric_kind in ('pci', 'nvlink5'):
        return True
    for gpu in gpus or []:
        uuid = str((gpu.get('fabric') or {}).get('cluster_uuid') or '')
        if uuid and not re.match(r'^[0-]*$', uuid):
            return True
    if fabric_kind is None:
        return None
    return False


def from_facts(facts_nvidia, fabric_kind):
    """``(status, expected, observed)`` of ``gpu.topology`` from the ``ansible_facts.nvidia`` namespace, whose
    ``topology`` key gpu_node_facts fills (``matrix``, or ``error`` when topo -m failed; absent when it was not
    asked for)."""
    nvidia = facts_nvidia if isinstance(facts_nvidia, dict) else {}
    gpus = nvidia.get('gpus') if isinstance(nvidia.get('gpus'), list) else []
    if len(gpus) < 2:
        return SKIP, EXPECTED, 'one GPU: no GPU pair to check' if gpus else 'nvidia-smi lists no GPU'
    topology = nvidia.get('topology')
    if not isinstance(topology, dict):
        return SKIP, EXPECTED, ('nvidia-smi topo -m was not gathered (gpu_node_facts gathers it unless '
                                'nvidia_topology is false)')
    if topology.get('error'):
        return FAIL, EXPECTED, 'nvidia-smi topo -m failed: {0}'.format(topology['error'])
    matrix = topology.get('matrix')
    if not isinstance(matrix, dict):
        return FAIL, EXPECTED, 'nvidia-smi topo -m gave no matrix'
    return check(matrix, gpus, is_switched(fabric_kind, gpus))
