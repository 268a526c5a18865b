# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The bad-input table: every module and role refuses bad input before it changes anything.

Module cases run the module's main() against fake nvidia-smi/ethtool scripts that log every argv they get, and
assert the exact message, ``changed`` false and that no write command ran. Role cases run ONE generated playbook
(--check, connection local) whose blocks include each role with bad variables and record, in a rescue, the failed
task and its message; the cases then read that record. Nothing in these cases may pass validation.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import re
import stat
import subprocess
import sys

import pytest
import yaml

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import (
    FIXTURES, ROOT, ansible_bin, ansible_env, fake_tool, logged, run_main)

from ansible_collections.gpufleet.nodeprep.plugins.modules import nic_offload, nvidia_gpu

HERE = os.path.dirname(os.path.abspath(__file__))
B200 = os.path.join(FIXTURES, 'nvidia-smi-xml', 'b200-8gpu_k8s-test-infra.xml')
H100 = os.path.join(FIXTURES, 'nvidia-smi-xml', 'h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml')
T4 = os.path.join(FIXTURES, 'nvidia-smi-xml', 'tesla-t4-1gpu_telegraf.xml')
RTX3090 = os.path.join(FIXTURES, 'nvidia-smi-xml', 'rtx-3090-1gpu-v13_telegraf.xml')
LO_K = os.path.join(FIXTURES, 'ethtool', 'loopback-lo_ethtool-k_hotsos.txt')

# nvidia-smi/ethtool options that change a device; none may appear in a log.
WRITE_FLAGS = ('-pm', '-pl', '-lgc', '-rgc', '-lmc', '-rmc', '-ac', '-rac', '-r', '-K', '-s', '-G', '-L')


def b200_gpus():
    with open(B200) as handle:
        buses = re.findall(r'<gpu id="([^"]+)"', handle.read())
    uuids = ['GPU-0000000{0}-0000-0000-0000-00000000000{0}'.format(i) for i in range(8)]
    return ', '.join('{0} ({1}, {2})'.format(i, bus, uuid) for i, (bus, uuid) in enumerate(zip(buses, uuids)))


TYPE_BOOL = ("argument 'persistence_mode' is of type str and we were unable to convert to bool: The value 'maybe' "
             "is not a valid boolean. Valid booleans include: ")

# (id, fixture, args, exact message, or None when the message is checked by `contains`, contains)
NVIDIA_GPU_CASES = [
    ('nvidia_gpu power above max', B200, {'gpus': ['0'], 'power_limit': 1200},
     'GPU 0 (00000000:8F:00.0): power_limit 1200 W is outside the allowed range 200.00-1000.00 W'),
    ('nvidia_gpu power above max H100', H100, {'gpus': ['1'], 'power_limit': '701W'},
     'GPU 1 (00000000:64:00.0): power_limit 701 W is outside the allowed range 200.00-700.00 W'),
    ('nvidia_gpu power percent below min', B200, {'gpus': ['3'], 'power_limit': '10%'},
     'GPU 3 (00000000:97:00.0): power_limit 10% of the default 1000.00 W = 100 W is outside the allowed range '
     '200.00-1000.00 W'),
    ('nvidia_gpu power percent above max', B200, {'power_limit': '150%'},
     'GPU 0 (00000000:8F:00.0): power_limit 150% of the default 1000.00 W = 1500 W is outside the allowed range '
     '200.00-1000.00 W'),
    ('nvidia_gpu power not a number', B200, {'power_limit': 'lots'},
     "power_limit must be watts (e.g. 700) or a percentage of the default limit (e.g. \"70%\"), got 'lots'"),
    ('nvidia_gpu power negative', B200, {'power_limit': -5},
     'power_limit must be watts (e.g. 700) or a percentage of the default limit (e.g. "70%"), got -5'),
    ('nvidia_gpu power boolean', B200, {'power_limit': True},
     'power_limit must be watts (e.g. 700) or a percentage of the default limit (e.g. "70%"), got True'),
    ('nvidia_gpu power list', B200, {'power_limit': [700]},
     'power_limit must be watts (e.g. 700) or a percentage of the default limit (e.g. "70%"), got [700]'),
    ('nvidia_gpu unknown GPU index', B200, {'gpus': ['8'], 'power_limit': 700},
     "gpus: no GPU matches '8'; GPUs present: " + b200_gpus()),
    ('nvidia_gpu unknown GPU UUID', RTX3090, {'gpus': ['GPU-deadbeef'], 'persistence_mode': True},
     "gpus: no GPU matches 'GPU-deadbeef'; GPUs present: 0 (00000000:09:00.0, "
     "GPU-12345678-aaaa-bbbb-cccc-0123456789ab)"),
    ('nvidia_gpu unknown GPU bus id', RTX3090, {'gpus': ['0000:0a:00.0'], 'persistence_mode': True},
     "gpus: no GPU matches '0000:0a:00.0'; GPUs present: 0 (00000000:09:00.0, "
     "GPU-12345678-aaaa-bbbb-cccc-0123456789ab)"),
    ('nvidia_gpu all plus other', B200, {'gpus': ['all', '0'], 'power_limit': 700},
     "gpus: \"all\" cannot be combined with other entries, got ['all', '0']"),
    ('nvidia_gpu locked clocks above max', B200, {'gpus': ['0'], 'locked_gpu_clocks': {'min': 1500, 'max': 2100}},
     'GPU 0 (00000000:8F:00.0): locked_gpu_clocks 1500-2100 MHz is outside the supported range 120-1965 MHz'),
    ('nvidia_gpu locked memory clocks above max', B200, {'gpus': ['0'], 'locked_memory_clocks': {'min': 3996,
                                                                                                 'max': 9000}},
     'GPU 0 (00000000:8F:00.0): locked_memory_clocks 3996-9000 MHz is outside the supported range 3402-3996 MHz'),
    ('nvidia_gpu locked clocks min above max', B200, {'locked_gpu_clocks': {'min': 1900, 'max': 1500}},
     'locked_gpu_clocks: min (1900) must be at least 1 and not above max (1500)'),
    ('nvidia_gpu locked clocks zero', B200, {'locked_gpu_clocks': {'min': 0, 'max': 1500}},
     'locked_gpu_clocks: min (0) must be at least 1 and not above max (1500)'),
    ('nvidia_gpu locked clocks not a number', B200, {'locked_gpu_clocks': {'min': 'fast', 'max': 1500}},
     "locked_gpu_clocks.min must be an integer number of MHz, got 'fast'"),
    ('nvidia_gpu locked clocks bad shape', B200, {'locked_memory_clocks': {'low': 1}},
     "locked_memory_clocks must be \"reset\" or a dict with the keys min and max (MHz), got {'low': 1}"),
    ('nvidia_gpu locked clocks bad word', B200, {'locked_gpu_clocks': 'off'},
     "locked_gpu_clocks must be \"reset\" or a dict with the keys min and max (MHz), got 'off'"),
    ('nvidia_gpu app clocks bad memory', T4, {'applications_clocks': {'memory': 6000, 'graphics': 1590}},
     'GPU 0 (00000000:00:1E.0): applications_clocks memory 6000 MHz is not supported; supported memory clocks: '
     '5001, 405'),
    ('nvidia_gpu app clocks bad graphics', T4, {'applications_clocks': {'memory': 405, 'graphics': 1590}},
     'GPU 0 (00000000:00:1E.0): applications_clocks graphics 1590 MHz is not supported with memory 405 MHz; '
     'supported graphics clocks: 645, 630, 615, 600, 585, 570, 555, 540, 525, 510, 495, 480, 465, 450, 435, 420, '
     '405, 390, 375, 360, 345, 330, 315, 300'),
    ('nvidia_gpu app clocks deprecated', RTX3090, {'applications_clocks': {'memory': 9751, 'graphics': 2100}},
     'GPU 0 (00000000:09:00.0): the driver reports applications clocks as deprecated ("Requested functionality has '
     'been deprecated"); use locked_gpu_clocks and locked_memory_clocks (nvidia-smi -lgc/-lmc) instead'),
    ('nvidia_gpu app clocks bad shape', T4, {'applications_clocks': {'memory': 5001}},
     "applications_clocks must be \"reset\" or a dict with the keys memory and graphics (MHz), got {'memory': 5001}"),
    ('nvidia_gpu timeout zero', B200, {'power_limit': 700, 'timeout': 0},
     'timeout must be at least 1 second, got 0'),
    ('nvidia_gpu wrong type persistence_mode', B200, {'persistence_mode': 'maybe'}, TYPE_BOOL),
    ('nvidia_gpu wrong type timeout', B200, {'power_limit': 700, 'timeout': 'soon'},
     "argument 'timeout' is of type str and we were unable to convert to int: \"'soon'\" cannot be converted to an "
     "int"),
    ('nvidia_gpu empty gpus list', B200, {'gpus': [], 'power_limit': 700},
     'gpus is empty; give "all" or at least one GPU index, UUID or PCI bus id'),
    # Tracebacks before (issue 11): float('inf') reached int(), and '\u00b2'.isdigit() is true but int() refuses it.
    ('nvidia_gpu power infinite percent', B200, {'power_limit': 'inf%'},
     "power_limit must be watts (e.g. 700) or a percentage of the default limit (e.g. \"70%\"), got 'inf%'"),
    ('nvidia_gpu power infinite watts', B200, {'power_limit': 'inf'},
     "power_limit must be watts (e.g. 700) or a percentage of the default limit (e.g. \"70%\"), got 'inf'"),
    ('nvidia_gpu GPU a superscript digit', B200, {'gpus': ['\u00b2'], 'power_limit': 700},
     "gpus: no GPU matches '\u00b2'; GPUs present: " + b200_gpus()),
    # Volatile settings with persistence off and no nvidia-persistenced would be lost when nvidia-smi exits (R15).
    ('nvidia_gpu power limit without persistence', B200, {'gpus': ['0'], 'power_limit': 700},
     'GPU 0 (00000000:8F:00.0): power_limit would be lost as soon as the last nvidia-smi client exits: persistence '
     'mode is disabled and nvidia-persistenced is not running; enable nvidia-persistenced (the nvidia_driver role '
     'does) or set persistence_mode: true'),
    ('nvidia_gpu clock lock with persistence turned off', H100, {'gpus': ['0'], 'persistence_mode': False,
                                                                 'locked_gpu_clocks': {'min': 1500, 'max': 1980}},
     'GPU 0 (00000000:53:00.0): locked_gpu_clocks would be lost as soon as the last nvidia-smi client exits: '
     'persistence mode is to be disabled and nvidia-persistenced is not running; enable nvidia-persistenced (the '
     'nvidia_driver role does) or set persistence_mode: true'),
]


