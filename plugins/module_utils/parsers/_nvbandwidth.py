# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""What NVIDIA's ``nvbandwidth`` prints, as text and as JSON (``-j``): pure parsers, one result shape.

No Ansible import; Python 3.6 and later.  Both raise :class:`NvbandwidthParseError` naming the line (or the JSON key)
that does not fit.

The layout, from NVIDIA/nvbandwidth v0.8 (``output.cpp``, ``json_output.cpp``, ``inline_common.h``) and the captures
of tests/fixtures/nvbandwidth (SOURCES.md).  Text: ``nvbandwidth Version: v0.8``, ``Built from Git version: ..``,
(multi-node builds: ``MPI version: ..``), ``CUDA Runtime Version: <n>``, ``CUDA Driver Version: <n>``, ``Driver
Version: <x>``, from v0.5 or so the host name alone on a line, one ``Device <n>: <name> (<domain>:<bus>:<dev>)`` per
GPU (v0.4: the name only), then per test case ``Running <name>.``, a description (``memcpy CE CPU(row) -> GPU(column)
bandwidth (GB/s)``), a header of column labels, one row per row label with ``N/A`` where a pair is not measured, an
empty line and ``SUM <name> <value>`` (with ``-v`` also ``MIN``, ``MAX``, ``AVG``).  A test that cannot run on the
node prints ``Waived: `` (without its name), one that fails ``Error: <why>``.  The ``NOTE:`` paragraph is printed
first (v0.4) or last (v0.8).  JSON: ``{"nvbandwidth": {"version", "git_version", "CUDA Runtime Version", "Driver
Version", "GPU Device list", "testcases": [{"name", "status", "bandwidth_description", "bandwidth_matrix" (rows of
strings, "N/A"), "sum", ("min", "max", "average" with -v), "error"}], "error", "warning"}}``.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import json
import re


class NvbandwidthParseError(ValueError):
    """The text is not nvbandwidth output; the message names the line or the JSON key."""


_HEADER_FIELDS = (
    ('version', re.compile(r'^nvbandwidth Version: (\S+)$')),
    ('git_version', re.compile(r'^Built from Git version:(?: (.*))?$')),
    ('mpi_version', re.compile(r'^MPI version: (.*)$')),
    ('cuda_runtime', re.compile(r'^CUDA Runtime Version: (\d+)$')),
    ('cuda_driver', re.compile(r'^CUDA Driver Version: (\d+)$')),
    ('driver_version', re.compile(r'^Driver Version: (\S+)$')),
)
_DEVICE = re.compile(r'^Device (\d+): (.*?)(?: \(([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\))?$')
_PROCESS = re.compile(r'^Process (\d+) \((\S+)\): device (\d+): (.*?)(?: \(([0-9a-fA-F:]+)\))?$')
_RUNNING = re.compile(r'^Running (\S+)\.$')
_SUM = re.compile(r'^(SUM|MIN|MAX|AVG) (\S+) ([0-9.eE+-]+|nan|inf)$')
_PERF = re.compile(r'^&&&& PERF (\S+) ([0-9.eE+-]+)(\S*)$')
_STATUS = re.compile(r'^(Waived|Error|ERROR|Not Found): ?(.*)$')
_HOSTNAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*$')
_NOTE_LINES = ('Additional system-specific tuning may be required to achieve maximal peak bandwidth.',
               'Performance can vary with software drivers, hardware clocks, and system topology.')
_INT_KEYS = ('cuda_runtime', 'cuda_driver')


def _fail(number, line, what):
    raise NvbandwidthParseError('line {0} {1!r}: {2}'.format(number, line, what))


def _value(cell):
    if cell == 'N/A':
        return None
    try:
        return float(cell)
    except ValueError:
        raise NvbandwidthParseError('{0!r} is neither a number nor N/A'.format(cell))


def _new_result():
    return {'version': None, 'git_version': None, 'mpi_version': None, 'cuda_runtime': None, 'cuda_driver': None,
            'driver_version': None, 'host': None, 'devices': [], 'testcases': [], 'waived': 0, 'error': None,
            'warnings': [], 'notes': []}


def _matrix(key, description=None):
    return {'key': key, 'description': description, 'column_labels': [], 'row_labels': [], 'matrix': [],
            'sum': None, 'min': None, 'max': None, 'average': None}


def _testcase(name, status='Running'):
    """A test case; its first matrix's fields are the case's own (``description``, ``matrix``, ``sum``...), every
    matrix (bidirectional device tests print three: ``<name>_read1``, ``_read2``, ``_total``) in ``matrices``."""
    case = _matrix(name)
    case.update(name=name, status=status, error=None, matrices=[])
    return case


