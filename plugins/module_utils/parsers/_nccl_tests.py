# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The text the nccl-tests binaries (``all_reduce_perf`` and its siblings) print: a pure parser.

No Ansible import; Python 3.6 and later.  :func:`parse_nccl_tests` raises :class:`NcclTestsParseError` naming the
line that does not fit.

The layout, from NVIDIA/nccl-tests ``src/util.cu`` (``writeDeviceReport``, ``writeResultHeader``,
``writeResultFooter``) and the captures in tests/fixtures/nccl-tests (SOURCES.md):

* comment lines start with ``#``: from 2.16 or so ``# nccl-tests version <v> nccl-headers=<n> nccl-library=<n>`` and
  ``# Collective test starting: <binary>``; always ``# nThread .. nGpus .. minBytes .. maxBytes .. step: ..`` (the
  keys grew over the releases: ``agg iters``, ``graph``, ``unalign``), ``# Using devices`` and one ``#  Rank ..``
  line per rank (``Group`` since about 2.10), the two-line column header, and at the end ``# Out of bounds values :
  <n> OK|FAILED``, ``# Avg bus bandwidth    : <GB/s>`` (then ``OK``/``FAILED`` when a check value was given) and, in
  recent releases, ``# Collective test concluded: <binary>``;
* one result row per message size: ``size count type redop root`` then, out-of-place and in-place, ``time algbw
  busbw #wrong`` (with ``-I`` four per-iteration columns more, with ``-S`` a timestamp at the end).  ``#wrong`` is
  ``N/A`` when the data check is off (``-c 0``) and for in-place runs of collectives that have none.  Releases before
  2.11 printed no ``root`` column and an ``error`` column (a float) instead of ``#wrong``.

Lines NCCL itself writes to stdout (``NCCL version ...``, ``<host>:<pid>:<tid> [<dev>] NCCL INFO|WARN ...``) are
kept in ``nccl_messages``; other ``#`` comments this parser does not know (``# Reducing maxBytes ...``) in ``notes``.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re


class NcclTestsParseError(ValueError):
    """The text is not nccl-tests output; the message names the line."""


_VERSION = re.compile(r'^#\s*nccl-tests version (\S+)(?: \(([0-9a-f]+)\))?'
                      r'(?: nccl-headers=(\d+) nccl-library=(\d+))?\s*$')
_STARTING = re.compile(r'^#\s*Collective test (starting|concluded): (\S+)\s*$')
_PARAMS = re.compile(r'^#\s*nThread \d+ ')
_PARAM_FIELDS = (
    ('nthread', r'nThread (\d+)'), ('ngpus', r'nGpus (\d+)'), ('min_bytes', r'minBytes (\d+)'),
    ('max_bytes', r'maxBytes (\d+)'), ('warmup_iters', r'warmup iters: (\d+)'), ('iters', r'(?<!warmup )iters: (\d+)'),
    ('agg_iters', r'agg iters: (\d+)'), ('validation', r'validation: (\d+)'), ('graph', r'graph: (\d+)'),
    ('unalign', r'unalign: (\d+)'))
_STEP = re.compile(r'step: (\d+)\((factor|bytes)\)')
_RANK = re.compile(r'^#\s+Rank\s+(\d+)(?:\s+Group\s+(\d+))?\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+'
                   r'\[([^\]]*)\]\s+(.*?)\s*$')
_OOB = re.compile(r'^#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)\s*$')
_AVG = re.compile(r'^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+|nan|inf)(?:\s+(OK|FAILED))?\s*$')
_NCCL_MESSAGE = re.compile(r'^(NCCL version \S+|\S+:\d+:\d+ \[\d+\] NCCL (INFO|WARN|ERROR) .*)$')
_TIMESTAMP = re.compile(r'^\d{4}-\d{2}-\d{2}$')
_HEAD = ('size', 'count', 'type', 'redop')
_TIME_TITLES = ('time', 'cputime')


def _fail(number, line, what):
    raise NcclTestsParseError('line {0} {1!r}: {2}'.format(number, line, what))


