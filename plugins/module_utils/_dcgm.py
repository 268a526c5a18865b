# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""NVIDIA DCGM: the readiness check ``gpu.dcgm_diag`` and the DCGM packages the dcgm role installs.  Pure; no Ansible
import; Python 3.6 compatible.

What DCGM prints, from NVIDIA/DCGM (github.com/NVIDIA/DCGM; tags v3.3.9 and v4.6.0 read 2026-12-02):

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
* Severities (dcgmlib/dcgm_errors.h dcgmErrorSeverity_t): 0 NONE, 1 MONITOR, 2 ISOLATE, 3 UNKNOWN, 4 TRIAGE,
  5 CONFIG, 6 RESET.  Error 29 is DCGM_FR_PERSISTENCE_MODE ("Persistence mode for GPU %u is disabled."): the
  software test (level 1) fails every GPU whose persistence mode is off, with severity CONFIG.
* dcgmi exits with the dcgmReturn_t as an unsigned byte: 0, 226 (-30 DCGM_ST_NVVS_ERROR: the diagnostic ran and
  reported an error), 205 (-51 DCGM_ST_NVVS_ISOLATE_ERROR), 235 (-21 DCGM_ST_CONNECTION_NOT_VALID: no host engine).
  The JSON is printed with a failing exit status too, so the document is read whatever the exit status is.
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

CHECK = 'gpu.dcgm_diag'
LEVELS = (1, 2, 3, 4)
DEFAULT_LEVEL = 1
DEFAULT_TIMEOUT = 300
GENERATIONS = (('4', 'DCGM Diagnostic'), ('3', 'DCGM GPU Diagnostic'))
SEVERITIES = {0: 'NONE', 1: 'MONITOR', 2: 'ISOLATE', 3: 'UNKNOWN', 4: 'TRIAGE', 5: 'CONFIG', 6: 'RESET'}
PERSISTENCE_MODE_ERROR = 29
SEVERITY_CONFIG = 5
RC_NVVS_ERROR = 226
RC_ISOLATE = 205
RC_NO_HOST_ENGINE = 235
NO_HOST_ENGINE = ('Unable to connect to host engine', 'unable to establish a connection to the specified host')
# Statuses as dcgmi writes them; nvvs's own document (which dcgmi 3.x reads) writes them in capitals.
STATUSES = {'pass': 'Pass', 'skip': 'Skip', 'warn': 'Warn', 'fail': 'Fail', 'not run': 'Not Run'}  # nosec B105
PASSING = ('Pass', 'Skip', 'Not Run')
SERVICE = 'nvidia-dcgm.service'

_FOUND_RE = re.compile(r'^\s*(\d+) (GPUs?|NvSwitch(?:es)?) found\b')
_ROW_RE = re.compile(r'^\|\s*(\d*)\s*\|\s*(.*?)\s*\|\s*$')
_SWITCH_RE = re.compile(r'^\|\s*(\d+)\s*\|\s*$')


class DcgmError(Exception):
    """A DCGM setting or output that cannot be used."""


# ---------------------------------------------------------------------------------------------------------------------
# settings and commands


def check_level(value, name='nodeprep_readiness_dcgm_level'):
    """``value`` as a diagnostic level (1 to 4); DcgmError naming the value and what is allowed."""
    if isinstance(value, bool):
        level = None
    else:
        try:
            level = int(value)
        except (TypeError, ValueError):
            level = None
    if level not in LEVELS or str(value).strip() != str(level):  # '1.5' and 1.5 are no level
        raise DcgmError('{0}={1!r} is not a DCGM diagnostic level; allowed: {2} (dcgmi diag -r: 1 quick, about a '
                        'minute; 2 medium; 3 long; 4 extended)'.format(name, value,
                                                                       ', '.join(str(x) for x in LEVELS)))
    return level


