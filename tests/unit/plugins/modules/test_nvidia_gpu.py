# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import re

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import patch_module_args

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES

from ansible_collections.gpufleet.nodeprep.plugins.modules import nvidia_gpu
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _nvidia_smi
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import Result

SMI = '/usr/bin/nvidia-smi'
QUERY = [SMI, '-q', '-x']
B200_BUS = ['00000000:8F:00.0', '00000000:90:00.0', '00000000:96:00.0', '00000000:97:00.0',
            '00000000:C4:00.0', '00000000:C5:00.0', '00000000:CB:00.0', '00000000:CC:00.0']
PL_SET = 'Power limit for GPU {0} was set to {1} W from 1000.00 W.\nAll done.\n'
PM_SET = 'Enabled persistence mode for GPU {0}.\nAll done.\n'


def load(name):
    with open(os.path.join(FIXTURES, 'nvidia-smi-xml', name)) as handle:
        return handle.read()


B200 = load('b200-8gpu_k8s-test-infra.xml')
H100 = load('h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml')
T4 = load('tesla-t4-1gpu_telegraf.xml')
RTX3090 = load('rtx-3090-1gpu-v13_telegraf.xml')


def edit(xml, bus_ids, tag, value):
    """Replace the first <tag> value inside the <gpu> blocks of the given bus ids (a simulated change)."""
    # Split before each <gpu id="...">; not re.split on a lookahead, which Python 3.6 (EL8's platform-python) refuses.
    starts = [m.start() for m in re.finditer(r'<gpu id="', xml)]
    parts = [xml[i:j] for i, j in zip([0] + starts, starts + [len(xml)])]
    out = []
    for part in parts:
        match = re.match(r'<gpu id="([^"]+)"', part)
        if match and (bus_ids == 'all' or match.group(1) in bus_ids):
            part = re.sub(r'<{0}>[^<]*</{0}>'.format(tag), '<{0}>{1}</{0}>'.format(tag, value), part, count=1)
        out.append(part)
    return ''.join(out)


# The reply of a command that _runner.run killed after its timeout.
TIMED_OUT = 'timed out'


class FakeRunner(object):
    """Stands in for _runner.run: every call must be the next expected argv, with the module's timeout."""

    def __init__(self, calls, timeout=30):
        self.calls = list(calls)
        self.timeout = timeout
        self.seen = []

    def __call__(self, module, argv, timeout=None, env=None, option=None):
        self.seen.append(list(argv))
        assert self.calls, 'unexpected command {0}'.format(argv)
        assert timeout == self.timeout
        expected, reply = self.calls.pop(0)
        assert list(argv) == expected
        if reply == TIMED_OUT:
            return Result(list(argv), 124, '', '', True)
        return Result(list(argv), reply[0], reply[1], reply[2], False)


@pytest.fixture
def env(monkeypatch, tmp_path):
    state = {'euid': 0, 'daemon': True}
    monkeypatch.setattr(nvidia_gpu, 'euid', lambda: state['euid'])
    monkeypatch.setattr(nvidia_gpu, 'persistenced_running', lambda **kwargs: state['daemon'])
    monkeypatch.setattr(nvidia_gpu, 'boot_id', lambda: 'boot-1')
    monkeypatch.setattr(nvidia_gpu, 'find_nvidia_smi', lambda module, path=None: SMI)
    state['state_dir'] = str(tmp_path / 'run')
    state['warnings'] = []
    monkeypatch.setattr(nvidia_gpu.AnsibleModule, 'warn', lambda self, msg: state['warnings'].append(msg))
    return state


def run(monkeypatch, capsys, env, args, calls, check_mode=False):
    runner = FakeRunner(calls, timeout=args.get('timeout', 60))
    monkeypatch.setattr(nvidia_gpu, 'run', runner)
    monkeypatch.setattr(_nvidia_smi, 'run', runner)
    args = dict(args)
    args.setdefault('state_dir', env['state_dir'])
    if check_mode:
        args['_ansible_check_mode'] = True
    with patch_module_args(args):
        with pytest.raises(SystemExit) as excinfo:
            nvidia_gpu.main()
    result = json.loads(capsys.readouterr().out)
    assert runner.calls == [], 'expected commands not run: {0}'.format(runner.calls)
    return excinfo.value.code, result