def _number(token, kind, number, line, what):
    try:
        return kind(token)
    except ValueError:
        _fail(number, line, '{0} {1!r} is not a number'.format(what, token))


def _columns(tokens, number, line):
    """The column layout from the title line (``# size count type redop root time algbw busbw #wrong ...``)."""
    if tuple(tokens[:4]) != _HEAD:
        _fail(number, line, 'a result header must start with "size count type redop"')
    rest = tokens[4:]
    root = bool(rest) and rest[0] == 'root'
    if root:
        rest = rest[1:]
    stamp = bool(rest) and rest[-1] == 'timestamp'
    if stamp:
        rest = rest[:-1]
    starts = [i for i, token in enumerate(rest) if token in _TIME_TITLES]
    if len(starts) != 2 or starts[0] != 0:
        _fail(number, line, 'expected an out-of-place and an in-place group, each starting with "time"')
    groups = [rest[starts[0]:starts[1]], rest[starts[1]:]]
    if groups[0] != groups[1] or groups[0][1:4] not in (['algbw', 'busbw', '#wrong'], ['algbw', 'busbw', 'error']):
        _fail(number, line, 'expected "time algbw busbw #wrong" (or "error") for out-of-place and in-place')
    return {'root': root, 'group': groups[0], 'timestamp': stamp}


def _group(titles, values, number, line):
    out = {}
    for title, cell in zip(titles, values):
        key = {'time': 'time_us', 'cputime': 'cputime_us', 'algbw': 'algbw', 'busbw': 'busbw'}.get(title)
        if key:
            out[key] = None if cell == 'N/A' else _number(cell, float, number, line, title)
        elif title == '#wrong':
            out['wrong'] = None if cell == 'N/A' else int(_number(cell, float, number, line, '#wrong'))
        elif title == 'error':
            out['error'] = None if cell == 'N/A' else _number(cell, float, number, line, 'error')
        else:
            out[title] = cell
    return out


def _row(tokens, layout, number, line):
    if layout['timestamp'] and len(tokens) >= 2 and _TIMESTAMP.match(tokens[-2]):
        tokens = tokens[:-2]
    width = len(layout['group'])
    head = 5 if layout['root'] else 4
    if len(tokens) == head + width:
        # no in-place half (trace replay prints only out-of-place)
        tokens = tokens + [None] * width
    if len(tokens) != head + 2 * width:
        _fail(number, line, 'expected {0} columns, found {1}'.format(head + 2 * width, len(tokens)))
    row = {'size': int(_number(tokens[0], int, number, line, 'size')),
           'count': int(_number(tokens[1], int, number, line, 'count')),
           'type': tokens[2], 'redop': tokens[3],
           'root': int(_number(tokens[4], int, number, line, 'root')) if layout['root'] else None}
    row['out_of_place'] = _group(layout['group'], tokens[head:head + width], number, line)
    second = tokens[head + width:]
    row['in_place'] = None if second[0] is None else _group(layout['group'], second, number, line)
    return row


