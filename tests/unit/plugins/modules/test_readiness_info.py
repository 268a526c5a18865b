# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/modules/readiness_info.py: the exact commands it runs and what it returns."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

import pytest

from ansible.module_utils import basic
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import patch_module_args

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._node_state import collect_files
from ansible_collections.gpufleet.nodeprep.plugins.modules import readiness_info

from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as F  # noqa: E402

UNITS = ['nvidia-persistenced.service', 'nvidia-fabricmanager.service', 'nodeprep-gpu-settings.service']
JOURNAL = ['/usr/bin/journalctl', '-k', '-b', '0', '--no-pager', '-q', '-o', 'short-iso', '-n', '20000']
SHOW = ['/usr/bin/systemctl', 'show', '--property=Id,LoadState,ActiveState,SubState,UnitFileState,FragmentPath,DropInPaths', '--'] + UNITS
XID = ("2025-06-02T10:11:12+0000 node07 kernel: NVRM: Xid (PCI:0000:c4:00): 79, pid='<unknown>', name=<unknown>, "
       "GPU has fallen off the bus.")


def show_output(states):
    blocks = []
    for unit, (load, active, enabled) in zip(UNITS, states):
        blocks.append('Id={0}\nLoadState={1}\nActiveState={2}\nUnitFileState={3}\n'.format(unit, load, active, enabled))
    return '\n'.join(blocks)


ALL_UP = show_output([('loaded', 'active', 'enabled')] * 3)


class Runner(object):
    """Answers run_command from a table of (argv, (rc, stdout, stderr)) and records every call."""

    def __init__(self, table):
        self.table = list(table)
        self.calls = []

    def __call__(self, module, args, **kwargs):
        self.calls.append((list(args), kwargs.get('environ_update')))
        for argv, answer in self.table:
            if argv == list(args):
                return answer
        raise AssertionError('unexpected command {0}'.format(args))


def run(monkeypatch, capsys, args, table, bins=('journalctl', 'dmesg', 'systemctl'), systemd=True):
    runner = Runner(table)
    monkeypatch.setattr(readiness_info, '_SYSTEMD_RUN_DIR', '/' if systemd else '/nonexistent/systemd')

    def run_command(self, argv, **kw):
        return runner(self, argv, **kw)

    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path',
                        lambda self, name, required=False, opt_dirs=None: '/usr/bin/' + name if name in bins else None)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            readiness_info.main()
    return json.loads(capsys.readouterr().out), runner.calls


def base_args():
    facts, settings, _probe = F.converged()
    return {'facts': facts, 'settings': settings, 'plans': F.plans(facts, settings)}


def test_converged_node(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, base_args(), [
        (JOURNAL, (0, '2025-06-02T10:00:00+0000 node07 kernel: Linux version 5.14.0\n', '')),
        (SHOW, (0, ALL_UP, '')),
    ])
    assert calls == [(JOURNAL, {'LC_ALL': 'C', 'LANGUAGE': 'C'}), (SHOW, {'LC_ALL': 'C', 'LANGUAGE': 'C'})]
    assert result['changed'] is False
    assert result['ready'] is True
    assert result['summary'] == {'pass': 20, 'warn': 0, 'fail': 0, 'skip': 2, 'status': 'pass'}
    # gpu.dcgm_diag is opt-in (dcgm: false): it skips and runs nothing; imex.domain skips outside an IMEX domain.
    assert [c['status'] for c in result['checks']] == ['pass'] * 17 + ['skip'] + ['pass'] * 3 + ['skip']
    assert result['lost_gpus'] == []
    assert result['probe']['kernel_log'] == {'source': 'journalctl -k -b 0 (last 20000 lines)', 'lines': [],
                                             'error': None}
    assert sorted(result['probe']) == ['dcgm', 'kernel_log', 'services']
    assert result['probe']['dcgm'] == {'enabled': False, 'level': 1, 'timeout': 300, 'dcgmi': None}
    assert result['probe']['services']['nvidia-fabricmanager.service'] == {
        'load_state': 'loaded', 'active_state': 'active', 'unit_file_state': 'enabled'}


