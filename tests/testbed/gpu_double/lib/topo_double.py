# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""``nvidia-smi topo -m`` of the GPU double, from the hardware profile (see REALITY.md for the sources).

Layout as the real 590 driver prints it (nvidia_gpu_exporter capture bundles; vllm-project/vllm#24513 for the
8-GPU, 8-NIC shape): the header tab separated and underlined with ANSI escapes, `` X `` on the diagonal, the GPU rows
ending in CPU Affinity, NUMA Affinity, an empty column and GPU NUMA ID, the NIC rows ending in four empty columns,
then the Legend and the NIC Legend.

Relations: every GPU pair at ``NV<profile nvlinks>``; GPU n and the n-th compute NIC (``connectx`` entries that are
not the NVLink 5 switch bridge, in PCI order) at ``PIX`` (on x86 HGX each GPU shares a PCIe switch with its rail NIC);
other devices ``NODE`` on the same NUMA node, ``SYS`` across. On a Grace board (profile ``grace``) every GPU-NIC pair
is ``SYS`` (sgl-project/sglang#11208, GB200). Faults: ``nvlink-down`` (lines ``<gpu> <gpu> [links left]``, default
``0 1 0``): that pair shows ``NV<links left>``, or with none left the PCIe relation (``NODE``/``SYS``), as the B200 of
vllm-project/vllm#16336 shows for a GPU that lost its NVLinks; ``nvlink-inactive`` lowers every pair of the GPUs it
names to the links they have up (none up: the PCIe relation).
"""
from __future__ import absolute_import, division, print_function

import gpudouble as gd

LEGEND = """Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def _gpu_numa(profile, position, count):
    """NUMA node of the GPU at ``position``: the profile's list, else the first half 0, the second 1."""
    numa = (profile.get('topology') or {}).get('gpu_numa_node')
    if numa and position < len(numa):
        return numa[position]
    return 0 if position < max(1, count // 2) else 1


def down_pairs(profile, gpus):
    """{(bus id, bus id): links left} named by the nvlink-down fault (empty when it is not active)."""
    if not gd.fault_active(gd.FAULT_NVLINK_DOWN):
        return {}
    lines = gd.fault_lines(gd.FAULT_NVLINK_DOWN) or ['0 1 0']
    out = {}
    for line in lines:
        parts = line.split()
        if len(parts) < 2:
            continue
        a, b = gd._match_gpu(gpus, parts[0]), gd._match_gpu(gpus, parts[1])
        if a is None or b is None or a is b:
            continue
        try:
            left = int(parts[2]) if len(parts) > 2 else 0
        except ValueError:
            left = 0
        out[tuple(sorted((a['pci_bus_id'], b['pci_bus_id'])))] = left
    return out


def devices(profile):
    """[(name, kind, numa, extra)] in column order: GPUs (present ones, nvidia-smi indexes), then NICs in PCI order."""
    gpus = gd.present_gpus(profile)
    everyone = profile['gpus']
    positions = dict((g['pci_bus_id'], i) for i, g in enumerate(everyone))
    out = []
    for gpu in gpus:
        out.append(('GPU{0}'.format(gpu['index']), 'gpu', _gpu_numa(profile, positions[gpu['pci_bus_id']],
                                                                    len(everyone)), gpu))
    nics = sorted(profile.get('connectx', []), key=lambda d: d['bus_id'])
    compute = [d for d in nics if not d.get('bridge')]
    for n, nic in enumerate(nics):
        if nic in compute:
            rail = compute.index(nic)
            numa = _gpu_numa(profile, rail, len(everyone)) if rail < len(everyone) else 0
        else:
            rail, numa = None, 0
        out.append(('NIC{0}'.format(n), 'nic', numa, {'rail': rail, 'ib': 'mlx5_{0}'.format(n)}))
    return out


def relation(profile, one, two, down):
    """The matrix cell between two devices of devices()."""
    if one is two:
        return ' X '
    grace = bool((profile.get('topology') or {}).get('grace'))
    pcie = 'NODE' if one[2] == two[2] else 'SYS'
    if one[1] == 'gpu' and two[1] == 'gpu':
        key = tuple(sorted((one[3]['pci_bus_id'], two[3]['pci_bus_id'])))
        links = down.get(key, profile.get('nvlinks', 0))
        # nvlink-inactive: a GPU reaches its peers through the links it has up (none up: the PCIe relation, as
        # vllm-project/vllm#16336 shows; the partial NV<n> is arithmetic, a guess)
        inactive = gd.nvlink_inactive(profile)
        for gpu in (one, two):
            links = min(links, profile.get('nvlinks', 0) - len(inactive.get(gpu[3]['pci_bus_id'], ())))
        return 'NV{0}'.format(links) if links else pcie
    if one[1] == 'nic' and two[1] == 'nic':
        return pcie
    gpu, nic = (one, two) if one[1] == 'gpu' else (two, one)
    if grace:
        return 'SYS'
    position = [g['pci_bus_id'] for g in profile['gpus']].index(gpu[3]['pci_bus_id'])
    if nic[3]['rail'] is not None and nic[3]['rail'] == position:
        return 'PIX'
    return pcie


def render_topo(profile):
    """The text of ``nvidia-smi topo -m``."""
    topo = profile.get('topology') or {}
    devs = devices(profile)
    down = down_pairs(profile, gd.present_gpus(profile))
    names = [d[0] for d in devs]
    lines = ['\t\x1b[4m' + '\t'.join(names + ['CPU Affinity', 'NUMA Affinity', 'GPU NUMA ID']) + '\x1b[0m']
    cpus = topo.get('cpu_affinity') or ['0-55,112-167', '56-111,168-223']
    numa_affinity = topo.get('numa_affinity') or ['0', '1']
    gpu_numa_id = topo.get('gpu_numa_id') or []
    positions = dict((g['pci_bus_id'], i) for i, g in enumerate(profile['gpus']))
    for dev in devs:
        cells = [relation(profile, dev, other, down) for other in devs]
        if dev[1] == 'gpu':
            position = positions[dev[3]['pci_bus_id']]
            numa = dev[2]
            gid = gpu_numa_id[position] if position < len(gpu_numa_id) else 'N/A'
            cells += [cpus[numa % len(cpus)], numa_affinity[numa % len(numa_affinity)], '', str(gid)]
        else:
            cells += ['', '', '', '']
        lines.append(dev[0] + '\t' + '\t'.join(cells))
    text = '\n'.join(lines) + '\n\n' + LEGEND
    nics = [d for d in devs if d[1] == 'nic']
    if nics:
        text += '\nNIC Legend:\n\n' + ''.join('  {0}: {1}\n'.format(d[0], d[3]['ib']) for d in nics)
    return text