def _case_id(case):
    return case.values[0] if hasattr(case, 'values') else case[0]


@pytest.mark.parametrize('name, fixture, args, message', NVIDIA_GPU_CASES,
                         ids=[_case_id(c) for c in NVIDIA_GPU_CASES])
def test_nvidia_gpu_refuses(tmp_path, capsys, name, fixture, args, message):
    smi, log = fake_tool(tmp_path, 'nvidia-smi', [('-q', fixture)])
    args = dict(args, nvidia_smi=smi, state_dir=str(tmp_path / 'state'))
    result = run_main(nvidia_gpu.main, args, capsys)
    assert result.get('failed') is True, result
    if message.endswith('include: '):
        assert result['msg'].startswith(message)
    else:
        assert result['msg'] == message
    assert result.get('changed', False) is False
    assert result.get('commands', []) == []
    assert [argv for argv in logged(log) if set(argv) & set(WRITE_FLAGS)] == []
    assert logged(log) in ([], [['-q', '-x']])
    assert not os.path.exists(str(tmp_path / 'state'))


SMALL_K = 'Features for veth1:\ngeneric-receive-offload: off\nhighdma: on [fixed]\nrx-gro-list: off\n'

# (id, args, exact message)
NIC_OFFLOAD_CASES = [
    ('nic_offload unknown feature', {'interface': 'lo', 'features': {'rdma-offload': False}},
     "interface lo: unknown feature 'rdma-offload'; the features this device has are: "),
    ('nic_offload unknown feature among known ones', {'interface': 'lo', 'features': {'gro': False,
                                                                                      'nvlink-offload': True}},
     "interface lo: unknown feature 'nvlink-offload'; the features this device has are: "),
    ('nic_offload fixed feature', {'interface': 'lo', 'features': {'netns-local': False}},
     'interface lo: fixed by the driver, cannot change: netns-local (is on, asked off); set ignore_fixed to skip '
     'them'),
    ('nic_offload fixed feature by short name', {'interface': 'lo', 'features': {'lro': True}},
     'interface lo: fixed by the driver, cannot change: large-receive-offload [lro] (is off, asked on); '
     'set ignore_fixed to skip them'),
    ('nic_offload value not a boolean', {'interface': 'lo', 'features': {'gro': 'maybe'}},
     "features: the value for 'gro' is 'maybe'; expected a boolean (true/false, yes/no, on/off)"),
    ('nic_offload no features', {'interface': 'lo', 'features': {}},
     'features is empty; give at least one feature name and its wanted state'),
    ('nic_offload no interface', {'interface': [], 'features': {'gro': False}},
     'interface is empty; name at least one interface'),
    ('nic_offload wrong type features', {'interface': 'lo', 'features': ['gro']},
     "argument 'features' is of type list and we were unable to convert to dict: "),
]


@pytest.mark.parametrize('name, args, message', NIC_OFFLOAD_CASES, ids=[c[0] for c in NIC_OFFLOAD_CASES])
def test_nic_offload_refuses(tmp_path, monkeypatch, capsys, name, args, message):
    ethtool, log = fake_tool(tmp_path, 'ethtool', [('-k', LO_K)])
    monkeypatch.setattr(AnsibleModule, 'get_bin_path',
                        lambda self, tool, required=False, opt_dirs=None: ethtool if tool == 'ethtool' else None)
    result = run_main(nic_offload.main, args, capsys)
    assert result.get('failed') is True, result
    if message.endswith(': '):
        assert result['msg'].startswith(message)
        if 'unknown feature' in message:
            assert ', generic-receive-offload, ' in result['msg']
            assert result['msg'].endswith('; ethtool -K also takes the short names: rx, tx, sg, tso, gso, gro, lro, '
                                          'rxvlan, txvlan, ntuple, rxhash')
    else:
        assert result['msg'] == message
    assert result.get('changed', False) is False
    assert [argv for argv in logged(log) if set(argv) & set(WRITE_FLAGS)] == []
    assert all(argv[0] == '-k' for argv in logged(log))


# ---------------------------------------------------------------------------------------------------------------
# GPU defects found by bad input (issue 11): cases where the module must act, or fail telling the truth, rather
# than refuse up front. Each runs main() against a fake nvidia-smi that logs its argv, prints the given XML for
# -q -x with the given exit status and stderr, and fails the writes named in `fail`.

def xml_text(path, lose=None, persistence=None, break_mem_clock=None):
    """The fixture, optionally with the <gpu> block of bus id `lose` missing (attached_gpus still counts it, as
    real nvidia-smi prints it: R16), persistence mode enabled, or a <supported_mem_clock> without its value."""
    with open(path) as handle:
        text = handle.read()
    if lose:
        start = text.index('<gpu id="{0}">'.format(lose))
        end = text.index('</gpu>', start) + len('</gpu>')
        text = text[:start] + text[end:]
    if persistence:
        text = text.replace('<persistence_mode>Disabled</persistence_mode>',
                            '<persistence_mode>Enabled</persistence_mode>')
    if break_mem_clock:
        text = text.replace('<value>{0} MHz</value>'.format(break_mem_clock), '<value></value>')
    return text


def fake_smi(folder, xml, rc=0, stderr='', fail=()):
    """nvidia-smi stand-in: -q -x prints `xml` (exit rc, stderr); a write whose argv contains a string of `fail`
    exits 2 with "Invalid combination of input arguments."; every other write prints "All done."."""
    folder = str(folder)
    log = os.path.join(folder, 'nvidia-smi.log')
    xml_path = os.path.join(folder, 'smi.xml')
    with open(xml_path, 'w') as handle:
        handle.write(xml)
    path = os.path.join(folder, 'nvidia-smi')
    lines = ['#!/bin/sh', 'printf "%s\\n" "$*" >> "{0}"'.format(log),
             'if [ "$1" = "-q" ]; then cat "{0}"; printf "%s" "{1}" >&2; exit {2}; fi'.format(xml_path, stderr, rc)]
    for word in fail:
        lines.append('case "$*" in *"{0}"*) echo "Invalid combination of input arguments." >&2; exit 2;; esac'.format(
            word))
    lines += ['echo "All done."', 'exit 0', '']
    with open(path, 'w') as handle:
        handle.write('\n'.join(lines))
    os.chmod(path, stat.S_IRWXU)
    return path, log


LOST = 'Unable to determine the device handle for gpu 0000:97:00.0: Unknown Error\nGPU is lost. Reboot the system ' \
       'to recover this GPU\n'
B200_LOST_BUSES = '00000000:8F:00.0, 00000000:90:00.0, 00000000:96:00.0, 00000000:C4:00.0, 00000000:C5:00.0, ' \
                  '00000000:CB:00.0, 00000000:CC:00.0'


# (id, xml, -q rc, -q stderr, args, writes that fail, expected result items, expected writes)
NVIDIA_GPU_DEFECTS = [
    # reset after the boot unit (not this module) locked the clocks this boot: it must reset, not trust "no record".
    ('nvidia_gpu reset after the boot unit locked the clocks', xml_text(B200), 0, '',
     {'gpus': ['0'], 'locked_gpu_clocks': 'reset', 'locked_memory_clocks': 'reset'}, (),
     {'changed': True}, [['-i', '00000000:8F:00.0', '-rgc'], ['-i', '00000000:8F:00.0', '-rmc']]),
    # A lost GPU: index 4 is C4:00.0 for nvidia-smi, but the 4th block printed is C5:00.0.
    ('nvidia_gpu index with a lost GPU, nvidia-smi exit 15', xml_text(B200, lose='00000000:97:00.0'), 15, LOST,
     {'gpus': ['4'], 'locked_gpu_clocks': 'reset'}, (),
     {'failed': True, 'changed': False,
      'msg': 'gpus: index 4 is ambiguous: nvidia-smi reports 8 attached GPUs but printed 7 (a GPU is lost, and '
             'nvidia-smi keeps the indexes of the others); name the GPUs by PCI bus id instead: ' + B200_LOST_BUSES},
     []),
    ('nvidia_gpu index with a lost GPU, nvidia-smi exit 0', xml_text(B200, lose='00000000:97:00.0'), 0, '',
     {'gpus': ['4'], 'locked_gpu_clocks': 'reset'}, (),
     {'failed': True,
      'msg': 'gpus: index 4 is ambiguous: nvidia-smi reports 8 attached GPUs but printed 7 (a GPU is lost, and '
             'nvidia-smi keeps the indexes of the others); name the GPUs by PCI bus id instead: ' + B200_LOST_BUSES},
     []),
    ('nvidia_gpu bus id with a lost GPU, nvidia-smi exit 15', xml_text(B200, lose='00000000:97:00.0'), 15, LOST,
     {'gpus': ['C4:00.0'], 'locked_gpu_clocks': 'reset'}, (),
     {'changed': True, 'partial': True}, [['-i', '00000000:C4:00.0', '-rgc']]),
    # The first GPU took the limit, the second refused it: the node changed, and the result must say so.
    ('nvidia_gpu second GPU fails after the first took the limit', xml_text(H100), 0, '',
     {'gpus': ['0', '1'], 'power_limit': 600}, ('00000000:64:00.0',),
     {'failed': True, 'changed': True,
      'msg': '{0} -i 00000000:64:00.0 -pl 600 failed with rc 2: Invalid combination of input arguments.'},
     [['-i', '00000000:53:00.0', '-pl', '600'], ['-i', '00000000:64:00.0', '-pl', '600']]),
    # A <supported_mem_clock> without a value was dropped, so 3402 MHz (a real memory clock) was refused.
    ('nvidia_gpu malformed supported_mem_clock does not refuse a valid clock',
     xml_text(B200, persistence=True, break_mem_clock=3402), 0, '',
     {'gpus': ['0'], 'locked_memory_clocks': {'min': 3402, 'max': 3996}}, (),
     {'changed': True}, [['-i', '00000000:8F:00.0', '-lmc', '3402,3996']]),
]


