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
  all of them and n is the model's NVLinks per GPU (_fitness_thresholds.MODELS: 12 on A100, 8 on A800 and H800, 18
  on Hopper and Blackwell).  Without NVSwitches (direct-connect boards) or for a model not in the table, every pair
  must show as many links as the best pair of the node.  A pair below that fails, naming both GPUs; a board whose
  model has NVLink but where no pair shows any fails too;
* a hybrid cube-mesh board (V100 SXM2, DGX-1 style: no NVSwitch, pairs at NV1 or NV2, some pairs without NVLink)
  is judged per GPU instead: with all 8 GPUs seen, the NVLinks of each GPU to its peers must add up to the model's
  count (6); a GPU short of it fails, naming the GPU and its pairs.  With fewer GPUs seen (a VM given part of the
  board) the links are reported, not judged;
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
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _fitness_thresholds

PASS = 'pass'  # nosec B105
WARN = 'warn'
FAIL = 'fail'
SKIP = 'skip'


# NVLinks per GPU come from the one table of per-model figures, rules/_fitness_thresholds.py MODELS (``nvlinks``,
# ``topology``), whose sources are named there and in docs/readiness-thresholds.md: NV12 A100 SXM4, NV18 H100/H200/H20/
# B200/B300/GB200/GB300, NV8 A800 SXM4 and H800 SXM5 (NVLink cut to 400 GB/s, 8 links of 50 GB/s), 6 per V100 SXM2
# in the DGX-1 hybrid cube-mesh (pairs at NV1 or NV2, some pairs without NVLink, no NVSwitch).
HYBRID_CUBE_MESH = 'hybrid-cube-mesh'
# The GPUs of a hybrid cube-mesh board (DGX-1, HGX-1): its per-GPU link count holds only when all of them are seen.
HYBRID_CUBE_MESH_GPUS = 8
# PCIe cards: NVLink, where present, is a bridge between two cards (NVL products) - not judged.
PCIE_MODEL = re.compile(r'PCIe|\bNVL\b|\bL40|\bL4\b|\bA10G?\b|\bT4\b|RTX|Quadro|GeForce')
# Grace-Blackwell superchips: GPUs reach the NICs through the Grace CPU (C2C), never behind a shared PCIe switch.
GRACE_MODEL = re.compile(r'\bG[BH]\d{3}\b')

RAIL_LINKS = ('PIX', 'PXB')

EXPECTED = ('every GPU pair at NV<n>, n the NVLinks per GPU of the model with NVSwitches (else the best pair of the '
            'node; on a hybrid cube-mesh board each GPU\'s links to its peers add up to the model\'s); every GPU '
            'with a NIC at PIX or PXB where the matrix shows NICs')


def model_nvlinks(name):
    """``(links, label)`` for a GPU product name from _fitness_thresholds.MODELS (the label without its board in
    parentheses); ``(None, None)`` for a model not in the table."""
    entry = _fitness_thresholds.model_for(name)
    if not entry or not entry.get('nvlinks'):
        return None, None
    return entry['nvlinks'], entry['label'].split(' (')[0]


def model_layout(name):
    """The NVLink layout of a GPU product name (``hybrid-cube-mesh``), or None (links to NVSwitches or a full mesh)."""
    entry = _fitness_thresholds.model_for(name)
    return (entry or {}).get('topology')


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
    if known and len(known) == len(table) and all(model_layout(name) == HYBRID_CUBE_MESH for name in names):
        return _cube_mesh(matrix, order, listed, names, min(known), ', '.join(label for _links, label in table),
                          problems)
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
    return _verdict(matrix, order, listed, names, problems, observed)


def _cube_mesh(matrix, order, listed, names, want, label, problems):
    """A hybrid cube-mesh board: each GPU's NVLinks to its peers add up to ``want`` when the whole board is seen."""
    totals = []
    for gpu in order:
        cells = [(peer, _pair_cell(matrix, gpu, peer)) for peer in order if peer != gpu]
        totals.append((gpu, sum(nvlinks(cell) for _peer, cell in cells), cells))
    if len(order) < HYBRID_CUBE_MESH_GPUS:
        observed = ['{0} of the {1} GPUs of a hybrid cube-mesh board ({2}): NVLinks per GPU {3}, not judged (the '
                    'board\'s {4} per GPU hold with all {1} GPUs only)'.format(
                        len(order), HYBRID_CUBE_MESH_GPUS, label,
                        ', '.join('{0} {1}'.format(g, t) for g, t, _c in totals), want)]
        return _verdict(matrix, order, listed, names, problems, observed)
    short = []
    for gpu, total, cells in totals:
        if total != want:
            short.append('{0}: {1} NVLinks to its peers, want {2} ({3})'.format(
                _gpu_text(gpu, listed.get(gpu)), total, want,
                ' '.join('{0}={1}'.format(peer, cell) for peer, cell in cells if nvlinks(cell)) or 'no NVLink'))
    if short:
        problems.append('NVLink degraded on {0} of {1} GPUs of a hybrid cube-mesh board: {2}'.format(
            len(short), len(order), _shorten(short)))
    observed = ['{0} GPUs with {1} NVLinks each to their peers ({2}, hybrid cube-mesh: pairs at NV1 or NV2, no '
                'NVSwitch)'.format(len(order) - len(short), want, label)]
    return _verdict(matrix, order, listed, names, problems, observed)


def _verdict(matrix, order, listed, names, problems, observed):
    """The NIC rails (a warning), then the status of gpu.topology from ``problems`` and ``observed``."""
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
