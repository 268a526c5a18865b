# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""dcgmi and nv-hostengine of the simulated fleet (NVIDIA DCGM 4), answering from the profile, the double's state
and the faults.  Stdlib only, Python 3.6+.

What is copied from NVIDIA/DCGM v4.6.0 (tests/testbed/REALITY.md names each source):

* ``dcgmi diag -r <1-4> -j``: the 4.x document of ``dcgmi/Diag.cpp`` (``DCGM Diagnostic`` / ``test_categories`` /
  ``tests[].results[]`` with ``entity_group``, ``entity_group_id``, ``entity_id``, ``status``, ``warnings[]``;
  ``test_summary``; ``entity_groups``; ``metadata``), written as jsoncpp's StyledWriter writes it (tabs, sorted keys,
  ``"key" :``, a container on the line after its key), as the GB10 capture of tests/fixtures/dcgmi shows.
* The software test fails every GPU whose persistence mode is off with error 29, severity 5 and the text of
  ``DCGM_FR_PERSISTENCE_MODE`` (dcgmlib/dcgm_errors.h), prefixed by the subtest name (nvvs/src/Software.cpp).
* The fault ``dcgm-diag-fail`` fails the software test on the GPUs it names with the "Page Retirement/Row Remap"
  subtest's ``DCGM_FR_PENDING_ROW_REMAP`` (error 85, severity 6 RESET, category 10).
* Exit status: 0, 226 when a test failed (DCGM_ST_NVVS_ERROR), 235 without host engine (DCGM_ST_CONNECTION_NOT_VALID)
  with dcgmi/Command.cpp's two lines.
* ``dcgmi discovery -l``: dcgmi/Query.cpp's layout (``N GPUs found (Active).``, the GPU table, ``N NvSwitches found.``
  and the Switch ID table), the column widths of the capture of NVIDIA/DCGM issue #229.

Simplified (a guess, labelled so in REALITY.md): which tests each level runs, and that every test other than the
software test passes.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import signal
import sys
import time

import gpudouble as gd

VERSION = '4.5.2'
HOSTENGINE_MARKER = os.path.join(gd.RUN_DIR, 'hostengine.running')
FAULT_DIAG_FAIL = gd.FAULT_DCGM_DIAG_FAIL
RC_NVVS_ERROR = 226
RC_NO_HOST_ENGINE = 235
NO_HOST_ENGINE = ('Error: unable to establish a connection to the specified host: localhost\n'
                  'Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n')
# (level it starts at, category, test name); a simplification of DCGM's run levels (REALITY.md).
TESTS = ((1, 'Deployment', 'software'), (2, 'Integration', 'pcie'), (2, 'Hardware', 'memory'),
         (3, 'Hardware', 'diagnostic'), (3, 'Stress', 'targeted_stress'), (3, 'Stress', 'targeted_power'),
         (3, 'Stress', 'memory_bandwidth'), (4, 'Hardware', 'memtest'), (4, 'Stress', 'pulse_test'))
PERSISTENCE = ('Persistence Mode: Persistence mode for GPU {0} is disabled. Enable persistence mode by running '
               '"nvidia-smi -i <gpuId> -pm 1 " as root.')
ROW_REMAP = ('Page Retirement/Row Remap: GPU {0} had memory errors and row remappings are pending Check DCGM and '
             'system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics.')


def styled(value, indent=0):
    """JSON as jsoncpp's StyledWriter writes it."""
    tab = '\t'
    if isinstance(value, dict) and value:
        items = []
        for key in sorted(value):
            item = value[key]
            text = styled(item, indent + 1)
            if isinstance(item, (dict, list)) and item:
                items.append('{0}{1} :\n{0}{2}'.format(tab * (indent + 1), json.dumps(key), text))
            else:
                items.append('{0}{1} : {2}'.format(tab * (indent + 1), json.dumps(key), text))
        return '{\n' + ',\n'.join(items) + '\n' + tab * indent + '}'
    if isinstance(value, list) and value:
        return '[\n' + ',\n'.join(tab * (indent + 1) + styled(item, indent + 1) for item in value) + '\n' + \
            tab * indent + ']'
    if isinstance(value, dict):
        return '{}'
    if isinstance(value, list):
        return '[]'
    return json.dumps(value)


def hostengine_running():
    text = gd.read_text(HOSTENGINE_MARKER)
    if not text:
        return False
    try:
        os.kill(int(text.strip()), 0)
    except (ValueError, OSError):
        return False
    return True


def _gpus_and_state():
    profile = gd.load_profile()
    state = gd.ensure_state(profile)
    lost = gd.lost_gpus(profile)
    gpus = [g for g in gd.present_gpus(profile) if g['pci_bus_id'] not in lost]
    return profile, state, gpus