@pytest.mark.parametrize('name, xml, rc, stderr, args, fail, expected, writes', NVIDIA_GPU_DEFECTS,
                         ids=[c[0] for c in NVIDIA_GPU_DEFECTS])
def test_nvidia_gpu_defects(tmp_path, capsys, name, xml, rc, stderr, args, fail, expected, writes):
    smi, log = fake_smi(tmp_path, xml, rc, stderr, fail)
    args = dict(args, nvidia_smi=smi, state_dir=str(tmp_path / 'state'))
    result = run_main(nvidia_gpu.main, args, capsys)
    for key, value in expected.items():
        if key == 'msg':
            value = value.format(smi)
        assert result.get(key, False) == value, (key, result)
    assert [argv for argv in logged(log) if argv[:2] != ['-q', '-x']] == writes


def test_nvidia_gpu_reset_after_the_boot_replay_locked(tmp_path, capsys):
    """The boot unit replays -lgc and records it; a later reset resets, and a lock again is then a change."""
    import importlib.machinery
    import importlib.util
    script_path = os.path.join(ROOT, 'roles', 'gpu_settings', 'files', 'nodeprep-gpu-settings')
    loader = importlib.machinery.SourceFileLoader('nodeprep_gpu_settings_script', script_path)
    spec = importlib.util.spec_from_loader('nodeprep_gpu_settings_script', loader)
    script = importlib.util.module_from_spec(spec)
    loader.exec_module(script)
    smi, log = fake_smi(tmp_path, xml_text(B200, persistence=True))
    state = str(tmp_path / 'state')
    replay = str(tmp_path / 'gpu-settings.replay')
    lock = {'gpus': ['0'], 'locked_gpu_clocks': {'min': 1500, 'max': 1965}}
    result = run_main(nvidia_gpu.main, dict(lock, nvidia_smi=smi, state_dir=state, replay_file=replay), capsys)
    assert result['changed'] is True
    assert result['replay']['commands'] == [[smi, '-i', '00000000:8F:00.0', '-lgc', '1500,1965']]
    # Reboot: /run is emptied, the unit replays the file and records the lock.
    import shutil
    shutil.rmtree(state)
    rc = script.main([replay], out=open(os.devnull, 'w'), err=open(os.devnull, 'w'),
                     boot_id=nvidia_gpu.boot_id)
    assert rc == 0
    os.remove(log)
    result = run_main(nvidia_gpu.main, dict(lock, nvidia_smi=smi, state_dir=state, replay_file=replay), capsys)
    assert (result['changed'], logged(log)) == (False, [['-q', '-x']])
    result = run_main(nvidia_gpu.main, dict(gpus=['0'], locked_gpu_clocks='reset', nvidia_smi=smi, state_dir=state),
                      capsys)
    assert result['changed'] is True
    assert logged(log)[-1] == ['-i', '00000000:8F:00.0', '-rgc']


@pytest.mark.parametrize('main_module', ['nvidia_gpu_facts', 'gpu_node_facts'])
def test_facts_keep_the_gpus_printed_before_exit_15(tmp_path, capsys, main_module):
    """nvidia-smi exit 15 after printing XML: keep the 7 GPUs, stderr is the error, partial is true."""
    from ansible_collections.gpufleet.nodeprep.plugins.modules import gpu_node_facts, nvidia_gpu_facts
    smi, log = fake_smi(tmp_path, xml_text(B200, lose='00000000:97:00.0'), 15, LOST)
    if main_module == 'nvidia_gpu_facts':
        result = run_main(nvidia_gpu_facts.main, {'nvidia_smi': smi, 'include_supported_clocks': False}, capsys)
    else:
        result = run_main(gpu_node_facts.main, {'nvidia_smi': smi, 'gather_subset': ['nvidia'],
                                                'nvidia_supported_clocks': False}, capsys)
    facts = result['ansible_facts']['nvidia']
    assert (facts['present'], facts['partial'], facts['attached_gpus'], len(facts['gpus'])) == (True, True, 8, 7)
    assert facts['error'] == LOST.strip()
    assert '00000000:97:00.0' not in [g['pci_bus_id'] for g in facts['gpus']]
    if main_module == 'gpu_node_facts':
        assert result['ansible_facts']['nodeprep_errors'] == {
            'nvidia': 'nvidia facts: partial, nvidia-smi failed after printing 7 GPUs: ' + LOST.strip()}


def test_nic_offload_changed_after_one_feature_applied(tmp_path, monkeypatch, capsys):
    """ethtool -K applied gro, then failed on tso: changed is true together with the failure."""
    with open(LO_K) as handle:
        before = handle.read()
    after = before.replace('generic-receive-offload: on', 'generic-receive-offload: off')
    folder = str(tmp_path)
    with open(os.path.join(folder, 'before.txt'), 'w') as handle:
        handle.write(before)
    with open(os.path.join(folder, 'after.txt'), 'w') as handle:
        handle.write(after)
    log = os.path.join(folder, 'ethtool.log')
    path = os.path.join(folder, 'ethtool')
    with open(path, 'w') as handle:
        handle.write('#!/bin/sh\nprintf "%s\\n" "$*" >> "{0}"\n'
                     'if [ "$1" = "-K" ]; then touch "{1}/applied"; '
                     'echo "Could not change any device features" >&2; exit 1; fi\n'
                     'if [ -e "{1}/applied" ]; then cat "{1}/after.txt"; else cat "{1}/before.txt"; fi\n'.format(
                         log, folder))
    os.chmod(path, stat.S_IRWXU)
    monkeypatch.setattr(AnsibleModule, 'get_bin_path',
                        lambda self, tool, required=False, opt_dirs=None: path if tool == 'ethtool' else None)
    result = run_main(nic_offload.main, {'interface': 'lo', 'features': {'gro': False, 'tso': False}}, capsys)
    assert result['failed'] is True
    assert result['changed'] is True
    assert result['msg'].startswith('interface lo: ethtool -K failed (rc=1): Could not change any device features')
    assert result['interfaces']['lo']['changed'] is True


# ---------------------------------------------------------------------------------------------------------------
# Roles: one ansible-playbook run, every case a block with a rescue that records the failed task and its message.

SPEC = "Validating arguments against arg spec 'main' - "
# Each role's first task, gpufleet.nodeprep.node_plan with fail_on_problems, stops the node on its plan's problems,
# errors and missing facts, in the plan's words: '<role> on <host>: invalid settings: ...; <errors>'.
PROLOGUE = '{0}; stops here on settings the role cannot use and on what the node lacks'
GPU_ASSERT = PROLOGUE.format('Plan the GPU settings')
NCCL_ASSERT = PROLOGUE.format('Plan the NCCL files')
NCCL_STRICT = NCCL_ASSERT  # one task fails on every problem of the plan
SHM_ASSERT = PROLOGUE.format('Plan /dev/shm')
MEMLOCK_ASSERT = PROLOGUE.format('Plan the memlock limits of this node')
NIC_ASSERT = PROLOGUE.format('Plan the NIC offload features')
# The kernel role's plan (_plan_kernel) refuses a source the platform lacks; the role fails on it first.
KERNEL_SOURCE = PROLOGUE.format('Plan the kernel')
KERNEL_ELREPO = KERNEL_SOURCE
# The nvidia_driver role's plan (node_plan, _plan_nvidia_driver) makes the cross-field refusals settings problems; the
# role fails on them in its first task, before anything else (they were separate asserts in validate.yml).
DRIVER_PLAN = PROLOGUE.format('Plan the driver')
DRIVER_BRANCH = DRIVER_PLAN
DRIVER_VERSION = DRIVER_PLAN
DRIVER_RUNFILE = DRIVER_PLAN
DRIVER_BLACKWELL = DRIVER_PLAN
GPU_ALLOWED = 'null or watts (e.g. 700) or a percentage of the default limit (e.g. "70%"), above 0'
CLOCKS_ALLOWED = 'null, "reset", or {min: MHz, max: MHz} with 0 < min <= max'
GPUS_ALLOWED = 'expected "all", or a list of GPU indexes (0), UUIDs (GPU-...) or PCI bus ids (00000000:8F:00.0)'
SHM_ALLOWED = 'not a size; allowed: bytes, or a number with K, M, G, T or P (base 1024; KiB/KB forms too)'
MEMLOCK_FILE_ALLOWED = ('allowed: a file pam_limits reads, /etc/security/limits.conf or /etc/security/limits.d/<name>.conf '
                        '(an absolute path, a name ending in .conf, not hidden)')
MEMLOCK_VALUE_ALLOWED = ('allowed: "unlimited" or a positive number of KiB, as an integer or a string of digits '
                         '(such as 65536)')