def parse_nvbandwidth_text(text):
    """nvbandwidth's text output -> the result dict (see :func:`parse_nvbandwidth`)."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    out = _new_result()
    current = None
    block = None
    state = 'header'  # header | description | columns | rows | done
    for number, raw in enumerate((text or '').splitlines(), 1):
        line = raw.strip()
        if not line:
            if state == 'rows':
                state = 'done'
            continue
        matched = False
        for key, pattern in _HEADER_FIELDS:
            match = pattern.match(line)
            if match:
                # a build from a release tarball has no git: "Built from Git version: " (output.cpp), kept as ''
                out[key] = int(match.group(1)) if key in _INT_KEYS else (match.group(1) or '')
                matched = True
                break
        if matched:
            continue
        if line.startswith('NOTE:') or line in _NOTE_LINES:
            out['notes'].append(line)
            continue
        if line.startswith('Warning:'):
            out['warnings'].append(line)
            continue
        match = _DEVICE.match(line)
        if match and current is None:
            out['devices'].append({'index': int(match.group(1)), 'name': match.group(2), 'bus_id': match.group(3)})
            continue
        match = _PROCESS.match(line)
        if match and current is None:
            out['devices'].append({'index': int(match.group(3)), 'name': match.group(4), 'bus_id': match.group(5),
                                   'process': int(match.group(1)), 'host': match.group(2)})
            continue
        match = _RUNNING.match(line)
        if match:
            current = _testcase(match.group(1))
            block = None
            out['testcases'].append(current)
            state = 'description'
            continue
        match = _STATUS.match(line)
        if match:
            status = 'Error' if match.group(1) == 'ERROR' else match.group(1)
            if status == 'Waived':
                out['waived'] += 1
            elif current is not None and current['status'] == 'Running' and block is None:
                current['status'], current['error'] = status, match.group(2)
                state = 'done'
            else:
                out['error'] = match.group(2) or status
            continue
        match = _SUM.match(line)
        if match:
            key = match.group(2)
            if block is None or not (key == current['name'] or key.startswith(current['name'] + '_')):
                _fail(number, raw, '{0} names a test case that is not the one running ({1})'.format(
                    match.group(1), current['name'] if current else 'none'))
            block['key'] = key
            block[{'SUM': 'sum', 'MIN': 'min', 'MAX': 'max', 'AVG': 'average'}[match.group(1)]] = \
                float(match.group(3))
            if match.group(1) == 'SUM':
                current['status'] = 'Passed'
            state = 'done'
            continue
        match = _PERF.match(line)
        if match and block is not None and match.group(1).startswith(current['name']):
            block['key'], block['sum'], block['unit'] = match.group(1), float(match.group(2)), match.group(3)
            current['status'] = 'Passed'
            state = 'done'
            continue
        if state == 'header' and current is None and _HOSTNAME.match(line) and out['host'] is None:
            out['host'] = line
            continue
        if state in ('description', 'done') and current is not None and current['status'] in ('Running', 'Passed'):
            # a matrix's description: the first of the test case, or the next one of a bidirectional test
            block = _matrix(current['name'], line)
            current['matrices'].append(block)
            state = 'columns'
            continue
        if state == 'columns':
            block['column_labels'] = line.split()
            state = 'rows'
            continue
        if state == 'rows':
            tokens = line.split()
            if len(tokens) != len(block['column_labels']) + 1:
                _fail(number, raw, 'a matrix row of {0}: expected a label and {1} values, found {2} fields'.format(
                    current['name'], len(block['column_labels']), len(tokens)))
            try:
                values = [_value(token) for token in tokens[1:]]
            except NvbandwidthParseError as exc:
                _fail(number, raw, str(exc))
            block['row_labels'].append(tokens[0])
            block['matrix'].append(values)
            continue
        _fail(number, raw, 'not a line nvbandwidth prints here (state: {0})'.format(state))
    for case in out['testcases']:
        _lift(case)
    return out


_MATRIX_FIELDS = ('description', 'column_labels', 'row_labels', 'matrix', 'sum', 'min', 'max', 'average')


def _lift(case):
    """The first matrix's fields become the test case's own (one matrix is the usual case)."""
    if case['matrices']:
        first = case['matrices'][0]
        for key in _MATRIX_FIELDS:
            case[key] = copy.deepcopy(first[key])


def parse_nvbandwidth_json(text):
    """nvbandwidth's ``-j`` output -> the result dict (see :func:`parse_nvbandwidth`).  Text printed before the
    document (nvbandwidth's own ``WARNING:`` lines go to the same stream) is kept in ``warnings``."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    text = text or ''
    start = text.find('{')
    if start < 0:
        raise NvbandwidthParseError('no JSON document in the output')
    try:
        document = json.loads(text[start:])
    except ValueError as exc:
        raise NvbandwidthParseError('the JSON document does not parse: {0}'.format(exc))
    if not isinstance(document, dict) or not isinstance(document.get('nvbandwidth'), dict):
        raise NvbandwidthParseError('expected {"nvbandwidth": {...}} at the top of the JSON document')
    body = document['nvbandwidth']
    out = _new_result()
    out['warnings'] = [line.strip() for line in text[:start].splitlines() if line.strip()]
    out['version'] = body.get('version')
    out['git_version'] = body.get('git_version')
    out['driver_version'] = body.get('Driver Version')
    runtime = body.get('CUDA Runtime Version')
    out['cuda_runtime'] = runtime if isinstance(runtime, int) else None
    out['error'] = body.get('error')
    if body.get('warning'):
        out['warnings'].append(body['warning'])
    for entry in body.get('GPU Device list') or []:
        match = re.match(r'^(\d+): (.*?)(?: \(([0-9a-fA-F:]+)\))?(?:: \((.*)\))?$', str(entry))
        if not match:
            raise NvbandwidthParseError('"GPU Device list" entry {0!r} is not "<n>: <name> (<bus>): (<host>)"'.format(
                entry))
        out['devices'].append({'index': int(match.group(1)), 'name': match.group(2), 'bus_id': match.group(3)})
        out['host'] = match.group(4) or out['host']
    cases = body.get('testcases') or []
    if not isinstance(cases, list):
        raise NvbandwidthParseError('"testcases" is not a list')
    for position, case in enumerate(cases):
        if not isinstance(case, dict) or not case.get('name'):
            raise NvbandwidthParseError('testcases[{0}] has no "name"'.format(position))
        result = _testcase(case['name'], case.get('status') or '')
        result['description'] = (case.get('bandwidth_description') or '').strip() or None
        result['error'] = case.get('error')
        matrix = case.get('bandwidth_matrix') or []
        for row_number, row in enumerate(matrix):
            if not isinstance(row, list):
                raise NvbandwidthParseError('testcases[{0}] ({1}) bandwidth_matrix[{2}] is not a list'.format(
                    position, case['name'], row_number))
            try:
                result['matrix'].append([_value(str(token)) for token in row])
            except NvbandwidthParseError as exc:
                raise NvbandwidthParseError('testcases[{0}] ({1}) bandwidth_matrix[{2}]: {3}'.format(
                    position, case['name'], row_number, exc))
            result['row_labels'].append(str(row_number))
        if matrix:
            result['column_labels'] = [str(n) for n in range(max(len(row) for row in result['matrix']))]
        for key in ('sum', 'min', 'max', 'average'):
            if case.get(key) is not None:
                result[key] = float(case[key])
        if result['matrix']:
            result['matrices'].append(dict((key, copy.deepcopy(result[key])) for key in _MATRIX_FIELDS + ('key',)))
        if result['status'] == 'Waived':
            out['waived'] += 1
        out['testcases'].append(result)
    return out


def parse_nvbandwidth(text):
    """nvbandwidth output, text or JSON (``-j``), -> dict.

    ``version``, ``git_version``, ``mpi_version``, ``cuda_runtime``/``cuda_driver`` (ints, e.g. 12080),
    ``driver_version``, ``host``, ``devices`` (``index``, ``name``, ``bus_id`` or None), ``testcases`` (``name``,
    ``status``: ``Passed``, ``Waived``, ``Error`` or ``Running`` when the output ended inside the test,
    ``description``, ``column_labels``, ``row_labels``, ``matrix`` (floats, None for N/A), ``sum``, ``min``,
    ``max``, ``average``, ``error``; ``matrices``: every matrix of the case, the first being the case itself),
    ``waived`` (how many were waived), ``error``, ``warnings``, ``notes``.
    """
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    body = (text or '').strip()
    if body.startswith('{') or (body and '"nvbandwidth"' in body and not body.startswith('nvbandwidth Version')):
        return parse_nvbandwidth_json(text)
    return parse_nvbandwidth_text(text)


def testcase(parsed, name):
    """The test case ``name`` of a parsed run, or None."""
    for case in parsed['testcases']:
        if case['name'] == name:
            return case
    return None


def cells(case):
    """``[(row label, column label, GB/s)]`` of the measured cells of a test case (N/A cells left out)."""
    out = []
    for row_label, row in zip(case['row_labels'], case['matrix']):
        for column_label, value in zip(case['column_labels'], row):
            if value is not None:
                out.append((row_label, column_label, value))
    return out
