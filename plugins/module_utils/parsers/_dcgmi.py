# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""What NVIDIA DCGM's ``dcgmi`` prints: the parsers of ``dcgmi diag`` and ``dcgmi discovery`` (their argv, and the
no-host-engine test the gather runs on the node, are parsers/_dcgmi_cli.py).  Pure; no Ansible import; Python 3.6
compatible.

From NVIDIA/DCGM (github.com/NVIDIA/DCGM; tags v3.3.9 and v4.6.0 read 2026-12-02):

* ``dcgmi diag -r <level> -j`` prints one JSON document (testing/python3/dcgm_diag_schema.json; dcgmi/Diag.cpp).
  DCGM 4.x: ``{"DCGM Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results": [{"entity_group",
  "entity_group_id", "entity_id", "status", "warnings": [{"warning", "error_id", "error_category",
  "error_severity"}], "info": [...]}], "test_summary": {"status"}}]}], "runtime_error"}, "entity_groups": [...],
  "metadata": {"version", "Driver Version Detected"}}``.  DCGM 3.x: ``{"DCGM GPU Diagnostic": {"test_categories":
  [...]}, "version", "Driver Version Detected", "GPU Device IDs", ...}`` whose results carry ``gpu_id`` (a string;
  nvvs's own output names it ``gpu_ids``); its Deployment category has one result for all GPUs, and the warnings
  of that category carry their text under ``warnings`` instead of ``warning`` (v3.3.9 dcgmi/Diag.cpp, the level-one
  JSON writer).
* Statuses (Diag.cpp HelperDisplayDiagResult): ``Pass``, ``Skip``, ``Warn``, ``Fail``, ``Not Run``.
* Without a host engine dcgmi prints ``Error: unable to establish a connection to the specified host: localhost``
  and ``Error: Unable to connect to host engine. Host engine connection invalid/disconnected.``
  (dcgmi/Command.cpp Connect and DoExecuteConnectionFailure).
* ``dcgmi discovery -l`` (dcgmi/Query.cpp DisplayDiscoveredDevices): ``<n> GPUs found.`` (4.x: ``<n> GPUs found
  (Active).``), a table of ``| <id> | Name: ... |``, ``| | PCI Bus ID: ... |``, ``| | Device UUID: ... |`` rows,
  then ``<n> NvSwitches found.`` (``1 NvSwitch found.``) and a table of Switch IDs.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import re

GENERATIONS = (('4', 'DCGM Diagnostic'), ('3', 'DCGM GPU Diagnostic'))
# Statuses as dcgmi writes them; nvvs's own document (which dcgmi 3.x reads) writes them in capitals.
STATUSES = {'pass': 'Pass', 'skip': 'Skip', 'warn': 'Warn', 'fail': 'Fail', 'not run': 'Not Run'}  # nosec B105

_FOUND_RE = re.compile(r'^\s*(\d+) (GPUs?|NvSwitch(?:es)?) found\b')
_ROW_RE = re.compile(r'^\|\s*(\d*)\s*\|\s*(.*?)\s*\|\s*$')
_SWITCH_RE = re.compile(r'^\|\s*(\d+)\s*\|\s*$')
_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET_RE = re.compile(r'[\[\]{}]')


class DcgmError(Exception):
    """A DCGM setting or output that cannot be used."""


# ---------------------------------------------------------------------------------------------------------------------
# parsers


# How deep a dcgmi document may nest: DCGM's own documents nest about 10 levels (the GB10 capture: the document, its
# body, the category list, a category, the test list, a test, the result list, a result, its warning list, a
# warning); Python's json gives up (RecursionError) near 1,000.
MAX_DEPTH = 32


def json_depth(text, limit=MAX_DEPTH):
    """How deep the objects and arrays of JSON ``text`` nest (brackets inside strings do not count), counting up to
    ``limit + 1`` only, so that a document nested deeper than the parser can take is refused before it is parsed."""
    depth = deepest = 0
    for match in _BRACKET_RE.finditer(_STRING_RE.sub('""', text)):
        if match.group(0) in '{[':
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        else:
            depth -= 1
    return deepest


def _document(text):
    """The JSON object in ``text`` (dcgmi 3.x may print a line before it); DcgmError when there is none, when it is
    not JSON, or when it nests deeper than MAX_DEPTH levels."""
    text = text or ''
    start, end = text.find('{'), text.rfind('}')
    if start < 0 or end < start:
        raise DcgmError('no JSON document in the output of dcgmi diag')
    if json_depth(text[start:end + 1]) > MAX_DEPTH:
        raise DcgmError('the output of dcgmi diag nests deeper than {0} levels (DCGM\'s own nest about 10): not a '
                        'diagnostic document'.format(MAX_DEPTH))
    try:
        doc = json.loads(text[start:end + 1])
    except (ValueError, RecursionError) as exc:
        raise DcgmError('the output of dcgmi diag is not valid JSON: {0}'.format(exc))
    if not isinstance(doc, dict):
        raise DcgmError('the output of dcgmi diag is not a JSON object')
    return doc


def _int_or_none(value):
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _warnings(raw):
    out = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        text = item.get('warning')
        if text is None:
            # DCGM 3.x, level-one (Deployment) tests: the text is under "warnings".
            text = item.get('warnings')
        out.append({'text': str(text if text is not None else '').strip(),
                    'error_id': _int_or_none(item.get('error_id')),
                    'severity': _int_or_none(item.get('error_severity')),
                    'category': _int_or_none(item.get('error_category'))})
    return out


def _info(raw):
    if isinstance(raw, list):
        return [str(x) for x in raw]
    if raw is None:
        return []
    return [str(raw)]


def parse_diag(text):
    """The results of ``dcgmi diag -j`` of DCGM 3.x or 4.x.

    Returns ``{generation: '3'|'4', version, driver_version, runtime_error, results: [{category, test,
    entity_group, entity_id, status, warnings: [{text, error_id, severity, category}], info: [...]}],
    summaries: {test: status}, summary_warnings: {test: [warning]}}``: ``summaries`` is DCGM's own verdict per test
    (``test_summary``, 4.x), its status spelled as in the results.  ``entity_id`` is None for a 3.x result that
    stands for all GPUs.
    Raises DcgmError for output that is not one of the two documents.
    """
    doc = _document(text)
    generation = body = None
    for gen, key in GENERATIONS:
        if isinstance(doc.get(key), dict):
            generation, body = gen, doc[key]
            break
    if body is None:
        raise DcgmError('the JSON of dcgmi diag has neither "DCGM Diagnostic" (DCGM 4.x) nor "DCGM GPU Diagnostic" '
                        '(DCGM 3.x); keys: {0}'.format(', '.join(sorted(doc)) or 'none'))
    meta = doc.get('metadata') if isinstance(doc.get('metadata'), dict) else doc
    out = {'generation': generation, 'version': meta.get('version') or body.get('version'),
           'driver_version': meta.get('Driver Version Detected') or body.get('Driver Version Detected'),
           'runtime_error': body.get('runtime_error') or doc.get('runtime_error'),
           'results': [], 'summaries': {}, 'summary_warnings': {}}
    categories = body.get('test_categories')
    for category in categories if isinstance(categories, list) else []:
        if not isinstance(category, dict):
            continue
        for test in category.get('tests') or []:
            if not isinstance(test, dict):
                continue
            name = str(test.get('name'))
            summary = test.get('test_summary')
            if isinstance(summary, dict) and summary.get('status'):
                raw = str(summary['status'])
                out['summaries'][name] = STATUSES.get(raw.strip().lower(), raw)
                out['summary_warnings'][name] = _warnings(summary.get('warnings'))
            for result in test.get('results') or []:
                if not isinstance(result, dict):
                    continue
                if 'entity_id' in result:
                    group, entity = result.get('entity_group') or 'GPU', _int_or_none(result.get('entity_id'))
                else:
                    # DCGM 3.x: one GPU ("3", 3), or a list ("0,1,2,3") for a result that stands for them all.
                    group = 'GPU'
                    entity = _int_or_none(result.get('gpu_id', result.get('gpu_ids')))
                status = str(result.get('status') or '')
                out['results'].append({
                    'category': category.get('category'), 'test': name, 'entity_group': str(group),
                    'entity_id': entity, 'status': STATUSES.get(status.strip().lower(), status),
                    'warnings': _warnings(result.get('warnings')), 'info': _info(result.get('info'))})
    return out


def parse_discovery(text):
    """``dcgmi discovery -l``: ``{gpu_count, gpus: [{id, name, pci_bus_id, uuid}], nvswitch_count, nvswitches}``.

    A count line that is missing leaves its count None.
    """
    out = {'gpu_count': None, 'gpus': [], 'nvswitch_count': None, 'nvswitches': []}
    section = None
    current = None
    for line in (text or '').splitlines():
        found = _FOUND_RE.match(line)
        if found:
            section = 'gpus' if found.group(2).startswith('GPU') else 'nvswitches'
            out['gpu_count' if section == 'gpus' else 'nvswitch_count'] = int(found.group(1))
            current = None
            continue
        if section == 'nvswitches':
            switch = _SWITCH_RE.match(line.rstrip())
            if switch:
                out['nvswitches'].append(int(switch.group(1)))
            continue
        row = _ROW_RE.match(line.rstrip())
        if not row or section is None:
            continue
        ident, cell = row.groups()
        if ident:
            current = {'id': int(ident), 'name': None, 'pci_bus_id': None, 'uuid': None}
            out['gpus'].append(current)
        if current is None:
            continue
        for label, key in (('Name: ', 'name'), ('PCI Bus ID: ', 'pci_bus_id'), ('Device UUID: ', 'uuid')):
            if cell.startswith(label):
                current[key] = cell[len(label):].strip()
    return out