def parse_nccl_tests(text):
    """nccl-tests stdout -> dict.

    ``version``, ``git_commit``, ``nccl_headers``, ``nccl_library`` (ints, NCCL_VERSION_CODE, e.g. 22902 = 2.29.2) or
    None; ``binary``; ``params`` (``nthread``, ``ngpus``, ``min_bytes``, ``max_bytes``, ``step``, ``step_kind``,
    ``warmup_iters``, ``iters``, ...: the keys printed); ``devices`` (``rank``, ``group``, ``pid``, ``host``,
    ``device``, ``bus_id``, ``name``); ``rows`` (``size``, ``count``, ``type``, ``redop``, ``root``,
    ``out_of_place``/``in_place``: ``time_us``, ``algbw``, ``busbw``, ``wrong`` or ``error``); ``out_of_bounds`` and
    ``out_of_bounds_ok``; ``avg_busbw`` (GB/s) and ``avg_busbw_check`` (``OK``/``FAILED``/None); ``wrong_total``
    (every ``#wrong`` summed, None when no row has one); ``complete`` (both summary lines seen); ``notes``;
    ``nccl_messages``.
    """
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    out = {'version': None, 'git_commit': None, 'nccl_headers': None, 'nccl_library': None, 'binary': None,
           'params': {}, 'devices': [], 'rows': [], 'out_of_bounds': None, 'out_of_bounds_ok': None,
           'avg_busbw': None, 'avg_busbw_check': None, 'notes': [], 'nccl_messages': []}
    layout = None
    for number, raw in enumerate((text or '').splitlines(), 1):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith('#'):
            body = stripped[1:].strip()
            match = _VERSION.match(stripped)
            if match:
                out['version'], out['git_commit'] = match.group(1), match.group(2)
                if match.group(3):
                    out['nccl_headers'], out['nccl_library'] = int(match.group(3)), int(match.group(4))
                continue
            match = _STARTING.match(stripped)
            if match:
                out['binary'] = match.group(2)
                continue
            if _PARAMS.match(stripped):
                for key, pattern in _PARAM_FIELDS:
                    found = re.search(pattern, stripped)
                    if found:
                        out['params'][key] = int(found.group(1))
                step = _STEP.search(stripped)
                if step:
                    out['params']['step'], out['params']['step_kind'] = int(step.group(1)), step.group(2)
                continue
            match = _RANK.match(stripped)
            if match:
                out['devices'].append({
                    'rank': int(match.group(1)), 'group': int(match.group(2)) if match.group(2) else None,
                    'pid': int(match.group(3)), 'host': match.group(4), 'device': int(match.group(5)),
                    'bus_id': match.group(6), 'name': match.group(7)})
                continue
            match = _OOB.match(stripped)
            if match:
                out['out_of_bounds'] = int(match.group(1))
                out['out_of_bounds_ok'] = match.group(2) == 'OK'
                continue
            match = _AVG.match(stripped)
            if match:
                out['avg_busbw'] = float(match.group(1))
                out['avg_busbw_check'] = match.group(2)
                continue
            tokens = body.split()
            if tokens[:1] == ['size'] or ('size' in tokens and 'busbw' in tokens):
                layout = _columns(tokens, number, raw)
                continue
            if not body or body == 'Using devices' or tokens[:1] == ['(B)'] or (
                    'out-of-place' in tokens and 'in-place' in tokens):
                continue
            out['notes'].append(body)
            continue
        if _NCCL_MESSAGE.match(stripped):
            out['nccl_messages'].append(stripped)
            continue
        tokens = stripped.split()
        if not tokens[0].isdigit():
            _fail(number, raw, 'expected a result row (size count type redop ...), a "#" comment or an NCCL message')
        if layout is None:
            _fail(number, raw, 'a result row before the column header "# size count type redop ..."')
        out['rows'].append(_row(tokens, layout, number, raw))
    wrongs = [half['wrong'] for row in out['rows'] for half in (row['out_of_place'], row['in_place'])
              if half and half.get('wrong') is not None]
    out['wrong_total'] = sum(wrongs) if wrongs else None
    out['complete'] = out['out_of_bounds'] is not None and out['avg_busbw'] is not None
    return out


def row_at(parsed, size):
    """The result row of one message size (bytes), or None."""
    for row in parsed['rows']:
        if row['size'] == size:
            return row
    return None


def largest(parsed):
    """The result row of the largest message size, or None when there is no row."""
    return max(parsed['rows'], key=lambda row: row['size']) if parsed['rows'] else None


def wrong_rows(parsed):
    """``[(size, out_of_place wrong, in_place wrong)]`` of the rows where a ``#wrong`` is above 0."""
    out = []
    for row in parsed['rows']:
        first = row['out_of_place'].get('wrong')
        second = (row['in_place'] or {}).get('wrong')
        if (first or 0) > 0 or (second or 0) > 0:
            out.append((row['size'], first, second))
    return out