def ok(xml):
    return (QUERY, (0, xml, ''))


def cmd(bus, *args):
    return [SMI, '-i', bus] + list(args)


# (id, fixture xml, args, calls after the first query, expected changed, expected commands run)
SUCCESS_CASES = [
    ('persistence-all-b200', B200, {'persistence_mode': True},
     [(cmd(b, '-pm', '1'), (0, PM_SET.format(b), '')) for b in B200_BUS]
     + [ok(edit(B200, 'all', 'persistence_mode', 'Enabled'))],
     True, [cmd(b, '-pm', '1') for b in B200_BUS]),
    ('persistence-already-on-h100', H100, {'persistence_mode': True}, [], False, []),
    ('power-percent-one-gpu', B200, {'gpus': ['0'], 'power_limit': '70%'},
     [(cmd(B200_BUS[0], '-pl', '700'), (0, PL_SET.format(B200_BUS[0], '700.00'), '')),
      ok(edit(edit(B200, [B200_BUS[0]], 'requested_power_limit', '700.00 W'), [B200_BUS[0]], 'current_power_limit',
              '700.00 W'))],
     True, [cmd(B200_BUS[0], '-pl', '700')]),
    ('power-watts-by-uuid-and-bus-id', B200,
     {'gpus': ['GPU-00000001-0000-0000-0000-000000000001', 'cc:00.0'], 'power_limit': '850W'},
     [(cmd(B200_BUS[1], '-pl', '850'), (0, PL_SET.format(B200_BUS[1], '850.00'), '')),
      (cmd(B200_BUS[7], '-pl', '850'), (0, PL_SET.format(B200_BUS[7], '850.00'), '')),
      ok(edit(B200, [B200_BUS[1], B200_BUS[7]], 'requested_power_limit', '850.00 W'))],
     True, [cmd(B200_BUS[1], '-pl', '850'), cmd(B200_BUS[7], '-pl', '850')]),
    ('power-already-right', B200, {'power_limit': 1000}, [], False, []),
    ('power-clamped-to-min', B200, {'gpus': [B200_BUS[2]], 'power_limit': 100, 'power_limit_clamp': True},
     [(cmd(B200_BUS[2], '-pl', '200'), (0, PL_SET.format(B200_BUS[2], '200.00'), '')),
      ok(edit(B200, [B200_BUS[2]], 'requested_power_limit', '200.00 W'))],
     True, [cmd(B200_BUS[2], '-pl', '200')]),
    ('app-clocks-t4', T4, {'applications_clocks': {'memory': 5001, 'graphics': 1590}},
     [(cmd('00000000:00:1E.0', '-ac', '5001,1590'), (0, 'Applications clocks set to "(MEM 5001, SM 1590)" for GPU '
                                                     '00000000:00:1E.0\nAll done.\n', '')),
      ok(edit(T4, 'all', 'graphics_clock', '1590 MHz').replace(
          '<applications_clocks>\n            <graphics_clock>585 MHz',
          '<applications_clocks>\n            <graphics_clock>1590 MHz'))],
     True, [cmd('00000000:00:1E.0', '-ac', '5001,1590')]),
    ('app-clocks-reset-already-default', T4, {'applications_clocks': 'reset'}, [], False, []),
    # One rounding rule: 500.5 W is set as 501 W (whole watts, half up), like 50% of a 1001 W default.
    ('persistence-on-and-power-h100-gpu7-rounded', H100,
     {'gpus': ['7'], 'persistence_mode': True, 'power_limit': 500.5},
     [(cmd('00000000:CA:00.0', '-pl', '501'), (0, 'Power limit for GPU 00000000:CA:00.0 was set to 501.00 W from '
                                                  '700.00 W.\nAll done.\n', '')),
      ok(edit(H100, ['00000000:CA:00.0'], 'requested_power_limit', '501.00 W'))],
     True, [cmd('00000000:CA:00.0', '-pl', '501')]),
]