# The typing of node_plan (plugins/plugin_utils/_plans.py), for every setting of every role.
NUMBER_ALLOWED = 'allowed: a finite number from -9223372036854775808 to 9223372036854775807'
PATH_ALLOWED = 'allowed: an absolute path on the node as written (no ~ or $VARIABLE: the controller would expand them'

# The platform the el10 host pretends to run (the kernel role reads only these facts to decide).
EL10_FACTS = {'distribution': 'Rocky', 'os_family': 'RedHat', 'distribution_major_version': '10',
              'distribution_version': '10.0', 'distribution_release': 'Red Quartz', 'architecture': 'x86_64'}

# (id, host, role, variables, failing task, parts the message must contain)
ROLE_CASES = [
    ('gpu_settings power not a number', 'localhost', 'gpu_settings', {'nodeprep_gpu_settings_power_limit': 'lots'},
     GPU_ASSERT, ['nodeprep_gpu_settings_power_limit="lots"', GPU_ALLOWED]),
    ('gpu_settings power negative', 'localhost', 'gpu_settings', {'nodeprep_gpu_settings_power_limit': -100},
     GPU_ASSERT, ['nodeprep_gpu_settings_power_limit=-100', GPU_ALLOWED]),
    ('gpu_settings power zero percent', 'localhost', 'gpu_settings', {'nodeprep_gpu_settings_power_limit': '0%'},
     GPU_ASSERT, ['nodeprep_gpu_settings_power_limit="0%"', GPU_ALLOWED]),
    ('gpu_settings locked clocks min above max', 'localhost', 'gpu_settings',
     {'nodeprep_gpu_settings_locked_gpu_clocks': {'min': 1900, 'max': 1500}},
     GPU_ASSERT, ['nodeprep_gpu_settings_locked_gpu_clocks={"max": 1500, "min": 1900}', CLOCKS_ALLOWED]),
    ('gpu_settings locked memory clocks a word', 'localhost', 'gpu_settings',
     {'nodeprep_gpu_settings_locked_memory_clocks': 'fast'},
     GPU_ASSERT, ['nodeprep_gpu_settings_locked_memory_clocks="fast"', CLOCKS_ALLOWED]),
    ('gpu_settings empty GPU list', 'localhost', 'gpu_settings', {'nodeprep_gpu_settings_gpus': []},
     GPU_ASSERT, ['nodeprep_gpu_settings_gpus=[]: ' + GPUS_ALLOWED]),
    ('gpu_settings GPUs a word', 'localhost', 'gpu_settings', {'nodeprep_gpu_settings_gpus': 'first'},
     GPU_ASSERT, ['nodeprep_gpu_settings_gpus=["first"]: "first" is not a GPU index, UUID or PCI bus id; '
                  + GPUS_ALLOWED]),
    # It passed validation, then nvidia_gpu failed on GPU "A" (the letters of "ALL").
    ('gpu_settings GPUs ALL', 'localhost', 'gpu_settings', {'nodeprep_gpu_settings_gpus': 'ALL'},
     GPU_ASSERT, ['nodeprep_gpu_settings_gpus=["ALL"]: "ALL" is not a GPU index, UUID or PCI bus id; '
                  + GPUS_ALLOWED]),
    ('gpu_settings wrong type timeout', 'localhost', 'gpu_settings', {'nodeprep_gpu_settings_timeout': 'soon'},
     SPEC, ['nodeprep_gpu_settings_timeout', "'soon'", 'int']),
    ('gpu_settings wrong type persistence', 'localhost', 'gpu_settings',
     {'nodeprep_gpu_settings_persistence_mode': 'maybe'},
     SPEC, ['nodeprep_gpu_settings_persistence_mode', "'maybe'", 'bool']),
    ('gpu_settings app clocks without graphics', 'localhost', 'gpu_settings',
     {'nodeprep_gpu_settings_applications_clocks': {'memory': 5001}},
     SPEC, ['missing required arguments: graphics', 'nodeprep_gpu_settings_applications_clocks']),
    ('nccl strict invented NCCL_TIMEOUT', 'localhost', 'nccl',
     {'nodeprep_nccl_strict': True, 'nodeprep_nccl_conf': {'NCCL_TIMEOUT': 1800}},
     NCCL_STRICT, ['nodeprep_nccl_conf.NCCL_TIMEOUT: NCCL never reads it']),
    ('nccl strict invented PYTORCH_ENABLE_FP8', 'localhost', 'nccl',
     {'nodeprep_nccl_strict': True, 'nodeprep_nccl_torch_env': {'PYTORCH_ENABLE_FP8': 1}},
     NCCL_STRICT, ['nodeprep_nccl_torch_env.PYTORCH_ENABLE_FP8: no framework reads it']),
    ('nccl strict unknown name', 'localhost', 'nccl',
     {'nodeprep_nccl_strict': True, 'nodeprep_nccl_conf': {'NCCL_IB_HCA': '=mlx5_0', 'NCCL_MAGIC_SPEED': 1}},
     NCCL_STRICT, ['nodeprep_nccl_conf.NCCL_MAGIC_SPEED: not a variable NCCL reads',
                   'add it to nodeprep_nccl_extra_names']),
    ('nccl strict torch name in nccl.conf', 'localhost', 'nccl',
     {'nodeprep_nccl_strict': True, 'nodeprep_nccl_conf': {'TORCH_NCCL_BLOCKING_WAIT': 1}},
     NCCL_STRICT, ['nodeprep_nccl_conf.TORCH_NCCL_BLOCKING_WAIT: read by PyTorch',
                   'put it in nodeprep_nccl_torch_env']),
    ('nccl name not an environment name', 'localhost', 'nccl', {'nodeprep_nccl_conf': {'nccl-debug': 'WARN'}},
     NCCL_ASSERT, ['names that are not environment variable names: nccl-debug',
                   'allowed: NAME matching [A-Z_][A-Z0-9_]*']),
    ('nccl value on two lines', 'localhost', 'nccl', {'nodeprep_nccl_conf': {'NCCL_DEBUG': "WARN\nNCCL_P2P_DISABLE=1"}},
     NCCL_ASSERT, ['values that are not one-line scalars: NCCL_DEBUG', 'on one line']),
    ('nccl wrong type conf', 'localhost', 'nccl', {'nodeprep_nccl_conf': ['NCCL_DEBUG=WARN']},
     SPEC, ['nodeprep_nccl_conf', 'dict']),
    ('shm size not a size', 'localhost', 'shm', {'nodeprep_shm_size': 'huge'},
     SHM_ASSERT, ['nodeprep_shm_size="huge"', SHM_ALLOWED]),
    ('shm size negative', 'localhost', 'shm', {'nodeprep_shm_size': '-1G'},
     SHM_ASSERT, ['nodeprep_shm_size="-1G"', SHM_ALLOWED]),
    ('shm size unknown unit', 'localhost', 'shm', {'nodeprep_shm_size': '64X'},
     SHM_ASSERT, ['nodeprep_shm_size="64X"', SHM_ALLOWED]),
    ('shm min size unknown unit', 'localhost', 'shm', {'nodeprep_shm_min_size': '64 gigs'},
     SHM_ASSERT, ['nodeprep_shm_min_size="64 gigs"', SHM_ALLOWED]),
    ('shm ratio zero', 'localhost', 'shm', {'nodeprep_shm_gpu_memory_ratio': 0},
     SHM_ASSERT, ['shm on localhost: invalid settings: nodeprep_shm_gpu_memory_ratio=0.0: must be a number greater than '
                  '0']),
    ('shm larger than RAM + swap', 'localhost', 'shm', {'nodeprep_shm_size': '1024T'},
     SHM_ASSERT, ['nodeprep_shm_size="1024T" gives a /dev/shm of', 'more than RAM + swap',
                  'nodeprep_shm_allow_oversize=true']),
    ('shm size zero', 'localhost', 'shm', {'nodeprep_shm_size': 0},
     SHM_ASSERT, ['nodeprep_shm_size=0: less than 1 byte (tmpfs would read size=0 as no limit)']),
    ('shm size half a byte', 'localhost', 'shm', {'nodeprep_shm_size': 0.5},
     SHM_ASSERT, ['nodeprep_shm_size=0.5: less than 1 byte (tmpfs would read size=0 as no limit)']),
    ('shm size 64ib', 'localhost', 'shm', {'nodeprep_shm_size': '64ib'},
     SHM_ASSERT, ['nodeprep_shm_size="64ib"', SHM_ALLOWED]),
    ('shm fstab neither true nor false', 'localhost', 'shm', {'nodeprep_shm_fstab': 'perhaps'},
     SPEC, ['nodeprep_shm_fstab', "'perhaps'", 'bool']),
    ('memlock value a word', 'localhost', 'memlock', {'nodeprep_memlock_value': 'lots'},
     MEMLOCK_ASSERT, ['memlock on localhost: invalid settings: nodeprep_memlock_value="lots": ' + MEMLOCK_VALUE_ALLOWED]),
    ('memlock value zero', 'localhost', 'memlock', {'nodeprep_memlock_value': 0},
     MEMLOCK_ASSERT, ['memlock on localhost: invalid settings: nodeprep_memlock_value=0: ' + MEMLOCK_VALUE_ALLOWED]),
    ('memlock value -1', 'localhost', 'memlock', {'nodeprep_memlock_value': '-1'},
     MEMLOCK_ASSERT, ['memlock on localhost: invalid settings: nodeprep_memlock_value="-1": ' + MEMLOCK_VALUE_ALLOWED]),
    ('memlock value a fraction', 'localhost', 'memlock', {'nodeprep_memlock_value': 0.5},
     MEMLOCK_ASSERT, ['memlock on localhost: invalid settings: nodeprep_memlock_value=0.5: ' + MEMLOCK_VALUE_ALLOWED]),
    ('memlock domain with a space', 'localhost', 'memlock', {'nodeprep_memlock_domains': ['bad user']},
     MEMLOCK_ASSERT, ['nodeprep_memlock_domains=["bad user"]: "bad user" is not a domain',
                      'a user, @group, %group, * or %']),
    ('memlock service with a space', 'localhost', 'memlock', {'nodeprep_memlock_services': ['slurm d']},
     MEMLOCK_ASSERT, ['nodeprep_memlock_services=["slurm d"]: "slurm d" is not a service name',
                      'systemd service names']),
    ('memlock service with a slash', 'localhost', 'memlock', {'nodeprep_memlock_services': ['../sshd']},
     MEMLOCK_ASSERT, ['nodeprep_memlock_services=["../sshd"]: "../sshd" is not a service name',
                      'no spaces or slashes']),
    ('memlock verify flag not a boolean', 'localhost', 'memlock', {'nodeprep_memlock_verify': 'maybe'},
     SPEC, ['nodeprep_memlock_verify', "'maybe'", 'bool']),
    ('memlock limits_file pam_limits never reads', 'localhost', 'memlock',
     {'nodeprep_memlock_limits_file': '/etc/passwd'},
     MEMLOCK_ASSERT, ['nodeprep_memlock_limits_file="/etc/passwd"', MEMLOCK_FILE_ALLOWED]),
    ('memlock limits_file without .conf', 'localhost', 'memlock',
     {'nodeprep_memlock_limits_file': '/etc/security/limits.d/90-nodeprep-memlock'},
     MEMLOCK_ASSERT, ['nodeprep_memlock_limits_file="/etc/security/limits.d/90-nodeprep-memlock"',
                      MEMLOCK_FILE_ALLOWED]),
    ('memlock limits_file relative', 'localhost', 'memlock',
     {'nodeprep_memlock_limits_file': 'limits.d/90-nodeprep-memlock.conf'},
     MEMLOCK_ASSERT, ['nodeprep_memlock_limits_file="limits.d/90-nodeprep-memlock.conf"', MEMLOCK_FILE_ALLOWED]),
    ('memlock limits_file hidden', 'localhost', 'memlock',
     {'nodeprep_memlock_limits_file': '/etc/security/limits.d/.90-nodeprep.conf'},
     MEMLOCK_ASSERT, ['nodeprep_memlock_limits_file="/etc/security/limits.d/.90-nodeprep.conf"',
                      MEMLOCK_FILE_ALLOWED]),
    # Issue 30: .inf, .nan and 400 digits made node_plan raise for every role, naming no variable.
    ('shm size infinite', 'localhost', 'shm', {'nodeprep_shm_size': float('inf')},
     SHM_ASSERT, ['shm on localhost: invalid settings: nodeprep_shm_size=Infinity: an infinite number; ' +
                  NUMBER_ALLOWED]),
    ('shm size NaN', 'localhost', 'shm', {'nodeprep_shm_size': float('nan')},
     SHM_ASSERT, ['nodeprep_shm_size=NaN: NaN is not a number; ' + NUMBER_ALLOWED]),
    ('shm size 400 digits', 'localhost', 'shm', {'nodeprep_shm_size': int('1' * 400)},
     SHM_ASSERT, ['nodeprep_shm_size=' + '1' * 50 + '... (400 characters): a number out of range; ' + NUMBER_ALLOWED]),
    ('shm size 400 digits as text', 'localhost', 'shm', {'nodeprep_shm_size': '1' * 400},
     SHM_ASSERT, ['nodeprep_shm_size="' + '1' * 49 + '... (402 characters): a number out of range; ' +
                  NUMBER_ALLOWED]),
    ('shm size 400 digits and G', 'localhost', 'shm', {'nodeprep_shm_size': '1' * 400 + 'G'},
     SHM_ASSERT, ['nodeprep_shm_size="' + '1' * 400 + 'G": larger than 9223372036854775807 bytes; allowed: ' +
                  SHM_ALLOWED.split('allowed: ')[1]]),
    ('shm ratio infinite', 'localhost', 'shm', {'nodeprep_shm_gpu_memory_ratio': float('inf')},
     SHM_ASSERT, ['nodeprep_shm_gpu_memory_ratio=Infinity: an infinite number; ' + NUMBER_ALLOWED]),
    ('shm path under ~', 'localhost', 'shm', {'nodeprep_shm_path': '~/shm'},
     SHM_ASSERT, ['nodeprep_shm_path="~/shm": ~ is not expanded on the node; ' + PATH_ALLOWED]),
    ('nccl conf path with a trailing newline', 'localhost', 'nccl', {'nodeprep_nccl_conf_path': '/etc/nccl.conf\n'},
     NCCL_ASSERT, ['nodeprep_nccl_conf_path="/etc/nccl.conf\\n": has a newline; ' + PATH_ALLOWED]),
    ('nccl torch env path under $HOME', 'localhost', 'nccl', {'nodeprep_nccl_torch_env_path': '$HOME/torch.sh'},
     NCCL_ASSERT, ['nodeprep_nccl_torch_env_path="$HOME/torch.sh": $ is not expanded on the node; ' + PATH_ALLOWED]),
    ('memlock limits file with a trailing newline', 'localhost', 'memlock',
     {'nodeprep_memlock_limits_file': '/etc/security/limits.d/90-nodeprep-memlock.conf\n'},
     MEMLOCK_ASSERT, ['nodeprep_memlock_limits_file="/etc/security/limits.d/90-nodeprep-memlock.conf\\n": has a '
                      'newline; ' + MEMLOCK_FILE_ALLOWED + '; ' + PATH_ALLOWED]),
    ('memlock services with an empty item', 'localhost', 'memlock', {'nodeprep_memlock_services': 'slurmd,,sshd'},
     MEMLOCK_ASSERT, ['nodeprep_memlock_services="slurmd,,sshd": has an empty item']),
    ('nccl gpu_node 2', 'localhost', 'nccl', {'nodeprep_gpu_node': 2},
     NCCL_ASSERT, ['nodeprep_gpu_node=2: allowed: auto, true or false (true and false also as Ansible reads '
                   'booleans: yes/no, on/off, y/n, t/f, 1/0 as text or numbers)']),
    ('nvidia_driver conflicting unit with a space', 'localhost', 'nvidia_driver',
     {'nodeprep_nvidia_driver_persistence_conflicting_units': 'nvidia pm'},
     DRIVER_PLAN, ['nodeprep_nvidia_driver_persistence_conflicting_units="nvidia pm": the node cannot be asked about '
                   "it: units: 'nvidia pm' is not a unit name"]),
    ('nic_offload role value not a boolean', 'localhost', 'nic_offload',
     {'nodeprep_nic_offload_features': {'gro': 'maybe'}, 'nodeprep_nic_offload_interfaces': ['lo']},
     NIC_ASSERT, ['invalid settings: nodeprep_nic_offload_features={"gro": "maybe"}: feature name -> true/false',
                  'not true or false: gro']),
    ('nic_offload role value 0.5', 'localhost', 'nic_offload',
     {'nodeprep_nic_offload_features': {'gro': 0.5}, 'nodeprep_nic_offload_interfaces': ['lo']},
     NIC_ASSERT, ['invalid settings: nodeprep_nic_offload_features={"gro": 0.5}: feature name -> true/false',
                  'not true or false: gro']),
    ('nic_offload role features as a list', 'localhost', 'nic_offload',
     {'nodeprep_nic_offload_features': ['gro'], 'nodeprep_nic_offload_interfaces': ['lo']},
     SPEC, ['nodeprep_nic_offload_features', 'dict']),
    ('nic_offload role no selector', 'localhost', 'nic_offload', {'nodeprep_nic_offload_features': {'gro': False}},
     NIC_ASSERT, ['at least one of nodeprep_nic_offload_interfaces, _drivers or _networks']),
    ('nic_offload role network not a network', 'localhost', 'nic_offload',
     {'nodeprep_nic_offload_features': {'gro': False}, 'nodeprep_nic_offload_networks': 'fabric'},
     NIC_ASSERT, ['invalid settings: nodeprep_nic_offload_networks=["fabric"]: ',
                  "nodeprep_nic_offload_networks[0] 'fabric' is not a valid network (CIDR such as 10.20.0.0/16)"]),
    ('nic_offload role unknown feature', 'localhost', 'nic_offload',
     {'nodeprep_nic_offload_features': {'rdma-offload': False}, 'nodeprep_nic_offload_interfaces': ['lo']},
     NIC_ASSERT, ["interface lo: unknown feature 'rdma-offload'; the features this device has are: ",
                  'generic-receive-offload']),
    ('nic_offload role fixed feature', 'localhost', 'nic_offload',
     {'nodeprep_nic_offload_features': {'rx-checksumming': False}, 'nodeprep_nic_offload_interfaces': ['lo']},
     NIC_ASSERT, ['interface lo: fixed by the driver, cannot change: rx-checksumming (is on, asked off)',
                  'set ignore_fixed']),
    # Issue 22: `-e nodeprep_nic_offload_ignore_fixed=false` (text) was true to the role and skipped the feature.
    ('nic_offload role fixed feature, ignore_fixed false given as text', 'localhost', 'nic_offload',
     {'nodeprep_nic_offload_features': {'rx-checksumming': False}, 'nodeprep_nic_offload_interfaces': 'lo',
      'nodeprep_nic_offload_ignore_fixed': 'false'},
     NIC_ASSERT, ['interface lo: fixed by the driver, cannot change: rx-checksumming (is on, asked off)']),
    ('nic_offload role require_match and no NIC', 'localhost', 'nic_offload',
     {'nodeprep_nic_offload_features': {'gro': False}, 'nodeprep_nic_offload_interfaces': ['nosuch0'],
      'nodeprep_nic_offload_require_match': 'yes'},
     NIC_ASSERT, ['nodeprep_nic_offload_require_match is true and no interface on localhost matches '
                  'nodeprep_nic_offload_interfaces=["nosuch0"], _drivers=[], _networks=[]; present: [']),
    ('kernel unknown source', 'localhost', 'kernel', {'nodeprep_kernel_source': 'mainline'},
     SPEC, ['nodeprep_kernel_source', 'mainline', 'distro, hwe, elrepo-lt, elrepo-ml']),
    # These fake hosts show no NVIDIA GPU on their PCI bus: nodeprep_gpu_node true keeps the kernel role's work (and
    # its refusals) there (plugins/module_utils/rules/_gpu_node.py).
    ('kernel hwe on Debian', 'localhost', 'kernel', {'nodeprep_gpu_node': True, 'nodeprep_kernel_source': 'hwe'},
     KERNEL_SOURCE, ['nodeprep_kernel_source=hwe is not available on Debian', 'allowed here: distro']),
    ('kernel elrepo-ml on Debian', 'localhost', 'kernel', {'nodeprep_gpu_node': True, 'nodeprep_kernel_source': 'elrepo-ml'},
     KERNEL_SOURCE, ['nodeprep_kernel_source=elrepo-ml is not available on Debian', 'allowed here: distro']),
    ('kernel elrepo-lt on EL10', 'el10', 'kernel', {'nodeprep_gpu_node': True, 'nodeprep_kernel_source': 'elrepo-lt'},
     KERNEL_ELREPO, ['nodeprep_kernel_source=elrepo-lt is not available on EL10', 'no kernel-lt for EL10',
                     'Allowed here: distro, elrepo-ml']),
    ('nvidia_driver branch not a branch', 'localhost', 'nvidia_driver', {'nodeprep_nvidia_driver_branch': '58'},
     DRIVER_BRANCH, ['nodeprep_nvidia_driver_branch=58 is not a driver branch', 'three-digit']),
    ('nvidia_driver version of another branch', 'localhost', 'nvidia_driver',
     {'nodeprep_nvidia_driver_branch': '580', 'nodeprep_nvidia_driver_version': '570.172.08'},
     DRIVER_VERSION, ['nodeprep_nvidia_driver_version=570.172.08 is not a version of branch',
                      'allowed: 580.<minor>[.<patch>]']),
    ('nvidia_driver runfile without version', 'localhost', 'nvidia_driver',
     {'nodeprep_nvidia_driver_method': 'runfile'},
     DRIVER_RUNFILE, ['nodeprep_nvidia_driver_method=runfile needs nodeprep_nvidia_driver_version']),
    ('nvidia_driver unknown module type', 'localhost', 'nvidia_driver',
     {'nodeprep_nvidia_driver_module_type': 'closed'},
     SPEC, ['nodeprep_nvidia_driver_module_type', 'closed', 'open, proprietary']),
    ('nvidia_driver proprietary from branch 620', 'localhost', 'nvidia_driver',
     {'nodeprep_nvidia_driver_module_type': 'proprietary', 'nodeprep_nvidia_driver_branch': '620'},
     DRIVER_PLAN, ['nodeprep_nvidia_driver_module_type=proprietary cannot be installed on localhost with '
                   'nodeprep_nvidia_driver_branch=620', 'allowed: module_type open']),
    ('nvidia_driver proprietary on Blackwell', 'blackwell', 'nvidia_driver',
     {'nodeprep_nvidia_driver_module_type': 'proprietary'},
     DRIVER_BLACKWELL, ['nodeprep_nvidia_driver_module_type=proprietary is not supported on this node',
                        'as Blackwell', 'allowed here: open']),
]

