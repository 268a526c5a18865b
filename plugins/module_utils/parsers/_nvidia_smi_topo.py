# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""``nvidia-smi topo -m``: the parser.  Pure functions, no Ansible import.

parse_topo_matrix(text) reads the matrix as nvidia-smi prints it (tab separated, the header underlined with ANSI
escapes, ``X`` for self, then ``CPU Affinity``, ``NUMA Affinity`` and, from about 535 on, ``GPU NUMA ID``; NIC rows
after the GPU rows; a ``NIC Legend`` naming each NIC's RDMA device) and copies re-spaced by hand (spaces instead of
tabs). It raises TopologyParseError naming the line that does not fit.  topology_from_output() makes
``ansible_facts.nvidia.topology`` of what the node returned (collect/_nvidia_smi.collect_topology), on the
controller.  The readiness rule ``gpu.topology`` is rules/_topology.py.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re


class TopologyParseError(ValueError):
    """The text is not an ``nvidia-smi topo -m`` matrix."""


_ANSI = re.compile(r'\x1b\[[0-9;]*m')
_DEVICE = re.compile(r'^(GPU\d+|NIC\d+|mlx\d+_\d+)$')
_CELL = re.compile(r'^(X|NV\d+|[A-Z]{3,4})$')
_TRAILERS = ('CPU Affinity', 'NUMA Affinity', 'GPU NUMA ID')
_LEGEND_NIC = re.compile(r'^\s*(NIC\d+)\s*:\s*(\S+)\s*$')


def nvlinks(cell):
    """The NVLink count of a matrix cell (``NV18`` -> 18); 0 for a PCIe-only relation (SYS, NODE, PHB, PXB, PIX)."""
    match = re.match(r'^NV(\d+)$', cell or '')
    return int(match.group(1)) if match else 0


def parse_topo_matrix(text):
    """Parse ``nvidia-smi topo -m``.

    Returns ``{devices, gpus, nics, links, affinity, nic_names}``: ``devices`` the column names in order (GPU0...,
    NIC0...), ``links[row][column]`` the cell text (``X`` on the diagonal), ``affinity[GPUn]`` the CPU/NUMA affinity
    columns of each GPU row (``cpu``, ``numa``, ``gpu_numa``), ``nic_names`` the legend (NIC0 -> mlx5_0; empty when
    the legend is missing, as in copies that left it out).
    """
    lines = [_ANSI.sub('', line).rstrip('\r') for line in (text or '').splitlines()]
    header_at = None
    for at, line in enumerate(lines):
        tokens = line.split()
        if tokens and tokens[0] == 'GPU0' and not re.match(r'^\s*GPU0\s+X(\s|$)', line):
            header_at = at
            break
    if header_at is None:
        raise TopologyParseError('no header line starting with GPU0 (is this nvidia-smi topo -m output?)')
    header = lines[header_at]
    for trailer in _TRAILERS:
        header = header.replace(trailer, ' ')
    devices = header.split()
    bad = [d for d in devices if not _DEVICE.match(d)]
    if bad:
        raise TopologyParseError('header column(s) {0} are neither GPUn, NICn nor mlxN_M: {1!r}'.format(
            ', '.join(bad), lines[header_at]))
    trailers = [t for t in _TRAILERS if t in lines[header_at]]
    links = {}
    affinity = {}
    for line in lines[header_at + 1:]:
        if not line.strip():
            if links:
                break
            continue
        if line.strip().startswith('Legend'):
            break
        tokens = line.split()
        row = tokens[0]
        if row not in devices:
            raise TopologyParseError('row {0!r} is not one of the header\'s devices ({1}): {2!r}'.format(
                row, ', '.join(devices), line))
        cells = tokens[1:1 + len(devices)]
        if len(cells) < len(devices) or any(not _CELL.match(c) for c in cells):
            raise TopologyParseError('row {0} does not have {1} link cells: {2!r}'.format(row, len(devices), line))
        if cells[devices.index(row)] != 'X':
            raise TopologyParseError('row {0} has {1!r}, not X, in its own column'.format(
                row, cells[devices.index(row)]))
        links[row] = dict(zip(devices, cells))
        rest = tokens[1 + len(devices):]
        if row.startswith('GPU'):
            info = {}
            for key, trailer in (('cpu', 'CPU Affinity'), ('numa', 'NUMA Affinity'), ('gpu_numa', 'GPU NUMA ID')):
                if trailer in trailers and rest:
                    info[key] = rest.pop(0)
            affinity[row] = info
    gpus = [d for d in devices if d.startswith('GPU')]
    missing = [g for g in gpus if g not in links]
    if missing:
        raise TopologyParseError('no row for {0}'.format(', '.join(missing)))
    nic_names = {}
    for line in lines:
        match = _LEGEND_NIC.match(line)
        if match:
            nic_names[match.group(1)] = match.group(2)
    return {
        'devices': devices,
        'gpus': gpus,
        'nics': [d for d in devices if not d.startswith('GPU')],
        'links': links,
        'affinity': affinity,
        'nic_names': nic_names,
    }


# The most of the output the node returns (collect/_nvidia_smi.TOPO_MAX_CHARS: the same bound).
TOPO_MAX_CHARS = 256 * 1024


def _said(out, err):
    return '\n'.join(part.strip() for part in (out, err) if part and part.strip())


def topology_from_output(argv, rc, out, err):
    """``ansible_facts.nvidia.topology`` from what ``nvidia-smi topo -m`` printed: ``matrix`` (parse_topo_matrix) and
    ``error`` (None, or why there is no matrix: the exit status and what nvidia-smi said, or the line that does not
    parse)."""
    if rc != 0:
        return {'matrix': None, 'error': '{0} exited with rc {1}: {2}'.format(
            ' '.join(argv), rc, _said(out, err) or 'no output')}
    try:
        return {'matrix': parse_topo_matrix(out), 'error': None}
    except TopologyParseError as exc:
        return {'matrix': None, 'error': 'cannot parse the output of {0}: {1}'.format(' '.join(argv), exc)}


def topology_from_read(read, host=None):
    """The topology from the node's read (``{argv, rc, stdout, stderr}``); a read that is not that, or longer than
    the bound, is the topology's ``error``, naming the host."""
    try:
        argv, rc, out, err = [read[key] for key in ('argv', 'rc', 'stdout', 'stderr')]
        size = len(out) + len(err)
        command = ' '.join(argv)
    except (KeyError, TypeError) as exc:
        return {'matrix': None, 'error': 'host {0}: the node\'s read of nvidia-smi topo -m is garbled ({1}: {2})'.format(
            host, type(exc).__name__, exc)}
    if size > TOPO_MAX_CHARS:
        return {'matrix': None, 'error': 'host {0}: {1} returned {2} characters, more than the {3} the gather '
                                         'returns'.format(host, command, size, TOPO_MAX_CHARS)}
    return topology_from_output(argv, rc, out, err)