@pytest.mark.parametrize('name, xml, args, calls, changed, commands', SUCCESS_CASES,
                         ids=[case[0] for case in SUCCESS_CASES])
def test_success(monkeypatch, capsys, env, name, xml, args, calls, changed, commands):
    # -pm is only run where nvidia-persistenced does not; elsewhere the daemon keeps the driver loaded.
    env['daemon'] = not any('-pm' in argv for argv in commands)
    code, result = run(monkeypatch, capsys, env, args, [ok(xml)] + calls)
    assert code == 0, result
    assert env['warnings'] == ([] if name != 'power-clamped-to-min' else [
        'GPU 2 (00000000:96:00.0): power_limit 100 W is outside the allowed range 200.00-1000.00 W; clamped to '
        '200.00 W'])
    assert result['changed'] is changed
    assert result['commands'] == commands
    assert result['planned_commands'] == commands


def test_diff_and_gpus(monkeypatch, capsys, env):
    code, result = run(monkeypatch, capsys, env, {'gpus': ['0'], 'power_limit': 700}, [
        ok(B200),
        (cmd(B200_BUS[0], '-pl', '700'), (0, PL_SET.format(B200_BUS[0], '700.00'), '')),
        ok(edit(B200, [B200_BUS[0]], 'requested_power_limit', '700.00 W'))])
    assert code == 0
    assert result['diff'] == {'before': {B200_BUS[0]: {'power_limit_w': 1000.0}},
                              'after': {B200_BUS[0]: {'power_limit_w': 700.0}}}
    assert result['gpus'] == [{'index': 0, 'pci_bus_id': B200_BUS[0], 'uuid': 'GPU-00000000-0000-0000-0000-000000000000',
                               'changed': True, 'before': {'power_limit_w': 1000.0},
                               'after': {'power_limit_w': 700.0}}]
    assert result['persistenced_running'] is True


def test_check_mode_runs_no_write(monkeypatch, capsys, env):
    env['daemon'] = False
    code, result = run(monkeypatch, capsys, env, {'persistence_mode': True, 'power_limit': '50%',
                                                  'gpus': ['0', '1']}, [ok(B200)], check_mode=True)
    assert code == 0
    assert result['changed'] is True
    assert result['commands'] == []
    assert result['planned_commands'] == [cmd(B200_BUS[0], '-pm', '1'), cmd(B200_BUS[0], '-pl', '500'),
                                          cmd(B200_BUS[1], '-pm', '1'), cmd(B200_BUS[1], '-pl', '500')]
    assert not os.path.exists(env['state_dir'])


def test_check_mode_as_non_root_is_fine(monkeypatch, capsys, env):
    env['euid'] = 1000
    code, result = run(monkeypatch, capsys, env, {'power_limit': 900}, [ok(B200)], check_mode=True)
    assert code == 0
    assert len(result['planned_commands']) == 8


def test_locked_clocks_recorded_then_idempotent_then_reset(monkeypatch, capsys, env):
    lock = cmd(B200_BUS[0], '-lgc', '1500,1965')
    reply = (0, 'GPU clocks set to "(gpuClkMin 1500, gpuClkMax 1965)" for GPU 00000000:8F:00.0\nAll done.\n', '')
    args = {'gpus': ['0'], 'locked_gpu_clocks': {'min': 1500, 'max': 1965}}
    code, result = run(monkeypatch, capsys, env, args, [ok(B200), (lock, reply)])
    assert (code, result['changed'], result['commands']) == (0, True, [lock])
    assert result['diff'] == {'before': {B200_BUS[0]: {'locked_gpu_clocks': 'unknown'}},
                              'after': {B200_BUS[0]: {'locked_gpu_clocks': {'min_mhz': 1500, 'max_mhz': 1965}}}}
    with open(os.path.join(env['state_dir'], 'nvidia_gpu_locks.json')) as handle:
        assert json.load(handle) == {'boot_id': 'boot-1', 'gpus': {B200_BUS[0]: {
            'uuid': 'GPU-00000000-0000-0000-0000-000000000000',
            'locked_gpu_clocks': {'min_mhz': 1500, 'max_mhz': 1965}}}}

    code, result = run(monkeypatch, capsys, env, args, [ok(B200)])
    assert (code, result['changed'], result['commands']) == (0, False, [])

    reset = cmd(B200_BUS[0], '-rgc')
    code, result = run(monkeypatch, capsys, env, {'gpus': ['0'], 'locked_gpu_clocks': 'reset'},
                       [ok(B200), (reset, (0, 'All done.\n', ''))])
    assert (code, result['changed'], result['commands']) == (0, True, [reset])

    code, result = run(monkeypatch, capsys, env, {'gpus': ['0'], 'locked_gpu_clocks': 'reset'}, [ok(B200)])
    assert (code, result['changed']) == (0, False)