HOSTS = ('localhost', 'el10', 'blackwell')


def _values(case):
    return tuple(case.values) if hasattr(case, 'values') else case


def build_playbook(folder, smi):
    plays = []
    for host in HOSTS:
        tasks = []
        if host == 'el10':
            tasks.append({'name': 'Pretend to be EL10', 'bad_input_platform': {'facts': EL10_FACTS}})
        if host == 'blackwell':
            tasks.append({'name': 'Gather facts from a B200 nvidia-smi', 'gpufleet.nodeprep.gpu_node_facts': {
                'gather_subset': ['kernel', 'nvidia'], 'nvidia_smi': smi}})
        for case in ROLE_CASES:
            name, case_host, role, variables = _values(case)[:4]
            if case_host != host:
                continue
            tasks.append({'name': 'Case ' + name, 'block': [{
                'name': 'Run ' + role,
                'ansible.builtin.include_role': {'name': 'gpufleet.nodeprep.' + role},
                'vars': variables}],
                'rescue': [{'name': 'Record ' + name, 'ansible.builtin.set_fact': {
                    'bad_input_results': '{{ bad_input_results | combine({%s: {"task": ansible_failed_task.name, '
                                         '"msg": ansible_failed_result.msg | default("")}}) }}' % json.dumps(name)}}]})
        tasks.append({'name': 'Write the results', 'ansible.builtin.copy': {
            'content': '{{ bad_input_results | to_nice_json }}',
            'dest': os.path.join(str(folder), host + '.json')},
            'check_mode': False, 'changed_when': False, 'delegate_to': 'localhost'})
        plays.append({'name': 'Bad input on ' + host, 'hosts': host, 'gather_facts': False, 'become': False,
                      'vars': {'bad_input_results': {}}, 'tasks': tasks})
    path = os.path.join(str(folder), 'bad_input.yml')
    with open(path, 'w') as handle:
        yaml.safe_dump(plays, handle, default_flow_style=False, sort_keys=False)
    return path