def diag_document(profile, state, gpus, level):
    """(document, failed): the 4.x JSON of ``dcgmi diag -r <level> -j``."""
    failing = gd.flagged_gpus(profile, FAULT_DIAG_FAIL) if gd.fault_active(FAULT_DIAG_FAIL) else set()
    if gd.fault_active(FAULT_DIAG_FAIL) and not gd.fault_lines(FAULT_DIAG_FAIL) and gpus:
        failing = set([gpus[-1]['pci_bus_id']])    # default: the last GPU
    categories = []
    failed = False
    for start, category, name in TESTS:
        if start > level:
            continue
        results = []
        summary = 'Pass'
        for gpu in gpus:
            result = {'entity_group': 'GPU', 'entity_group_id': 1, 'entity_id': gpu['index'], 'status': 'Pass'}
            warnings = []
            if name == 'software':
                if not gd.gpu_state(state, profile, gpu['pci_bus_id'])['persistence']:
                    warnings.append({'error_category': 8, 'error_id': 29, 'error_severity': 5,
                                     'warning': PERSISTENCE.format(gpu['index'])})
                if gpu['pci_bus_id'] in failing:
                    warnings.append({'error_category': 10, 'error_id': 85, 'error_severity': 6,
                                     'warning': ROW_REMAP.format(gpu['index'])})
            if warnings:
                result['status'] = 'Fail'
                result['warnings'] = warnings
                summary = 'Fail'
                failed = True
            results.append(result)
        test = {'name': name, 'results': results, 'test_summary': {'status': summary}}
        for entry in categories:
            if entry['category'] == category:
                entry['tests'].append(test)
                break
        else:
            categories.append({'category': category, 'tests': [test]})
    doc = {
        'DCGM Diagnostic': {'test_categories': categories},
        'entity_groups': [{'entities': [{'device_id': profile['pci_device_id'][2:].lower(), 'entity_id': g['index'],
                                         'serial_num': g.get('serial', '<<<NOT_SUPPORTED>>>')} for g in gpus],
                           'entity_group': 'GPU', 'entity_group_id': 1}] if gpus else [],
        'metadata': {'Driver Version Detected': state['driver'].get('version'), 'version': VERSION},
    }
    return doc, failed


def discovery_text(profile, gpus):
    rule = '+--------+----------------------------------------------------------------------+'
    lines = ['{0} GPU{1} found (Active).'.format(len(gpus), '' if len(gpus) == 1 else 's'), rule,
             '| GPU ID | Device Information                                                   |', rule]
    for gpu in gpus:
        lines.append('| {0:<6} | {1:<68} |'.format(gpu['index'], 'Name: ' + profile['product_name']))
        lines.append('| {0:<6} | {1:<68} |'.format('', 'PCI Bus ID: ' + gpu['pci_bus_id']))
        lines.append('| {0:<6} | {1:<68} |'.format('', 'Device UUID: ' + gpu['uuid']))
        lines.append(rule)
    # The NVSwitches on the PCI bus (HGX H100/H200); NVLink 5 boards list none here (a guess: REALITY.md).
    switches = list(range(len(profile.get('nvswitches') or [])))
    lines.append('{0} NvSwitch{1} found.'.format(len(switches), '' if len(switches) == 1 else 'es'))
    lines.extend(['+-----------+', '| Switch ID |', '+-----------+'])
    for switch in switches:
        lines.append('| {0:<9} |'.format(switch))
    lines.append('+-----------+')
    return '\n'.join(lines) + '\n'


def _level(argv):
    for i, arg in enumerate(argv):
        if arg in ('-r', '--run') and i + 1 < len(argv):
            return argv[i + 1]
    return None


def main(argv):
    if not argv or argv[0] in ('-h', '--help'):
        sys.stdout.write('Usage: dcgmi <subsystem> (simulated fleet: discovery -l, diag -r <1-4> [-j])\n')
        return 0 if argv else 1
    if argv[0] not in ('discovery', 'diag'):
        sys.stderr.write('dcgmi (simulated fleet): only discovery -l and diag -r are simulated\n')
        return 255
    if not hostengine_running():
        sys.stdout.write(NO_HOST_ENGINE)
        return RC_NO_HOST_ENGINE
    profile, state, gpus = _gpus_and_state()
    if argv[0] == 'discovery':
        sys.stdout.write(discovery_text(profile, gpus))
        return 0
    level = _level(argv)
    if level not in ('1', '2', '3', '4'):
        sys.stdout.write('Error: {0} is not a valid run level or test name.\n'.format(level))
        return 255
    doc, failed = diag_document(profile, state, gpus, int(level))
    if '-j' in argv or '--json' in argv:
        sys.stdout.write(styled(doc) + '\n')
    else:
        sys.stdout.write('Successfully ran diagnostic for group.\n')
    return RC_NVVS_ERROR if failed else 0


def hostengine(argv):
    """nv-hostengine -n: stays in the foreground while the driver is loaded; writes its PID as the marker dcgmi
    connects through."""
    profile = gd.load_profile()
    state = gd.ensure_state(profile)
    if not state['driver'].get('loaded'):
        sys.stdout.write('nv-hostengine: DCGM failed to initialize: the NVIDIA driver is not loaded (NVML)\n')
        return 1
    gd.write_text(HOSTENGINE_MARKER, '{0}\n'.format(os.getpid()))
    sys.stdout.write('Started host engine version {0} using port number: 5555\n'.format(VERSION))
    sys.stdout.flush()

    def stop(signum, frame):
        marker = gd.path(HOSTENGINE_MARKER)
        if os.path.exists(marker):
            os.remove(marker)
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        time.sleep(3600)