def test_lock_record_from_previous_boot_is_ignored(monkeypatch, capsys, env):
    os.makedirs(env['state_dir'])
    with open(os.path.join(env['state_dir'], 'nvidia_gpu_locks.json'), 'w') as handle:
        json.dump({'boot_id': 'boot-0', 'gpus': {B200_BUS[0]: {
            'uuid': 'GPU-00000000-0000-0000-0000-000000000000',
            'locked_memory_clocks': {'min_mhz': 3996, 'max_mhz': 3996}}}}, handle)
    lock = cmd(B200_BUS[0], '-lmc', '3996,3996')
    code, result = run(monkeypatch, capsys, env, {'gpus': ['0'], 'locked_memory_clocks': {'min': 3996, 'max': 3996}},
                       [ok(B200), (lock, (0, 'Memory clocks set to "(memClkMin 3996, memClkMax 3996)" for GPU '
                                             '00000000:8F:00.0\nAll done.\n', ''))])
    assert (code, result['commands']) == (0, [lock])


def test_persistenced_running_is_not_fought(monkeypatch, capsys, env):
    env['daemon'] = True
    code, result = run(monkeypatch, capsys, env, {'gpus': ['0'], 'persistence_mode': True}, [ok(B200)])
    assert code == 0
    assert (result['changed'], result['commands'], result['persistenced_running']) == (False, [], True)
    assert env['warnings'] == [
        'GPU 0 (00000000:8F:00.0): nvidia-persistenced is running and manages persistence mode; the GPU reports '
        'disabled, not changing it with nvidia-smi -pm (configure the daemon instead)']


def test_clamp_warns(monkeypatch, capsys, env):
    code, result = run(monkeypatch, capsys, env, {'gpus': ['0'], 'power_limit': 1500, 'power_limit_clamp': True},
                       [ok(B200)])
    assert (code, result['changed']) == (0, False)
    assert env['warnings'] == ['GPU 0 (00000000:8F:00.0): power_limit 1500 W is outside the allowed range '
                               '200.00-1000.00 W; clamped to 1000.00 W']


ALLOWED_T4_MEM = '5001, 405'