def test_xid_from_dmesg_when_journald_has_no_log(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, base_args(), [
        (JOURNAL, (1, '', 'No journal files were found.\n')),
        (['/usr/bin/dmesg'], (0, '[   12.3] nvidia: loading\n[ 99.1] ' + XID + '\n', '')),
        (SHOW, (0, ALL_UP, '')),
    ])
    assert [argv for argv, _env in calls] == [JOURNAL, ['/usr/bin/dmesg'], SHOW]
    assert result['probe']['kernel_log'] == {'source': 'dmesg (last 20000 lines)',
                                             'lines': ['[ 99.1] ' + XID], 'error': None}
    health = [c for c in result['checks'] if c['id'] == 'gpu.health'][0]
    assert (health['status'], health['observed']) == (
        'fail', "Xid 79 on 0000:c4:00.0 x1: pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
    assert result['ready'] is False
    assert result['summary']['status'] == 'fail'


def test_services_missing(monkeypatch, capsys):
    """The units read here are returned; the driver checks judge the units as the nvidia_driver plan read them."""
    facts, settings, probe = F.converged()
    probe['services']['nvidia-persistenced.service'] = {'load_state': 'not-found', 'active_state': 'inactive',
                                                        'unit_file_state': None}
    probe['services']['nvidia-fabricmanager.service']['active_state'] = 'failed'
    args = {'facts': facts, 'settings': settings, 'plans': F.plans(facts, settings, probe)}
    states = [('not-found', 'inactive', ''), ('loaded', 'failed', 'enabled'), ('loaded', 'active', 'enabled')]
    result, _calls = run(monkeypatch, capsys, args, [
        (JOURNAL, (0, '', '')), (SHOW, (0, show_output(states), '')),
    ])
    got = dict((c['id'], (c['status'], c['observed'])) for c in result['checks'])
    assert got['driver.persistenced'] == ('warn', 'nvidia-persistenced: not installed; persistence mode set by the '
                                                  'legacy nvidia-smi -pm 1 on all GPUs')
    assert got['fabric.manager'] == ('fail', '2 NVSwitches on the PCI bus; nvidia-fabricmanager: failed, enabled')
    assert result['probe']['services']['nvidia-persistenced.service'] == {
        'load_state': 'not-found', 'active_state': 'inactive', 'unit_file_state': None}


def test_nothing_to_read_runs_no_command(monkeypatch, capsys):
    """Already-known answers: no kernel log, no units - no command at all, nothing changed."""
    args = base_args()
    args.update(kernel_log_lines=0, services=[])
    result, calls = run(monkeypatch, capsys, args, [])
    assert calls == []
    assert result['changed'] is False
    assert result['probe']['kernel_log'] == {'source': None, 'lines': None,
                                             'error': 'not read (kernel_log_lines is 0)'}
    got = dict((c['id'], (c['status'], c['observed'])) for c in result['checks'])
    assert got['nccl.config'] == ('pass', '/etc/nccl.conf: as wanted')
    assert got['gpu.health'] == ('warn', 'kernel log not read: not read (kernel_log_lines is 0)')
    # The unit as the nvidia_driver plan read it in the gather (no unit is read here).
    assert got['driver.persistenced'] == ('pass', 'nvidia-persistenced: active, enabled')


def test_lost_gpu_reported(monkeypatch, capsys):
    args = base_args()
    del args['facts']['nvidia']['gpus'][4]
    result, _calls = run(monkeypatch, capsys, args, [(JOURNAL, (0, '', '')), (SHOW, (0, ALL_UP, ''))])
    assert result['lost_gpus'] == [{'bus_id': '0000:c4:00.0', 'reason': 'on the PCI bus, not listed by nvidia-smi'}]
    assert result['ready'] is False


def test_systemctl_failure_carries_everything(monkeypatch, capsys):
    result, _calls = run(monkeypatch, capsys, base_args(), [
        (JOURNAL, (0, '', '')), (SHOW, (1, '', 'Failed to connect to bus: No such file or directory\n')),
    ])
    assert result['failed'] is True
    assert result['msg'] == 'systemctl show failed for units ' + ', '.join(UNITS)
    assert (result['rc'], result['stdout'], result['stderr'], result['cmd']) == (
        1, '', 'Failed to connect to bus: No such file or directory\n', SHOW)


def test_systemctl_block_count_mismatch(monkeypatch, capsys):
    result, _calls = run(monkeypatch, capsys, base_args(), [
        (JOURNAL, (0, '', '')), (SHOW, (0, 'Id=nvidia-persistenced.service\nLoadState=loaded\n', '')),
    ])
    # the same reading as gpu_node_facts' units subset (_node_records.parse_units_show): blocks matched by Id, a unit
    # without a block is not-found, never the state of another unit
    assert not result.get('failed'), result
    services = result['probe']['services']
    assert services['nvidia-persistenced.service'] == {
        'load_state': 'loaded', 'active_state': None, 'unit_file_state': None}
    assert services['nvidia-fabricmanager.service']['load_state'] == 'not-found'
    assert services['nodeprep-gpu-settings.service']['load_state'] == 'not-found'


def test_no_log_tool_and_no_systemctl(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, base_args(), [], bins=())
    assert calls == []
    assert result['probe']['kernel_log']['error'] == 'neither journalctl nor dmesg found'
    assert result['probe']['services']['nvidia-fabricmanager.service'] == {
        'load_state': None, 'active_state': None, 'unit_file_state': None, 'error': 'systemctl not found'}


def test_not_booted_with_systemd(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, base_args(), [(JOURNAL, (0, '', ''))], systemd=False)
    assert [argv for argv, _env in calls] == [JOURNAL]
    assert result['probe']['services']['nvidia-persistenced.service']['error'] == (
        'not booted with systemd (/nonexistent/systemd is missing)')
    got = dict((c['id'], (c['status'], c['observed'])) for c in result['checks'])
    # The unit as the nvidia_driver plan read it in the gather.
    assert got['driver.persistenced'] == ('pass', 'nvidia-persistenced: active, enabled')


def test_bad_setting_fails_with_the_reason(monkeypatch, capsys):
    args = base_args()
    args['settings']['nodeprep_expected_gpus'] = 'eight'
    result, _calls = run(monkeypatch, capsys, args, [(JOURNAL, (0, '', '')), (SHOW, (0, ALL_UP, ''))])
    assert result['failed'] is True
    assert result['msg'] == "readiness check: nodeprep_expected_gpus: 'eight' is not a whole number"


def test_check_mode_is_the_same(monkeypatch, capsys):
    args = base_args()
    args['_ansible_check_mode'] = True
    result, calls = run(monkeypatch, capsys, args, [(JOURNAL, (0, '', '')), (SHOW, (0, ALL_UP, ''))])
    assert [argv for argv, _env in calls] == [JOURNAL, SHOW]
    assert result['changed'] is False
    assert result['summary']['status'] == 'pass'


def test_values_checked_are_returned(monkeypatch, capsys):
    result, _calls = run(monkeypatch, capsys, base_args(), [(JOURNAL, (0, '', '')), (SHOW, (0, ALL_UP, ''))])
    values = dict(result['checked_values'])
    assert values['power limit'] == '700 W = 70% of the default 1000 W (range 200-1000 W) on 8 GPUs'
    assert values['/dev/shm'] == ('716.0 GiB live, 716.0 GiB in fstab; GPU memory 1.4 TiB, so /dev/shm = 50% of it; '
                                  'wanted at least 716.0 GiB')
    assert values['memlock (soft/hard KiB)'] == 'root unlimited/unlimited, train unlimited/unlimited'


def test_settings_are_required(monkeypatch, capsys):
    args = base_args()
    del args['settings']
    result, calls = run(monkeypatch, capsys, args, [])
    assert result['failed'] is True
    assert result['msg'] == 'missing required arguments: settings'
    assert calls == []


def test_negative_kernel_log_lines_is_refused(monkeypatch, capsys):
    args = base_args()
    args['kernel_log_lines'] = -5
    result, calls = run(monkeypatch, capsys, args, [])
    assert result['msg'] == ('kernel_log_lines=-5 is negative; allowed: 0 (do not read the kernel log) or a positive '
                             'number of lines')
    assert calls == []


def test_nccl_conf_with_a_byte_that_is_not_utf8(monkeypatch, capsys, tmp_path):
    """One non-UTF-8 byte in the NCCL file: its SHA-1 (what gpu_node_facts gathers) differs, nccl.config fails, and
    every other check still comes back (nothing decodes the file; no probe of it is returned)."""
    path = tmp_path / 'nccl.conf'
    path.write_bytes(F.NCCL_CONF.encode('utf-8') + b'NCCL_DEBUG_FILE=/tmp/caf\xe9\n')
    args = base_args()
    args['settings']['nodeprep_nccl_conf_path'] = str(path)
    args['facts']['nodeprep_files'].update(collect_files([str(path)]))
    args['plans'] = F.plans(args['facts'], args['settings'])
    result, _calls = run(monkeypatch, capsys, args, [(JOURNAL, (0, '', '')), (SHOW, (0, ALL_UP, ''))])
    got = dict((c['id'], (c['status'], c['observed'])) for c in result['checks'])
    assert got['nccl.config'] == ('fail', '{0}: content differs'.format(path))
    assert sorted(status for status, _observed in got.values()) == ['fail'] + ['pass'] * 19 + ['skip', 'skip']
    assert sorted(result['probe']) == ['dcgm', 'kernel_log', 'services']
    assert dict(result['checked_values'])['NCCL files'] == '{0}: content differs'.format(path)


# ---------------------------------------------------------------------------------------------------------------------
# gpu.dcgm_diag: what the module runs (the rule and the parsers: test__dcgm.py)

DISCOVERY = ['/usr/bin/dcgmi', 'discovery', '-l']
DIAG = ['/usr/bin/dcgmi', 'diag', '-r', '2', '-j']
TIMEOUT = '/usr/bin/timeout'


def timed(argv, seconds):
    return [TIMEOUT, '--kill-after=5', '--signal=TERM', str(seconds)] + argv


def test_dcgm_runs_discovery_then_the_diagnostic_under_the_timeout(monkeypatch, capsys):
    args = base_args()
    args.update(dcgm=True, dcgm_level=2, dcgm_timeout=90)
    doc = F.dcgm_passing()['diag']['stdout']
    result, calls = run(monkeypatch, capsys, args, [
        (JOURNAL, (0, '', '')), (SHOW, (0, ALL_UP, '')),
        (timed(DISCOVERY, 60), (0, '8 GPUs found (Active).\n', '')),
        (timed(DIAG, 90), (0, doc, '')),
    ], bins=('journalctl', 'dmesg', 'systemctl', 'dcgmi', 'timeout'))
    assert [argv for argv, _env in calls][2:] == [timed(DISCOVERY, 60), timed(DIAG, 90)]
    assert all(env == {'LC_ALL': 'C', 'LANGUAGE': 'C'} for _argv, env in calls)
    got = dict((c['id'], (c['status'], c['observed'])) for c in result['checks'])
    assert got['gpu.dcgm_diag'] == ('pass', 'DCGM 4.1.1: 8 results of diagnostic (DCGM sees 8 GPUs); all passed')
    assert result['probe']['dcgm']['level'] == 2


def test_dcgm_without_host_engine_skips_and_runs_no_diagnostic(monkeypatch, capsys):
    args = base_args()
    args.update(dcgm=True)
    result, calls = run(monkeypatch, capsys, args, [
        (JOURNAL, (0, '', '')), (SHOW, (0, ALL_UP, '')),
        (timed(DISCOVERY, 60), (235, 'Error: unable to establish a connection to the specified host: localhost\n'
                                     'Error: Unable to connect to host engine. Host engine connection '
                                     'invalid/disconnected.\n', '')),
    ], bins=('journalctl', 'dmesg', 'systemctl', 'dcgmi', 'timeout'))
    assert len(calls) == 3
    status, observed = [(c['status'], c['observed']) for c in result['checks'] if c['id'] == 'gpu.dcgm_diag'][0]
    assert status == 'skip'
    assert observed.startswith('the DCGM host engine is not running (nvidia-dcgm.service not active')


def test_dcgm_not_installed_skips(monkeypatch, capsys):
    args = base_args()
    args.update(dcgm=True)
    result, calls = run(monkeypatch, capsys, args, [(JOURNAL, (0, '', '')), (SHOW, (0, ALL_UP, ''))])
    assert len(calls) == 2
    status, observed = [(c['status'], c['observed']) for c in result['checks'] if c['id'] == 'gpu.dcgm_diag'][0]
    assert (status, observed) == ('skip', 'DCGM is not installed (no dcgmi in PATH; role gpufleet.nodeprep.dcgm '
                                          'installs it)')


@pytest.mark.parametrize('option, value, words', [
    ('dcgm_level', 5, 'value of dcgm_level must be one of: 1, 2, 3, 4, got: 5'),
    ('dcgm_timeout', 0, 'dcgm_timeout=0 is not a timeout; allowed: a whole number of seconds, at least 1'),
])
def test_dcgm_settings_are_checked(monkeypatch, capsys, option, value, words):
    args = base_args()
    args[option] = value
    result, calls = run(monkeypatch, capsys, args, [])
    assert result['failed'] is True
    assert words in result['msg']
    assert calls == []