@pytest.fixture(scope='module')
def role_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp('bad_input_roles')
    smi, log = fake_tool(folder, 'nvidia-smi', [('-q', B200)])
    playbook = build_playbook(folder, smi)
    inventory = os.path.join(str(folder), 'hosts.yml')
    with open(inventory, 'w') as handle:
        yaml.safe_dump({'all': {'hosts': dict((host, {'ansible_connection': 'local'}) for host in HOSTS),
                                'vars': {'ansible_python_interpreter': sys.executable}}}, handle)
    env = ansible_env(ANSIBLE_LIBRARY=os.path.join(HERE, 'bad_input', 'library'),
                      ANSIBLE_LOCAL_TEMP=str(folder / 'tmp'), ANSIBLE_REMOTE_TEMP=str(folder / 'tmp'))
    binary = ansible_bin('ansible-playbook')
    proc = subprocess.run([binary, '-i', inventory, '--check', playbook], cwd=str(folder), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=900,
                          check=False)
    with open(os.path.join(str(folder), 'ansible-playbook.out'), 'w') as handle:
        handle.write(proc.stdout)
    results = {}
    for host in HOSTS:
        path = os.path.join(str(folder), host + '.json')
        if os.path.exists(path):
            with open(path) as handle:
                results[host] = json.load(handle)
    return {'rc': proc.returncode, 'output': proc.stdout, 'results': results, 'smi_log': logged(log)}


@pytest.mark.parametrize('host', HOSTS)
def test_role_run_changed_nothing(role_run, host):
    output = role_run['output']
    assert role_run['rc'] == 0, output[-4000:]
    assert re.findall(r'^changed: \[{0}\]'.format(host), output, re.M) == []
    recap = re.search(r'^{0}\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)'.format(host),
                      output, re.M)
    assert recap, output[-4000:]
    assert recap.groups() == ('0', '0', '0'), recap.group(0)
    if host == 'blackwell':
        assert role_run['smi_log'] == [['-q', '-x']]


@pytest.mark.parametrize('name, host, role, variables, task, parts', ROLE_CASES,
                         ids=[_values(c)[0] for c in ROLE_CASES])
def test_role_refuses(role_run, name, host, role, variables, task, parts):
    recorded = role_run['results'].get(host, {})
    assert name in recorded, 'the role did not fail: {0}'.format(role_run['output'][-3000:])
    if task == SPEC:
        assert recorded[name]['task'].startswith(SPEC)
        assert recorded[name]['msg'].startswith('Validation of arguments failed:')
    else:
        assert recorded[name]['task'] == task
    for part in parts:
        assert part in recorded[name]['msg']


# ---------------------------------------------------------------------------------------------------------------
# Host facts modules: bad options give a message naming the value and what is allowed; a state that cannot be read
# is an entry of `errors` naming the path (readiness fails on it); nothing reaches the controller that is not UTF-8.

# A tree below `root`: relative path -> bytes, ('link', target) or ('dir',).
LIMITS_TREE = {
    'etc/security/limits.conf': b'*\tsoft\tnproc\t4096\n',
    'etc/passwd': b'root:x:0:0:root:/root:/bin/bash\ntrain:x:1000:1000::/home/train:/bin/bash\n',
    'etc/group': b'root:x:0:\ntrain:x:1000:\nvideo:x:44:train\nv:x:45:\n',
}
SHM_MOUNTINFO = (b'22 1 253:0 / / rw,relatime shared:1 - xfs /dev/mapper/rl-root rw,seclabel\n'
                 b'26 22 0:23 / /dev/shm rw,nosuid,nodev shared:9 - tmpfs tmpfs rw,seclabel,inode64\n')
SHM_UNLIMITED_MOUNTINFO = SHM_MOUNTINFO.replace(b'rw,seclabel,inode64\n', b'rw,seclabel,size=0k,inode64\n')
SHM_TREE = {'proc/self/mountinfo': SHM_MOUNTINFO, 'proc/meminfo': b'MemTotal:       2113140480 kB\n'}
NON_UTF8 = b'90-caf\xe9.conf'


def _tree(folder, base, extra):
    files = dict(base)
    files.update(extra)
    for rel, content in files.items():
        path = os.path.join(str(folder), rel) if isinstance(rel, str) else os.path.join(os.fsencode(str(folder)), rel)
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            os.makedirs(parent)
        if isinstance(content, tuple) and content[0] == 'link':
            os.symlink(content[1], path)
        elif isinstance(content, tuple) and content[0] == 'dir':
            os.mkdir(path)
        else:
            with open(path, 'wb') as handle:
                handle.write(content)
    return str(folder)