# (id, fixture xml, args, calls after the first query, exact message)
FAIL_CASES = [
    ('power-above-max', B200, {'gpus': ['0'], 'power_limit': 1200}, [],
     'GPU 0 (00000000:8F:00.0): power_limit 1200 W is outside the allowed range 200.00-1000.00 W'),
    ('power-percent-below-min', B200, {'gpus': ['3'], 'power_limit': '10%'}, [],
     'GPU 3 (00000000:97:00.0): power_limit 10% of the default 1000.00 W = 100 W is outside the allowed range '
     '200.00-1000.00 W'),
    ('power-not-a-number', B200, {'power_limit': 'lots'}, None,
     "power_limit must be watts (e.g. 700) or a percentage of the default limit (e.g. \"70%\"), got 'lots'"),
    ('unknown-gpu', RTX3090, {'gpus': ['3']}, [],
     "gpus: no GPU matches '3'; GPUs present: 0 (00000000:09:00.0, GPU-12345678-aaaa-bbbb-cccc-0123456789ab)"),
    ('all-plus-other', B200, {'gpus': ['all', '0']}, [],
     "gpus: \"all\" cannot be combined with other entries, got ['all', '0']"),
    ('app-clocks-deprecated', RTX3090, {'applications_clocks': {'memory': 9751, 'graphics': 2100}}, [],
     'GPU 0 (00000000:09:00.0): the driver reports applications clocks as deprecated ("Requested functionality has '
     'been deprecated"); use locked_gpu_clocks and locked_memory_clocks (nvidia-smi -lgc/-lmc) instead'),
    ('app-clocks-bad-memory', T4, {'applications_clocks': {'memory': 6000, 'graphics': 1590}}, [],
     'GPU 0 (00000000:00:1E.0): applications_clocks memory 6000 MHz is not supported; supported memory clocks: '
     + ALLOWED_T4_MEM),
    ('app-clocks-bad-graphics', T4, {'applications_clocks': {'memory': 405, 'graphics': 1590}}, [],
     'GPU 0 (00000000:00:1E.0): applications_clocks graphics 1590 MHz is not supported with memory 405 MHz; '
     'supported graphics clocks: 645, 630, 615, 600, 585, 570, 555, 540, 525, 510, 495, 480, 465, 450, 435, 420, 405, '
     '390, 375, 360, 345, 330, 315, 300'),
    ('lock-above-max', B200, {'gpus': ['0'], 'locked_gpu_clocks': {'min': 1500, 'max': 2100}}, [],
     'GPU 0 (00000000:8F:00.0): locked_gpu_clocks 1500-2100 MHz is outside the supported range 120-1965 MHz'),
    ('lock-min-above-max', B200, {'locked_gpu_clocks': {'min': 1900, 'max': 1500}}, None,
     'locked_gpu_clocks: min (1900) must be at least 1 and not above max (1500)'),
    ('lock-bad-shape', B200, {'locked_memory_clocks': {'low': 1}}, None,
     "locked_memory_clocks must be \"reset\" or a dict with the keys min and max (MHz), got {'low': 1}"),
    ('readback-mismatch', B200, {'gpus': ['0'], 'power_limit': 700},
     [(cmd(B200_BUS[0], '-pl', '700'), (0, 'All done.\n', '')), ok(B200)],
     'GPU 0 (00000000:8F:00.0): nvidia-smi exited 0 but power_limit_w reads 1000.0 instead of 700.0 after the '
     'change'),
    ('insufficient-permissions', B200, {'gpus': ['0'], 'persistence_mode': True},
     [(cmd(B200_BUS[0], '-pm', '1'), (4, 'Unable to set persistence mode for GPU 00000000:8F:00.0: Insufficient '
                                         'Permissions\nTerminating early due to previous errors.\n', ''))],
     '/usr/bin/nvidia-smi -i 00000000:8F:00.0 -pm 1 was refused: Unable to set persistence mode for GPU '
     '00000000:8F:00.0: Insufficient Permissions\nTerminating early due to previous errors. (changing GPU settings '
     'needs root; use become: true)'),
    ('exit-0-not-applied', B200, {'gpus': ['0'], 'locked_gpu_clocks': {'min': 1500, 'max': 1500}},
     [(cmd(B200_BUS[0], '-lgc', '1500,1500'), (0, 'Setting locked GPU clocks is not supported for GPU '
                                                  '00000000:8F:00.0.\nTreating as warning and moving on.\n'
                                                  'All done.\n', ''))],
     '/usr/bin/nvidia-smi -i 00000000:8F:00.0 -lgc 1500,1500 exited 0 but reported a problem: Setting locked GPU '
     'clocks is not supported for GPU 00000000:8F:00.0.\nTreating as warning and moving on.\nAll done.'),
    ('write-fails', B200, {'gpus': ['0'], 'power_limit': 300},
     [(cmd(B200_BUS[0], '-pl', '300'), (2, '', 'Invalid combination of input arguments.\n'))],
     '/usr/bin/nvidia-smi -i 00000000:8F:00.0 -pl 300 failed with rc 2: Invalid combination of input arguments.'),
    ('write-hangs', B200, {'gpus': ['0'], 'power_limit': 300, 'timeout': 5},
     [(cmd(B200_BUS[0], '-pl', '300'), TIMED_OUT)],
     '/usr/bin/nvidia-smi -i 00000000:8F:00.0 -pl 300 did not finish within the timeout of 5 seconds and was '
     'killed'),
]


