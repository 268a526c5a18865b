# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""``nvidia-smi nvlink --status`` (``-s``) and ``nvidia-smi nvlink --errorcounters`` (``-e``): pure parsers.

No Ansible import; Python 3.6 and later.  Both raise :class:`NvlinkParseError` naming the line that does not fit.

``-s`` prints one block per GPU (captures in tests/fixtures/nvlink, SOURCES.md)::

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)
    <TAB> Link 0: 26.562 GB/s
    <TAB> Link 4: <inactive>

A GPU whose links are all down prints ``NVML: Unable to retrieve NVLink information as all links are inactive``
(``inActive`` on 555.42.02) instead of link lines; a GPU without NVLink prints nothing at all (an empty output on an
A10).  Indentation differs between copies (a tab and a space from nvidia-smi, spaces in re-typed copies, markdown
indentation in documentation): whitespace around a line carries no meaning here.

``-e`` prints, per GPU, three lines per link on NVLink 4 and older (``Link 0: Replay Errors: 0``, ``Recovery
Errors``, ``CRC Errors``), links separated by empty lines.  NVLink 5 boards report other counters through NVML
(``Malformed packet Errors``, ``Symbol Errors``, ...: DataDog/datadog-agent PR #55966 maps ``nvlink -e`` to them); no
public capture of their ``-e`` text was found, so every ``Link <n>: <counter>: <count>`` line is read, whatever the
counter's name.  ``nvidia-smi nvlink -gt`` is not an error report: it prints throughput counters (``-gt d``: data
payload in KiB), so nothing here reads it.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re


class NvlinkParseError(ValueError):
    """The text is not what ``nvidia-smi nvlink -s`` / ``-e`` prints; the message names the line."""


_GPU = re.compile(r'^GPU (\d+): (.*?)(?: \(UUID: ([^)]*)\))?$')
_LINK_SPEED = re.compile(r'^Link (\d+): ([0-9]+(?:\.[0-9]+)?) GB/s$')
_LINK_INACTIVE = re.compile(r'^Link (\d+): <inactive>$', re.IGNORECASE)
_ALL_INACTIVE = re.compile(r'^(?:NVML: )?Unable to retrieve NVLink information as all links are inactive$',
                           re.IGNORECASE)
_LINK_COUNTER = re.compile(r'^Link (\d+): ([A-Za-z][A-Za-z0-9 ./()_-]*?): *(-?[0-9]+|N/A)$')


def _fail(number, line, what):
    raise NvlinkParseError('line {0} {1!r}: {2}'.format(number, line, what))


def _walk(text, what):
    """The per-GPU sections of nvidia-smi's output: ``(gpu, number, raw, line)`` for each line that is not empty;
    a "GPU <n>: ..." line gives a new ``gpu`` (``index``, ``name``, ``uuid``) and ``line`` None, every other line
    the GPU it belongs to and ``line`` stripped.  A ``what`` line before any GPU is an error."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    gpu = None
    for number, raw in enumerate((text or '').splitlines(), 1):
        line = raw.strip()
        match = _GPU.match(line)
        if match:
            gpu = {'index': int(match.group(1)), 'name': match.group(2).strip(), 'uuid': match.group(3)}
            yield gpu, number, raw, None
        elif gpu is None and line:
            _fail(number, raw, 'expected a "GPU <n>: <name> (UUID: ...)" line before any {0} line'.format(what))
        elif line:
            yield gpu, number, raw, line


def parse_nvlink_status(text):
    """``nvidia-smi nvlink -s`` -> ``{'gpus': [...]}``.

    Each GPU: ``index``, ``name``, ``uuid`` (None when the header has none), ``links`` (``[{'link', 'active',
    'speed_gbps'}]`` in the printed order; ``speed_gbps`` None for an inactive link), ``all_inactive`` (NVML's
    "all links are inactive" line), ``active`` and ``inactive`` (the counts).  An empty text is no GPU with NVLink.
    """
    gpus = []
    for current, number, raw, line in _walk(text, 'link'):
        if line is None:
            current.update(links=[], all_inactive=False)
            gpus.append(current)
            continue
        if _ALL_INACTIVE.match(line):
            if current['links']:
                _fail(number, raw, 'GPU {0} already listed links before NVML said all are inactive'.format(
                    current['index']))
            current['all_inactive'] = True
            continue
        match = _LINK_SPEED.match(line)
        if match:
            current['links'].append({'link': int(match.group(1)), 'active': True,
                                     'speed_gbps': float(match.group(2))})
            continue
        match = _LINK_INACTIVE.match(line)
        if match:
            current['links'].append({'link': int(match.group(1)), 'active': False, 'speed_gbps': None})
            continue
        _fail(number, raw, 'expected "Link <n>: <speed> GB/s", "Link <n>: <inactive>" or NVML\'s "all links are '
                           'inactive" line')
    for gpu in gpus:
        seen = [link['link'] for link in gpu['links']]
        if len(set(seen)) != len(seen):
            raise NvlinkParseError('GPU {0}: a link is listed twice ({1})'.format(
                gpu['index'], ', '.join(str(n) for n in seen)))
        gpu['active'] = sum(1 for link in gpu['links'] if link['active'])
        gpu['inactive'] = len(gpu['links']) - gpu['active']
    return {'gpus': gpus}


def parse_nvlink_errors(text):
    """``nvidia-smi nvlink -e`` -> ``{'gpus': [{'index', 'name', 'uuid', 'links': {link: {counter: count}}}]}``.

    ``count`` is an int, or None where nvidia-smi printed ``N/A``.  Counter names are kept as printed
    (``Replay Errors``, ``Recovery Errors``, ``CRC Errors`` on NVLink 4 and older).
    """
    gpus = []
    for current, number, raw, line in _walk(text, 'counter'):
        if line is None:
            current['links'] = {}
            gpus.append(current)
            continue
        match = _LINK_COUNTER.match(line)
        if not match:
            _fail(number, raw, 'expected "Link <n>: <counter name>: <count>"')
        link, name, value = int(match.group(1)), match.group(2).strip(), match.group(3)
        counters = current['links'].setdefault(link, {})
        if name in counters:
            _fail(number, raw, 'GPU {0} link {1}: counter {2!r} is listed twice'.format(current['index'], link, name))
        counters[name] = None if value == 'N/A' else int(value)
    return {'gpus': gpus}


def counter_total(gpu, names=None):
    """The sum of the counters of one GPU of :func:`parse_nvlink_errors` (only ``names`` when given); N/A is 0."""
    total = 0
    for counters in gpu['links'].values():
        for name, value in counters.items():
            if value and (names is None or name in names):
                total += value
    return total