def _strict_utf8(value, where='result'):
    """Every string the module returns must encode to UTF-8 (the controller refuses lone surrogates)."""
    if isinstance(value, dict):
        for key, item in value.items():
            _strict_utf8(key, where)
            _strict_utf8(item, '{0}.{1}'.format(where, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _strict_utf8(item, '{0}[{1}]'.format(where, index))
    elif isinstance(value, str):
        value.encode('utf-8')


def _dig(result, dotted):
    value = result
    for part in dotted.split('.'):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


SYSTEMD_D = 'etc/systemd/system.conf.d'
LIMITS_D_REL = 'etc/security/limits.d'

# (id, module, base tree, extra files, args (root is added), expected): expected is ('fails', exact message) or
# ('facts', {dotted path below ansible_facts: value}); '{root}' in a message or value is the tree.
HOST_FACTS_CASES = [
    ('limits_facts uid a word', 'limits_facts', LIMITS_TREE, {'etc/security/limits.d/10-range.conf': b'1000: hard nofile 64\n'},
     {'users': ['newbie'], 'groups': {'newbie': {'uid': 'train', 'groups': ['video']}}},
     ('fails', "groups.newbie.uid: 'train' is not a uid (allowed: an integer 0 or above)")),
    ('limits_facts gid a word', 'limits_facts', LIMITS_TREE, {'etc/security/limits.d/10-range.conf': b'@40:50 hard nofile 64\n'},
     {'users': ['newbie'], 'groups': {'newbie': {'gid': 'video', 'groups': ['video']}}},
     ('fails', "groups.newbie.gid: 'video' is not a gid (allowed: an integer 0 or above)")),
    ('limits_facts group list a number', 'limits_facts', LIMITS_TREE, {},
     {'users': ['newbie'], 'groups': {'newbie': 5}},
     ('fails', 'groups.newbie: 5 is not a list of group names (allowed: a list of group names, a comma-separated '
               'string of them, or a dict with the keys groups, uid and gid)')),
    ('limits_facts groups key a number', 'limits_facts', LIMITS_TREE, {},
     {'users': ['newbie'], 'groups': {'newbie': {'groups': 5}}},
     ('fails', 'groups.newbie.groups: 5 is not a list of group names (allowed: a list of group names or a '
               'comma-separated string of them)')),
    ('limits_facts group string is one group', 'limits_facts', LIMITS_TREE,
     {'etc/security/limits.d/90-video.conf': b'@video - memlock unlimited\n@v hard nofile 64\n'},
     {'users': ['u'], 'groups': {'u': 'video'}, 'flavour': 'upstream'},
     ('facts', {'limits.effective.u.memlock': {'soft': 'unlimited', 'hard': 'unlimited'},
                'limits.effective.u.nofile': {'soft': None, 'hard': None}, 'limits.errors': []})),
    ('limits_facts negative KiB value is unlimited as pam_limits reads it', 'limits_facts', LIMITS_TREE,
     {'etc/security/limits.d/90-neg.conf': b'* - memlock -5\n'},
     {'users': ['train'], 'flavour': 'upstream'},
     ('facts', {'limits.effective.train.memlock': {'soft': 'unlimited', 'hard': 'unlimited'},
                'limits.entries.1.value': 'unlimited'})),
    ('limits_facts negative count wraps as pam_limits reads it', 'limits_facts', LIMITS_TREE,
     {'etc/security/limits.d/90-neg.conf': b'* hard nofile -2\n'},
     {'users': ['train'], 'flavour': 'upstream'},
     ('facts', {'limits.effective.train.nofile': {'soft': None, 'hard': 2 ** 64 - 2},
                'limits.entries.1.value': 2 ** 64 - 2})),
    ('limits_facts dangling symlink in system.conf.d', 'limits_facts', LIMITS_TREE,
     {SYSTEMD_D + '/90-memlock.conf': ('link', '/nonexistent/90-memlock.conf')}, {},
     ('facts', {'limits.errors': ['{root}/' + SYSTEMD_D + '/90-memlock.conf: cannot read: dangling symlink to '
                                  '/nonexistent/90-memlock.conf'],
                'limits.systemd.errors': ['{root}/' + SYSTEMD_D + '/90-memlock.conf: cannot read: dangling symlink to '
                                          '/nonexistent/90-memlock.conf']})),
    ('limits_facts directory in system.conf.d', 'limits_facts', LIMITS_TREE, {SYSTEMD_D + '/90-memlock.conf': ('dir',)},
     {}, ('facts', {'limits.errors': ['{root}/' + SYSTEMD_D + '/90-memlock.conf: cannot read: is a directory']})),
    ('limits_facts directory in limits.d', 'limits_facts', LIMITS_TREE, {LIMITS_D_REL + '/90-x.conf': ('dir',)},
     {'users': ['train']},
     ('facts', {'limits.errors': ['{root}/' + LIMITS_D_REL + '/90-x.conf: cannot read: is a directory']})),
    ('limits_facts non-UTF-8 file name', 'limits_facts', LIMITS_TREE,
     {os.fsencode(LIMITS_D_REL) + b'/' + NON_UTF8: b'* - memlock unlimited\n'}, {'users': ['train']},
     ('facts', {'limits.files.1': '{root}/' + LIMITS_D_REL + '/90-caf\\xe9.conf',
                'limits.effective.train.memlock': {'soft': 'unlimited', 'hard': 'unlimited'},
                'limits.warnings.0': '{root}/' + LIMITS_D_REL + '/90-caf\\xe9.conf: the file name is not UTF-8 '
                                     '(shown with \\x escapes); pam_limits reads it'})),
    ('shm_facts unlimited tmpfs', 'shm_facts', SHM_TREE,
     {'proc/self/mountinfo': SHM_UNLIMITED_MOUNTINFO, 'etc/fstab': b'tmpfs /dev/shm tmpfs defaults,size=0 0 0\n'}, {},
     ('facts', {'shm.size_bytes': None, 'shm.unlimited': True, 'shm.fstab.size_bytes': None,
                'shm.fstab.unlimited': True, 'shm.errors': []})),
    ('shm_facts unlimited tmpfs by nr_blocks', 'shm_facts', SHM_TREE,
     {'etc/fstab': b'tmpfs /dev/shm tmpfs nr_blocks=0 0 0\n'}, {},
     ('facts', {'shm.fstab.size_bytes': None, 'shm.fstab.unlimited': True, 'shm.unlimited': False,
                'shm.size_bytes': 2113140480 * 1024 // 2})),
    ('shm_facts junk line in fstab', 'shm_facts', SHM_TREE,
     {'etc/fstab': b'junk\ntmpfs /dev/shm tmpfs defaults,size=64g 0 0\n'}, {},
     ('facts', {'shm.errors': ["{root}/etc/fstab line 1: expected at least 'spec file vfstype', got 'junk'"],
                'shm.fstab.size_bytes': 64 * 1024 ** 3})),
    ('shm_facts non-UTF-8 byte in fstab', 'shm_facts', SHM_TREE,
     {'etc/fstab': b'tmpfs /dev/shm tmpfs defaults,size=64g,x-caf\xe9 0 0\n'}, {},
     ('facts', {'shm.errors': ['{root}/etc/fstab line 1: not UTF-8 (shown with \\x escapes)'],
                'shm.fstab.options': ['defaults', 'size=64g', 'x-caf\\xe9']})),
]


@pytest.mark.parametrize('name, module, base, extra, args, expected', HOST_FACTS_CASES,
                         ids=[_case_id(c) for c in HOST_FACTS_CASES])
def test_host_facts_bad_input(tmp_path, monkeypatch, capsys, name, module, base, extra, args, expected):
    from ansible_collections.gpufleet.nodeprep.plugins.modules import limits_facts, shm_facts
    root = _tree(tmp_path / 'root', base, extra)
    main = {'limits_facts': limits_facts.main, 'shm_facts': shm_facts.main}[module]
    monkeypatch.setattr(AnsibleModule, 'run_command', lambda *a, **k: pytest.fail('no command may run: {0}'.format(a)))
    result = run_main(main, dict(args, root=root), capsys)
    _strict_utf8(result)
    kind, want = expected
    if kind == 'fails':
        assert result.get('failed') is True, result
        assert result['msg'] == want.replace('{root}', root)
        return
    assert not result.get('failed'), result.get('msg')
    for dotted, value in want.items():
        value = json.loads(json.dumps(value).replace('{root}', root.replace('\\', '\\\\')))
        assert _dig(result['ansible_facts'], dotted) == value, dotted


# ---------------------------------------------------------------------------------------------------------------
# Readiness: bad settings are refused with a message, and a state that could not be read fails (never skip, never
# pass). The readiness_info action types the variables, makes every role's plan from the gather (here the converged
# B200 fact set, the kernel log not read) and judges on the controller; a refusal comes before any gather.

from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as RF  # noqa: E402
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.action import test_readiness_info as RA  # noqa: E402


def _drop(namespace, subset, message):
    def mutate(facts, settings):
        del facts[namespace]
        facts.setdefault('nodeprep_errors', {})[subset] = message
    return mutate


def _settings(**values):
    def mutate(facts, settings):
        settings.update(values)
    return mutate


def _set_fact(name, value):
    def mutate(facts, settings):
        facts[name] = value
    return mutate


def _nvidia_failed_no_kernel(facts, settings):
    facts['nvidia'] = {'present': False, 'error': 'nvidia-smi failed: NVIDIA-SMI has failed because it could not '
                                                  'communicate with the NVIDIA driver', 'gpus': []}
    del facts['kernel_state']


def _role_names(facts, settings):
    # The names the nic_offload role documents (short ethtool -K names); the NIC already has them as wanted.
    settings['nodeprep_nic_offload_features'] = {'gro': False, 'lro': False, 'tso': True}
    # The gather reads the connections' tso property too (nm_connection), as NetworkManager keeps it.
    for nic in facts['nics'].values():
        nic['nm_connection']['properties']['ethtool.feature-tso'] = 'on'


def _kernel_names(facts, settings):
    settings['nodeprep_nic_offload_features'] = {'rx-gro': False, 'rx-lro': False}


NIC_FEATURES_ALLOWED = ('feature name -> true/false (yes/no, on/off also read); names as ethtool -k prints them '
                        '(generic-receive-offload), the short ethtool -K names (rx, tx, sg, tso, ufo, gso, gro, lro, '
                        'rxvlan, txvlan, ntuple, rxhash) or kernel names (rx-gro-hw)')
FSTAB_ERROR = 'shm facts: /etc/fstab line 7: cannot parse \'tmpfs /dev/shm\' (fewer than 4 fields)'
LIMITS_ERROR = ("limits facts: cannot read /etc/systemd/system.conf.d/90-memlock.conf: [Errno 2] No such file or "
                "directory (a dangling symlink)")
NVSMI_DOWN = 'nvidia-smi failed: NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver'

# (id, mutation of (facts, settings), expected: {'msg': exact refusal} or {check id: (status, observed)})
READINESS_CASES = [
    ('readiness ratio half fails shm.size with the plan\'s problem', _settings(nodeprep_shm_gpu_memory_ratio='half'),
     # The validator's own words follow (they differ between ansible-core releases).
     {'shm.size': ('fail', 'the settings of role shm are invalid: nodeprep_shm_gpu_memory_ratio="half": argument '
                           '\'nodeprep_shm_gpu_memory_ratio\' is of type str and we were unable to convert to float: '
                           '...')}),
    # (Plans are made by the action, never handed in: evaluate's refusal of missing plans is test_readiness.py's
    # test_plans_are_required.)
    # "inf" types into an infinite float: the typing refuses it for every float setting (issue 30), in its words
    # (the shm plan's "must be a number greater than 0" said nothing true of infinity).
    ('readiness ratio inf', _settings(nodeprep_shm_gpu_memory_ratio='inf'),
     {'shm.size': ('fail', 'the settings of role shm are invalid: nodeprep_shm_gpu_memory_ratio="inf": an infinite '
                           'number; ' + NUMBER_ALLOWED + ' (role shm: docs/roles/shm.md)')}),
    # The nic_offload role's variables are typed and checked by its plan (node_plan): nic.offload fails on them.
    ('readiness features as a list', _settings(nodeprep_nic_offload_features=['gro']),
     # The validator's own words follow (they differ between ansible-core releases).
     {'nic.offload': ('fail', 'the settings of role nic_offload are invalid: nodeprep_nic_offload_features=["gro"]: '
                              "argument 'nodeprep_nic_offload_features' is of type list and we were unable to convert "
                              'to dict: ...')}),
    ('readiness feature value not a boolean', _settings(nodeprep_nic_offload_features={'gro': 'maybe'}),
     {'nic.offload': ('fail', 'the settings of role nic_offload are invalid: nodeprep_nic_offload_features='
                              '{"gro": "maybe"}: ' + NIC_FEATURES_ALLOWED + '; not true or false: gro')}),
    ('readiness nic facts not read fails nic.offload', _drop('nics', 'nic', 'nic facts: ethtool -k eno1 failed'),
     {'nic.offload': ('fail', 'could not be read: nic facts: ethtool -k eno1 failed')}),
    # Typed once by the action (list of int): refused with the value, before anything is read. (evaluate's own words
    # for an untyped list: test_readiness.py test_bad_settings_are_refused.)
    ('readiness xid code not a number', _settings(nodeprep_readiness_xid_fail=[79, 'GSP']),
     {'msg': 'readiness check: nodeprep_readiness_xid_fail=[79, "GSP"]: ...'}),
    # nccl.config is the nccl role's plan: a bad value fails the check (and the role), never readiness_info itself.
    ('readiness nccl value null', _settings(nodeprep_nccl_conf={'NCCL_DEBUG': None}),
     {'nccl.config': ('fail', 'the settings of role nccl are invalid: nodeprep_nccl_conf.NCCL_DEBUG is null; NCCL '
                              'would read an empty value as unset: remove the name or give a value')}),
    ('readiness nccl.conf with a byte that is not UTF-8',
     _set_fact('nodeprep_files', {'/etc/nccl.conf': RF.file_state(b'NCCL_DEBUG=WARN\xe9\n')}),
     {'nccl.config': ('fail', '/etc/nccl.conf: content differs')}),
    # (Every setting is typed by the action, with its default when unset: evaluate's refusal of a missing one is
    # test_readiness.py's test_missing_setting_is_refused_by_name.)
    ('readiness junk fstab line fails shm.size', _drop('shm', 'shm', FSTAB_ERROR),
     {'shm.size': ('fail', 'could not be read: ' + FSTAB_ERROR)}),
    ('readiness dangling symlink in system.conf.d fails memlock', _drop('limits', 'limits', LIMITS_ERROR),
     {'memlock.users': ('fail', 'could not be read: ' + LIMITS_ERROR),
      'memlock.services': ('fail', 'could not be read: ' + LIMITS_ERROR)}),
    ('readiness nvidia-smi failed and no kernel facts fails gpu.count', _nvidia_failed_no_kernel,
     {'gpu.count': ('fail', 'nvidia-smi: failed, PCI bus: None; nvidia-smi failed (' + NVSMI_DOWN + ') and the PCI '
                    'bus was not read, so no GPU could be counted')}),
    ('readiness nic.offload by the role\'s short names', _role_names,
     {'nic.offload': ('pass', 'as wanted on ens3f0np0')}),
    ('readiness nic.offload by kernel names', _kernel_names,
     {'nic.offload': ('pass', 'as wanted on ens3f0np0')}),
]


@pytest.mark.parametrize('name, mutate, expected', READINESS_CASES, ids=[c[0] for c in READINESS_CASES])
def test_readiness_info_bad_input(name, mutate, expected):
    facts = RA.converged_gather()
    del facts['nodeprep_kernel_log']
    settings = dict(RA.inventory(), nodeprep_readiness_kernel_log_lines=0)
    mutate(facts, settings)
    result, calls = RA.run(settings, gathered=facts)
    assert result.get('changed', False) is False
    if 'msg' in expected:
        assert result.get('failed') is True, result
        if expected['msg'].endswith('...'):
            assert result['msg'][:len(expected['msg']) - 3] == expected['msg'][:-3]
        else:
            assert result['msg'] == expected['msg']
        assert calls == []
        return
    assert [module for module, _args in calls] == ['gpufleet.nodeprep.gpu_node_facts']
    assert not result.get('failed'), result
    got = dict((c['id'], (c['status'], c['observed'])) for c in result['checks'])
    for check_id, want in expected.items():
        if want[1].endswith('...'):
            assert (got[check_id][0], got[check_id][1][:len(want[1]) - 3]) == (want[0], want[1][:-3])
        else:
            assert got[check_id] == want


def test_readiness_info_negative_kernel_log_lines():
    result, calls = RA.run(dict(RA.inventory(), nodeprep_readiness_kernel_log_lines=-5))
    assert result['msg'] == ('readiness check: nodeprep_readiness_kernel_log_lines=-5 is negative; allowed: 0 (do not '
                             'read the kernel log) or a positive number of lines')
    assert calls == []


def test_readiness_role_passes_the_gather_errors():
    """What the gather could not read (nodeprep_errors) reaches the checks: they fail, naming it."""
    facts = RA.converged_gather()
    del facts['shm']
    facts['nodeprep_errors'] = {'shm': FSTAB_ERROR}
    result, _calls = RA.run(RA.inventory(), gathered=facts)
    opt_in = ('gpu.dcgm_diag', 'imex.domain', 'perf.tools', 'perf.allreduce', 'perf.nvbandwidth')
    assert [(c['id'], c['status'], c['observed']) for c in result['checks'] if c['status'] != 'pass'
            and c['id'] not in opt_in] == [('shm.size', 'fail', 'could not be read: ' + FSTAB_ERROR)]
    # The opt-in ones (DCGM's diagnostic, the IMEX domain, the perf_tools role, the performance gates) are off here: they skip.
    assert [c['status'] for c in result['checks'] if c['id'] in opt_in] == ['skip'] * 5


def test_readiness_report_unknown_host(tmp_path):
    """A host the inventory does not have is refused by name (it was a traceback from HostVars' Undefined)."""
    from unittest.mock import MagicMock

    from ansible.errors import AnsibleActionFail
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.playbook.play_context import PlayContext
    from ansible.vars.manager import VariableManager

    from ansible_collections.gpufleet.nodeprep.plugins.action import readiness_report

    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources='gpu-a01,gpu-a02,')
    from ansible.vars.hostvars import HostVars
    hostvars = HostVars(inventory=inventory, variable_manager=VariableManager(loader=loader, inventory=inventory),
                        loader=loader)
    task = MagicMock()
    task.args = {'dest': str(tmp_path), 'hosts': ['gpu-a01', 'gpu-a09']}
    task.async_val = 0
    task.check_mode = False
    task.diff = False
    action = readiness_report.ActionModule(task, MagicMock(), PlayContext(), loader=None, templar=None,
                                           shared_loader_obj=None)
    with pytest.raises(AnsibleActionFail) as exc:
        action.run(task_vars={'hostvars': hostvars, 'ansible_play_hosts_all': ['gpu-a01']})
    assert str(exc.value) == ('hosts: gpu-a09 is not in the inventory; hosts the inventory has: gpu-a01, '
                              'gpu-a02')
    assert os.listdir(str(tmp_path)) == []