@pytest.mark.parametrize('name, xml, args, calls, message', FAIL_CASES, ids=[case[0] for case in FAIL_CASES])
def test_failure(monkeypatch, capsys, env, name, xml, args, calls, message):
    env['daemon'] = not any('-pm' in argv for argv, reply in calls or [])
    # calls None: the option is rejected before nvidia-smi runs at all.
    code, result = run(monkeypatch, capsys, env, args, [] if calls is None else [ok(xml)] + calls)
    assert code == 1
    assert result['failed'] is True
    assert result['msg'] == message


def test_failure_carries_command_output(monkeypatch, capsys, env):
    code, result = run(monkeypatch, capsys, env, {'gpus': ['0'], 'power_limit': 300}, [
        ok(B200), (cmd(B200_BUS[0], '-pl', '300'), (2, 'out\n', 'Invalid combination of input arguments.\n'))])
    assert (result['rc'], result['cmd'], result['stdout'], result['stderr']) == (
        2, cmd(B200_BUS[0], '-pl', '300'), 'out\n', 'Invalid combination of input arguments.\n')


def test_not_root(monkeypatch, capsys, env):
    env['euid'] = 1000
    code, result = run(monkeypatch, capsys, env, {'gpus': ['0'], 'power_limit': 900}, [ok(B200)])
    assert code == 1
    assert result['msg'] == ('changing GPU settings needs root, but the module runs as uid 1000; use become: true '
                             '(it would run: /usr/bin/nvidia-smi -i 00000000:8F:00.0 -pl 900)')


def test_not_root_and_nothing_to_do(monkeypatch, capsys, env):
    env['euid'] = 1000
    code, result = run(monkeypatch, capsys, env, {'power_limit': 1000}, [ok(B200)])
    assert (code, result['changed']) == (0, False)


def test_query_needs_permissions(monkeypatch, capsys, env):
    code, result = run(monkeypatch, capsys, env, {'persistence_mode': True},
                       [(QUERY, (4, 'Insufficient Permissions\n', ''))])
    assert result['msg'] == ('nvidia-smi -q -x failed with rc 4: Insufficient Permissions (run the task as root, for '
                             'example with become: true)')


def test_query_hangs(monkeypatch, capsys, env):
    code, result = run(monkeypatch, capsys, env, {'persistence_mode': True, 'timeout': 7},
                       [(QUERY, TIMED_OUT)])
    assert code == 1
    assert result['msg'] == ('nvidia-smi -q -x did not answer within the timeout of 7 seconds and was killed; a GPU '
                             'may have fallen off the bus (check dmesg for Xid 79) or the driver is hung')
    assert result['cmd'] == QUERY


def test_no_nvidia_smi(monkeypatch, capsys, env):
    monkeypatch.setattr(nvidia_gpu, 'find_nvidia_smi', lambda module, path=None: None)
    code, result = run(monkeypatch, capsys, env, {'persistence_mode': True}, [])
    assert result['msg'] == 'nvidia-smi not found in PATH; install the NVIDIA driver first'


def test_persistenced_detection(tmp_path):
    for pid, comm in (('1', 'systemd'), ('42', 'nvidia-persiste'), ('self', 'x')):
        (tmp_path / pid).mkdir()
        (tmp_path / pid / 'comm').write_text(comm + '\n')
    assert nvidia_gpu.persistenced_running(str(tmp_path)) is True
    (tmp_path / '42' / 'comm').write_text('bash\n')
    assert nvidia_gpu.persistenced_running(str(tmp_path)) is False


