# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""NVIDIA DCGM: the readiness check ``gpu.dcgm_diag`` and its settings, and what the dcgm role does where DCGM 3.x
is installed (refuse, or replace it: dcgm3_refusal, dcgm3_replace).  Pure; no Ansible import; Python 3.6
compatible.  What dcgmi prints is parsed by parsers/_dcgmi.py (its argv and the no-host-engine test:
parsers/_dcgmi_cli.py); from NVIDIA/DCGM (tags v3.3.9 and v4.6.0):

* Severities (dcgmlib/dcgm_errors.h dcgmErrorSeverity_t): 0 NONE, 1 MONITOR, 2 ISOLATE, 3 UNKNOWN, 4 TRIAGE,
  5 CONFIG, 6 RESET.  Error 29 is DCGM_FR_PERSISTENCE_MODE ("Persistence mode for GPU %u is disabled."): the
  software test (level 1) fails every GPU whose persistence mode is off, with severity CONFIG.
* dcgmi exits with the dcgmReturn_t as an unsigned byte: 0, 226 (-30 DCGM_ST_NVVS_ERROR: the diagnostic ran and
  reported an error), 205 (-51 DCGM_ST_NVVS_ISOLATE_ERROR), 235 (-21 DCGM_ST_CONNECTION_NOT_VALID: no host engine).
  The JSON is printed with a failing exit status too, so the document is read whatever the exit status is.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._dcgmi import (
    DcgmError,
    _int_or_none,
    parse_diag,
    parse_discovery,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._dcgmi_cli import no_host_engine

CHECK = 'gpu.dcgm_diag'
LEVELS = (1, 2, 3, 4)
DEFAULT_LEVEL = 1
DEFAULT_TIMEOUT = 300
SEVERITIES = {0: 'NONE', 1: 'MONITOR', 2: 'ISOLATE', 3: 'UNKNOWN', 4: 'TRIAGE', 5: 'CONFIG', 6: 'RESET'}
PERSISTENCE_MODE_ERROR = 29
SEVERITY_CONFIG = 5
RC_NVVS_ERROR = 226
RC_ISOLATE = 205
RC_NO_HOST_ENGINE = 235
PASSING = ('Pass', 'Skip', 'Not Run')
SERVICE = 'nvidia-dcgm.service'
# How gpu.dcgm_diag's verdict begins when the diagnostic was asked for and the host engine does not answer (a fail).
NO_HOST_ENGINE = 'the DCGM host engine is not running'


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


def _missing_results(parsed, discovery, gpus, bus_ids):
    """Per test with per-GPU results: the GPUs it has no result for, of those the document, DCGM's discovery or
    nvidia-smi names (a test that ran on 1 of 2 GPUs has not proven the other).  DCGM 3.x Deployment tests write one
    result for all GPUs, naming a GPU only when it failed (v3.3.9 dcgmi/Diag.cpp): not judged here."""
    results = [r for r in parsed['results']
               if not (parsed['generation'] == '3' and r['category'] == 'Deployment')]
    seen = set(r['entity_id'] for r in results if r['entity_group'] == 'GPU' and r['entity_id'] is not None)
    seen.update(g['id'] for g in (discovery or {}).get('gpus') or [])
    seen.update(i for i in (_int_or_none(g.get('index')) for g in gpus or []) if i is not None)
    out = []
    for test in sorted(set(r['test'] for r in results)):
        mine = [r for r in results if r['test'] == test and r['entity_group'] == 'GPU']
        if not mine or any(r['entity_id'] is None for r in mine):
            continue  # no GPU result (another entity), or one result for all GPUs (DCGM 3.x Deployment)
        missing = sorted(seen - set(r['entity_id'] for r in mine))
        if missing:
            out.append('{0}: no result for {1} (results for {2} of {3} GPUs)'.format(
                test, ', '.join(_label({'entity_group': 'GPU', 'entity_id': gpu}, bus_ids) for gpu in missing),
                len(seen) - len(missing), len(seen)))
    return out


def judge(probe, gpus=None):
    """``(status, expected, observed)`` of gpu.dcgm_diag from what the readiness gather ran (``probe``: gpu_node_facts'
    nodeprep_dcgm, collect/_health.read_dcgm) and nvidia-smi's GPUs (``gpus``, for the bus ids and the count)."""
    probe = probe if isinstance(probe, dict) else {}
    level = probe.get('level') or DEFAULT_LEVEL
    expected = ('dcgmi diag -r {0}: every test passes (or is skipped) on every GPU, DCGM\'s test summaries pass, '
                'not every test skipped, and DCGM sees every GPU nvidia-smi lists'.format(level))
    if not probe.get('enabled'):
        return 'skip', expected, 'not run: nodeprep_readiness_dcgm is false (it takes about a minute)'
    if not probe.get('dcgmi'):
        return 'skip', expected, 'DCGM is not installed (no dcgmi in PATH; role gpufleet.nodeprep.dcgm installs it)'
    discovery = probe.get('discovery') or {}
    diag = probe.get('diag') or {}
    both = ' '.join([discovery.get('stdout') or '', discovery.get('stderr') or '', diag.get('stdout') or '',
                     diag.get('stderr') or ''])
    if no_host_engine(both) or discovery.get('rc') == RC_NO_HOST_ENGINE:
        # nodeprep_readiness_dcgm asked for the diagnostic: a node where it cannot run is not proven healthy.
        return 'fail', expected, (NO_HOST_ENGINE + ' ({0} not active: dcgmi cannot connect), so '
                                  'the diagnostic nodeprep_readiness_dcgm asks for could not run; start it '
                                  '(systemctl start {0}), or let role gpufleet.nodeprep.dcgm enable it'.format(SERVICE))
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
    failed_tests = set(r['test'] for r in results if r['status'] not in PASSING and r['status'] != 'Warn')
    warned_tests = set(r['test'] for r in results if r['status'] == 'Warn')
    for test in sorted(parsed['summaries']):
        verdict = parsed['summaries'][test]
        if verdict in PASSING or test in failed_tests or (verdict == 'Warn' and test in warned_tests):
            continue
        words = '; '.join(_warning_text(w) for w in parsed['summary_warnings'].get(test) or [])
        line = '{0}: DCGM\'s test_summary says {1}{2}'.format(
            test, verdict if verdict in ('Fail', 'Warn') else repr(verdict), ': ' + words if words else
            ' (no result of the test failed)')
        (warned if verdict == 'Warn' else failed).append(line)
    failed.extend(_missing_results(parsed, found, gpus, bus_ids))
    if results and all(r['status'] in ('Skip', 'Not Run') for r in results):
        failed.append('every test was skipped or not run ({0} result{1}: {2}): the diagnostic proved nothing'.format(
            len(results), '' if len(results) == 1 else 's', ', '.join(sorted(set(r['test'] for r in results)))))
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


# ---------------------------------------------------------------------------------------------------------------------
# DCGM 3.x on a node that should get DCGM 4

# DCGM 3.x is one package (NVIDIA/DCGM v3.3.9 cmake/packaging.cmake: DCGM_PKG "datacenter-gpu-manager", epoch 1) with
# the units nvidia-dcgm.service and the deprecated dcgm.service (config-files/systemd).  The DCGM 4 core conflicts
# with it (cmake/packaging.cmake at v4.6.0: CPACK_RPM_CORE_PACKAGE_CONFLICTS / CPACK_DEBIAN_CORE_PACKAGE_CONFLICTS
# "datacenter-gpu-manager"): dnf refuses the transaction, apt removes DCGM 3 and its unit without being asked.
DCGM3_PACKAGE = 'datacenter-gpu-manager'
DCGM3_UNITS = ('nvidia-dcgm.service', 'dcgm.service')
REPLACE_SETTING = 'nodeprep_dcgm_replace_v3'
# A dnf versionlock entry of DCGM 3.x (name-epoch:version-release.*), not of the 4.x packages (their name goes on with
# -4-core, -4-cuda13, ...).
_DCGM3_LOCK_RE = re.compile(r'^!?datacenter-gpu-manager-[0-9]+:')


def dcgm3_units(units):
    """The DCGM 3.x units that are enabled or running (``units``: the gather's nodeprep_units)."""
    out = []
    for name in DCGM3_UNITS:
        unit = (units or {}).get(name) or {}
        if unit.get('load') == 'loaded' and (unit.get('active') == 'active' or unit.get('enabled') == 'enabled'):
            out.append(name)
    return out


def dcgm3_refusal(host, installed, units, wanted):
    """The message that stops the dcgm role where DCGM 3.x is installed and replacing it is not allowed: what is
    installed, why DCGM 4 cannot simply be installed beside it, and the ways on."""
    return ('DCGM on {0}: DCGM 3.x is installed ({1} {2}{3}); the role installs DCGM 4 ({4}), whose core package '
            'conflicts with it (dnf refuses the transaction, apt removes DCGM 3 and its unit without asking), and '
            'DCGM 3 and 4 differ for what uses them (libdcgm.so.3 and .4, the dcgmi diag JSON, the dcgm-exporter '
            'release). Allowed: {5}=true (the role stops {6}, removes {1} and installs DCGM 4), remove DCGM 3 '
            'first, or nodeprep_dcgm_install=false (DCGM left alone).'.format(
                host or 'this node', DCGM3_PACKAGE, installed, ', {0} enabled or running'.format(', '.join(units))
                if units else '', ' with '.join(wanted), REPLACE_SETTING, ', '.join(units) or 'nothing running'))


def dcgm3_replace(family, units, node):
    """What replacing DCGM 3.x takes, in the role's order: ``units`` to stop and disable, ``unhold`` (apt holds of
    the package), ``unlock`` (EL versionlock entries of 3.x), ``packages`` to remove (with the node's ``family``:
    apt removes a package that was held only when told it may, which check mode needs: its release of the hold
    changed nothing yet)."""
    node = node if isinstance(node, dict) else {}
    return {
        'family': family,
        'units': list(units),
        'unhold': [DCGM3_PACKAGE] if family == 'debian' and DCGM3_PACKAGE in (node.get('apt_holds') or []) else [],
        'unlock': [entry for entry in node.get('versionlock') or [] if _DCGM3_LOCK_RE.match(entry)]
        if family == 'el' else [],
        'packages': [DCGM3_PACKAGE],
    }