def check_timeout(value, name='nodeprep_readiness_dcgm_timeout'):
    """``value`` as a positive whole number of seconds; DcgmError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DcgmError('{0}={1!r} is not a timeout; allowed: a whole number of seconds, at least 1 (level 1 takes '
                        'about a minute)'.format(name, value))
    return value


def diag_argv(dcgmi, level):
    return [dcgmi, 'diag', '-r', str(level), '-j']


def discovery_argv(dcgmi):
    return [dcgmi, 'discovery', '-l']


# ---------------------------------------------------------------------------------------------------------------------
# parsers


def _document(text):
    """The JSON object in ``text`` (dcgmi 3.x may print a line before it); DcgmError when there is none."""
    text = text or ''
    start, end = text.find('{'), text.rfind('}')
    if start < 0 or end < start:
        raise DcgmError('no JSON document in the output of dcgmi diag')
    try:
        doc = json.loads(text[start:end + 1])
    except ValueError as exc:
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
    summaries: {test: status}}``.  ``entity_id`` is None for a 3.x result that stands for all GPUs.
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
           'results': [], 'summaries': {}}
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
                out['summaries'][name] = str(summary['status'])
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


def no_host_engine(text):
    """True when dcgmi's output says that no host engine answers."""
    return any(marker in (text or '') for marker in NO_HOST_ENGINE)


# ---------------------------------------------------------------------------------------------------------------------
# the readiness check


def _bus_ids(discovery, gpus):
    """GPU id -> PCI bus id, from DCGM's discovery, else from nvidia-smi's index (DCGM numbers GPUs as NVML does)."""
    out = {}
    for gpu in gpus or []:
        index = _int_or_none(gpu.get('index'))
        if index is not None and gpu.get('pci_bus_id'):
            out[index] = gpu['pci_bus_id']
    for gpu in (discovery or {}).get('gpus') or []:
        if gpu.get('pci_bus_id'):
            out[gpu['id']] = gpu['pci_bus_id']
    return out


def _label(result, bus_ids):
    entity = result['entity_id']
    group = result['entity_group']
    if entity is None:
        return 'all GPUs'
    if group == 'GPU':
        bus = bus_ids.get(entity)
        return 'GPU {0}{1}'.format(entity, ' ({0})'.format(bus) if bus else '')
    return '{0} {1}'.format(group, entity)


def _warning_text(warning):
    text = warning['text'] or 'no warning text'
    severity = SEVERITIES.get(warning['severity'])
    return '{0} [error {1}{2}]'.format(text, warning['error_id'], ', severity ' + severity if severity else '')