def test_persistenced_detection_by_unit(tmp_path, monkeypatch):
    (tmp_path / '7').mkdir()
    (tmp_path / '7' / 'comm').write_text('gpu-double\n')
    calls = []

    module = object()

    def fake(run_module, argv, timeout=None, env=None):
        assert (run_module, timeout) == (module, 30)
        calls.append(argv)
        if argv[-1] == 'nvidia-persistenced.service':
            return Result(argv, 0, 'active\n', '', False)
        return Result(argv, 3, 'inactive\n', '', False)
    monkeypatch.setattr(nvidia_gpu, 'run', fake)
    assert nvidia_gpu.persistenced_running(str(tmp_path), systemctl='/usr/bin/systemctl', module=module) is True
    assert calls == [['/usr/bin/systemctl', 'is-active', 'nvidia-persistenced.service']]
    inactive = Result(['/usr/bin/systemctl'], 3, 'inactive\n', '', False)
    monkeypatch.setattr(nvidia_gpu, 'run', lambda run_module, argv, timeout=None: inactive)
    assert nvidia_gpu.persistenced_running(str(tmp_path), systemctl='/usr/bin/systemctl', module=module) is False
    # A systemctl that hangs: killed after 30 seconds, and the daemon is not taken for running.
    monkeypatch.setattr(nvidia_gpu, 'run', lambda run_module, argv, timeout=None: Result(argv, 124, '', '', True))
    assert nvidia_gpu.persistenced_running(str(tmp_path), systemctl='/usr/bin/systemctl', module=module) is False
    assert nvidia_gpu.persistenced_running(str(tmp_path)) is False


# -- driver_pending: check mode on a fresh node, the driver installed earlier in the same run -------------------------

@pytest.mark.parametrize('args, changed, says', [
    ({'power_limit': '72.5%', 'persistence_mode': True, 'driver_pending_persistenced': True}, True,
     'power limit 72.5%'),
    ({'power_limit': '100%', 'persistence_mode': True, 'driver_pending_persistenced': True}, False,
     'nothing will change'),
    ({'persistence_mode': True}, True, 'persistence mode is disabled'),
    ({'locked_gpu_clocks': {'min': 1500, 'max': 1965}, 'driver_pending_persistenced': True}, True,
     'locked_gpu_clocks 1500-1965 MHz'),
    ({'power_limit': 700, 'driver_pending_persistenced': True, 'apply': False}, False, 'nothing will change'),
    ({'power_limit': 700, 'driver_pending_persistenced': True, 'apply': False, 'replay_file': '/nonexistent/r'},
     True, 'power limit 700 W'),
])
def test_driver_pending_without_nvidia_smi(monkeypatch, capsys, env, args, changed, says):
    monkeypatch.setattr(nvidia_gpu, 'find_nvidia_smi', lambda module, path=None: None)
    args = dict(args, driver_pending=True, host_label='node-1')
    code, result = run(monkeypatch, capsys, env, args, [], check_mode=True)
    assert code == 0
    assert result['changed'] is changed
    assert 'node-1' in result['msg'] and says in result['msg']
    assert bool(result['predicted']) is changed
    assert result['commands'] == []


def test_driver_pending_when_nvidia_smi_cannot_read(monkeypatch, capsys, env):
    args = {'power_limit': '72.5%', 'driver_pending': True, 'driver_pending_persistenced': True}
    code, result = run(monkeypatch, capsys, env, args,
                       [(QUERY, (9, 'NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver',
                                 ''))], check_mode=True)
    assert code == 0 and result['changed'] is True
    assert result['predicted'] == ['power limit 72.5%: the driver starts at the default limit']


def test_driver_pending_reads_the_gpus_when_it_can(monkeypatch, capsys, env):
    # The GPUs answer: the prediction is not used, the real plan is (two queries: the probe and the read).
    args = {'power_limit': 900, 'gpus': ['0'], 'driver_pending': True}
    code, result = run(monkeypatch, capsys, env, args, [ok(B200), ok(B200)], check_mode=True)
    assert code == 0 and result['predicted'] == []
    assert result['planned_commands'] == [cmd(B200_BUS[0], '-pl', '900')]


def test_driver_pending_is_ignored_outside_check_mode(monkeypatch, capsys, env):
    monkeypatch.setattr(nvidia_gpu, 'find_nvidia_smi', lambda module, path=None: None)
    code, result = run(monkeypatch, capsys, env, {'power_limit': '72.5%', 'driver_pending': True}, [])
    assert code == 1
    assert result['msg'] == 'nvidia-smi not found in PATH; install the NVIDIA driver first'