def judge(probe, gpus=None):
    """``(status, expected, observed)`` of gpu.dcgm_diag from what readiness_info ran (``probe``; see
    plugins/modules/readiness_info.py) and nvidia-smi's GPUs (``gpus``, for the bus ids and the count)."""
    probe = probe if isinstance(probe, dict) else {}
    level = probe.get('level') or DEFAULT_LEVEL
    expected = ('dcgmi diag -r {0}: every test passes (or is skipped) on every GPU, and DCGM sees every GPU '
                'nvidia-smi lists'.format(level))
    if not probe.get('enabled'):
        return 'skip', expected, 'not run: nodeprep_readiness_dcgm is false (it takes about a minute)'
    if not probe.get('dcgmi'):
        return 'skip', expected, 'DCGM is not installed (no dcgmi in PATH; role gpufleet.nodeprep.dcgm installs it)'
    discovery = probe.get('discovery') or {}
    diag = probe.get('diag') or {}
    both = ' '.join([discovery.get('stdout') or '', discovery.get('stderr') or '', diag.get('stdout') or '',
                     diag.get('stderr') or ''])
    if no_host_engine(both) or discovery.get('rc') == RC_NO_HOST_ENGINE:
        return 'skip', expected, ('the DCGM host engine is not running ({0} not active: dcgmi cannot connect); '
                                  'start it, or let role gpufleet.nodeprep.dcgm enable it'.format(SERVICE))
    found = parse_discovery(discovery.get('stdout')) if discovery.get('rc') == 0 else None
    problems = []
    notes = []
    nvsmi_count = len(gpus or [])
    if found is not None and found['gpu_count'] is not None:
        notes.append('DCGM sees {0} GPU{1}{2}'.format(
            found['gpu_count'], '' if found['gpu_count'] == 1 else 's',
            ' and {0} NVSwitch{1}'.format(found['nvswitch_count'], '' if found['nvswitch_count'] == 1 else 'es')
            if found['nvswitch_count'] else ''))
        if gpus is not None and nvsmi_count and found['gpu_count'] < nvsmi_count:
            problems.append('DCGM sees {0} GPUs, nvidia-smi lists {1}'.format(found['gpu_count'], nvsmi_count))
    elif found is not None:
        notes.append('dcgmi discovery -l printed no GPU count')
    elif discovery:
        notes.append('dcgmi discovery -l failed (rc={0}): {1}'.format(
            discovery.get('rc'), (discovery.get('stderr') or discovery.get('stdout') or '').strip()[:200]))
    if diag.get('timed_out'):
        problems.append('dcgmi diag -r {0} did not finish within {1} s (nodeprep_readiness_dcgm_timeout)'.format(
            level, probe.get('timeout')))
        return 'fail', expected, '; '.join(problems + notes)
    try:
        parsed = parse_diag(diag.get('stdout'))
    except DcgmError as exc:
        text = (diag.get('stderr') or diag.get('stdout') or '').strip()[:300]
        problems.append('dcgmi diag -r {0} failed (rc={1}): {2}{3}'.format(
            level, diag.get('rc'), exc, '; it printed: ' + text if text else ''))
        return 'fail', expected, '; '.join(problems + notes)
    if parsed['runtime_error']:
        problems.append('DCGM could not run the diagnostic: {0}'.format(parsed['runtime_error']))
    results = parsed['results']
    if not results and not parsed['runtime_error']:
        problems.append('dcgmi diag -r {0} reported no test result (rc={1})'.format(level, diag.get('rc')))
    bus_ids = _bus_ids(found, gpus)
    failed, warned, persistence = [], [], []
    for result in results:
        status = result['status']
        if status in PASSING:
            continue
        words = '; '.join(_warning_text(w) for w in result['warnings']) or 'no warning text'
        line = '{0}: {1} {2}: {3}'.format(_label(result, bus_ids), result['test'],
                                          'warned' if status == 'Warn' else 'failed' if status == 'Fail'
                                          else 'status {0!r}'.format(status), words)
        (warned if status == 'Warn' else failed).append(line)
        if result['warnings'] and all(w['error_id'] == PERSISTENCE_MODE_ERROR for w in result['warnings']):
            persistence.append(_label(result, bus_ids))
    if persistence and len(persistence) == len(failed):
        problems.append('persistence mode is off ({0}): DCGM\'s level-1 software test fails every GPU whose '
                        'persistence mode is off (severity CONFIG); enable nvidia-persistenced (role '
                        'gpufleet.nodeprep.nvidia_driver, nodeprep_nvidia_driver_persistenced)'.format(
                            ', '.join(persistence)))
    problems.extend(failed)
    version = 'DCGM {0}'.format(parsed['version']) if parsed['version'] else 'DCGM {0}.x'.format(
        parsed['generation'])
    tests = sorted(set(r['test'] for r in results))
    summary = '{0}: {1} result{2} of {3} ({4})'.format(version, len(results), '' if len(results) == 1 else 's',
                                                       ', '.join(tests) or 'no test', '; '.join(notes) or
                                                       'discovery not read')
    if problems:
        return 'fail', expected, '; '.join(problems + warned + [summary])
    if warned:
        return 'warn', expected, '; '.join(warned + [summary])
    skipped = sum(1 for r in results if r['status'] != 'Pass')
    return 'pass', expected, '{0}; all passed{1}'.format(
        summary, ' ({0} skipped or not run)'.format(skipped) if skipped else '')
