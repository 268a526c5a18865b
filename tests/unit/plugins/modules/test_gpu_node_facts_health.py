# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_node_facts' health reads (plugins/module_utils/collect/_health.py), in the same call as the other subsets: the
exact commands (the Xid lines of the kernel log, DCGM's discovery and diagnostic) and what is returned for the
controller to judge (the judgement: tests/unit/plugins/action/test_readiness_info.py, rules/test__dcgm.py)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json

import pytest

from ansible.module_utils import basic
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import patch_module_args

from ansible_collections.gpufleet.nodeprep.plugins.modules import gpu_node_facts

from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as F  # noqa: E402

JOURNAL = ['/usr/bin/journalctl', '-k', '-b', '0', '--no-pager', '-q', '-o', 'short-iso', '-n', '20000']
XID = ("2025-06-02T10:11:12+0000 node07 kernel: NVRM: Xid (PCI:0000:c4:00): 79, pid='<unknown>', name=<unknown>, "
       "GPU has fallen off the bus.")
DISCOVERY = ['/usr/bin/dcgmi', 'discovery', '-l']
DIAG = ['/usr/bin/dcgmi', 'diag', '-r', '2', '-j']
TIMEOUT = '/usr/bin/timeout'
C_LOCALE = {'LC_ALL': 'C', 'LANGUAGE': 'C'}


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


def run(monkeypatch, capsys, args, table, bins=('journalctl', 'dmesg', 'timeout')):
    runner = Runner(table)

    def run_command(self, argv, **kw):
        return runner(self, argv, **kw)

    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path',
                        lambda self, name, required=False, opt_dirs=None: '/usr/bin/' + name if name in bins else None)
    with patch_module_args(dict({'gather_subset': []}, **args)):
        with pytest.raises(SystemExit):
            gpu_node_facts.main()
    return json.loads(capsys.readouterr().out), runner.calls


def timed(argv, seconds):
    return [TIMEOUT, '--kill-after=5', '--signal=TERM', str(seconds)] + argv


# Every command of the gather runs under its limit, command_timeout (default 60 s; nodeprep_command_timeout).
JOURNAL_RUN = timed(JOURNAL, 60)
DMESG_RUN = timed(['/usr/bin/dmesg'], 60)


def test_kernel_log_from_journald(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, {'kernel_log_lines': 20000}, [
        (JOURNAL_RUN, (0, '2025-06-02T10:00:00+0000 node07 kernel: Linux version 5.14.0\n' + XID + '\n', '')),
    ])
    assert calls == [(JOURNAL_RUN, C_LOCALE)]
    facts = result['ansible_facts']
    assert result['changed'] is False
    assert facts['nodeprep_kernel_log'] == {'source': 'journalctl -k -b 0 (last 20000 lines)', 'lines': [XID],
                                            'error': None}
    assert facts['nodeprep_gathered'] == ['kernel_log']
    assert 'nodeprep_dcgm' not in facts


def test_xid_from_dmesg_when_journald_has_no_log(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, {'kernel_log_lines': 20000}, [
        (JOURNAL_RUN, (1, '', 'No journal files were found.\n')),
        (DMESG_RUN, (0, '[   12.3] nvidia: loading\n[ 99.1] ' + XID + '\n', '')),
    ])
    assert [argv for argv, _env in calls] == [JOURNAL_RUN, DMESG_RUN]
    assert result['ansible_facts']['nodeprep_kernel_log'] == {'source': 'dmesg (last 20000 lines)',
                                                              'lines': ['[ 99.1] ' + XID], 'error': None}


def test_no_log_tool(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, {'kernel_log_lines': 100}, [], bins=())
    assert calls == []
    assert result['ansible_facts']['nodeprep_kernel_log'] == {'source': None, 'lines': None,
                                                              'error': 'neither journalctl nor dmesg found'}


def test_journal_and_dmesg_both_failing_say_why(monkeypatch, capsys):
    result, _calls = run(monkeypatch, capsys, {'kernel_log_lines': 20000}, [
        (JOURNAL_RUN, (1, '', 'No journal files were found.\n')),
        (DMESG_RUN, (1, '', 'dmesg: read kernel buffer failed: Operation not permitted\n')),
    ])
    assert result['ansible_facts']['nodeprep_kernel_log']['error'] == (
        'journalctl rc=1: No journal files were found.; dmesg rc=1: dmesg: read kernel buffer failed: Operation not '
        'permitted')


def test_nothing_to_read_runs_no_command(monkeypatch, capsys):
    """The health reads are opt-in: by default (kernel_log_lines 0, dcgm_diag false) no command, no fact."""
    result, calls = run(monkeypatch, capsys, {}, [])
    assert calls == []
    facts = result['ansible_facts']
    assert 'nodeprep_kernel_log' not in facts and 'nodeprep_dcgm' not in facts
    assert facts['nodeprep_gathered'] == []


def test_negative_kernel_log_lines_is_refused(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, {'kernel_log_lines': -5}, [])
    assert result['msg'] == ('kernel_log_lines=-5 is negative; allowed: 0 (do not read the kernel log) or a positive '
                             'number of lines')
    assert calls == []


def test_check_mode_reads_the_same(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, {'kernel_log_lines': 20000, '_ansible_check_mode': True},
                        [(JOURNAL_RUN, (0, '', ''))])
    assert [argv for argv, _env in calls] == [JOURNAL_RUN]
    assert result['changed'] is False


def test_a_hung_kernel_log_read_is_killed_at_the_command_limit(monkeypatch, capsys):
    """journalctl that does not answer is killed at command_timeout; dmesg is read instead, and the gather lists the
    command that hit its limit."""
    clock = iter([0.0, 30.5, 31.0, 31.2])
    monkeypatch.setattr('ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner.monotonic',
                        lambda: next(clock))
    result, calls = run(monkeypatch, capsys, {'kernel_log_lines': 20000, 'command_timeout': 30}, [
        (timed(JOURNAL, 30), (124, '', '')),
        (timed(['/usr/bin/dmesg'], 30), (0, '[ 99.1] ' + XID + '\n', '')),
    ])
    assert [argv for argv, _env in calls] == [timed(JOURNAL, 30), timed(['/usr/bin/dmesg'], 30)]
    facts = result['ansible_facts']
    assert facts['nodeprep_kernel_log']['lines'] == ['[ 99.1] ' + XID]
    assert facts['nodeprep_timed_out'] == [{'command': ' '.join(JOURNAL), 'seconds': 30, 'option': 'command_timeout'}]


# ---------------------------------------------------------------------------------------------------------------------
# DCGM (opt-in): what is run for gpu.dcgm_diag (the rule and the parsers: test__dcgm.py)


def test_dcgm_runs_discovery_then_the_diagnostic_under_the_timeout(monkeypatch, capsys):
    doc = F.dcgm_passing()['diag']['stdout']
    result, calls = run(monkeypatch, capsys, {'dcgm_diag': True, 'dcgm_level': 2, 'dcgm_timeout': 90}, [
        (timed(DISCOVERY, 60), (0, '8 GPUs found (Active).\n', '')),
        (timed(DIAG, 90), (0, doc, '')),
    ], bins=('dcgmi', 'timeout'))
    assert [argv for argv, _env in calls] == [timed(DISCOVERY, 60), timed(DIAG, 90)]
    assert all(env == C_LOCALE for _argv, env in calls)
    dcgm = result['ansible_facts']['nodeprep_dcgm']
    assert (dcgm['enabled'], dcgm['level'], dcgm['timeout'], dcgm['dcgmi']) == (True, 2, 90, '/usr/bin/dcgmi')
    assert dcgm['discovery'] == {'rc': 0, 'stdout': '8 GPUs found (Active).\n', 'stderr': '', 'timed_out': False}
    assert dcgm['diag'] == {'rc': 0, 'stdout': doc, 'stderr': '', 'timed_out': False}
    assert result['ansible_facts']['nodeprep_gathered'] == ['dcgm']


def test_dcgm_without_host_engine_runs_no_diagnostic(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, {'dcgm_diag': True}, [
        (timed(DISCOVERY, 60), (235, 'Error: unable to establish a connection to the specified host: localhost\n'
                                     'Error: Unable to connect to host engine. Host engine connection '
                                     'invalid/disconnected.\n', '')),
    ], bins=('dcgmi', 'timeout'))
    assert len(calls) == 1
    dcgm = result['ansible_facts']['nodeprep_dcgm']
    assert dcgm['discovery']['rc'] == 235 and 'diag' not in dcgm


def test_dcgm_not_installed_runs_nothing(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, {'dcgm_diag': True}, [], bins=())
    assert calls == []
    assert result['ansible_facts']['nodeprep_dcgm'] == {'enabled': True, 'level': 1, 'timeout': 300, 'dcgmi': None}


@pytest.mark.parametrize('option, value, words', [
    ('dcgm_level', 5, 'value of dcgm_level must be one of: 1, 2, 3, 4, got: 5'),
    ('dcgm_timeout', 0, 'dcgm_timeout=0 is not a timeout; allowed: a whole number of seconds, at least 1'),
])
def test_dcgm_settings_are_checked(monkeypatch, capsys, option, value, words):
    result, calls = run(monkeypatch, capsys, {'dcgm_diag': True, option: value}, [])
    assert result['failed'] is True
    assert words in result['msg']
    assert calls == []


# The performance gates (opt-in, only where the controller decided the node runs no job): what is run and returned
# (the verdict: rules/test__perf_gates.py; where: the same file and action/test_readiness_info.py)

ARP = '/opt/nodeprep/perf/bin/all_reduce_perf'
NVB = '/opt/nodeprep/perf/bin/nvbandwidth'


class FakeModule(object):
    """What the runner takes of AnsibleModule: run_command (from a table) and get_bin_path."""

    def __init__(self, table):
        self.runner = Runner(table)

    def run_command(self, argv, **kw):
        return self.runner(self, argv, **kw)

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return '/usr/bin/' + name if name == 'timeout' else None


def test_perf_runs_both_tools_over_every_gpu_under_the_timeout():
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _health
    allreduce = F.allreduce_output(8, 820.0)
    nvb = F.nvbandwidth_output(8, 55.0, 55.5, 750.0)
    arp_argv = [ARP, '-b', '1G', '-e', '16G', '-f', '2', '-g', '8', '-c', '1']
    nvb_argv = [NVB, '-t', 'host_to_device_memcpy_ce', 'device_to_host_memcpy_ce', 'device_to_device_memcpy_read_ce']
    module = FakeModule([(timed(arp_argv, 300), (0, allreduce, '')), (timed(nvb_argv, 300), (0, nvb, ''))])
    found = _health.read_perf(module, {'all_reduce_perf': ARP, 'nvbandwidth': NVB}, 8, 300)
    assert [argv for argv, _env in module.runner.calls] == [timed(arp_argv, 300), timed(nvb_argv, 300)]
    assert all(env == C_LOCALE for _argv, env in module.runner.calls)
    assert sorted(found) == ['all_reduce_perf', 'nvbandwidth']
    assert dict((k, v) for k, v in found['all_reduce_perf'].items() if k != 'seconds') == {
        'path': ARP, 'argv': arp_argv, 'rc': 0, 'stdout': allreduce, 'stderr': '', 'timed_out': False, 'timeout': 300}


def test_perf_tool_missing_is_rc_127_with_the_reason():
    from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect import _health

    class Missing(FakeModule):
        def run_command(self, argv, **kw):
            self.runner.calls.append((list(argv), kw.get('environ_update')))
            return 127, '', '/usr/bin/timeout: failed to run command \u2018{0}\u2019: No such file or directory'.format(
                NVB)

    found = _health.read_perf(Missing([]), {'nvbandwidth': NVB}, 8, 600)
    assert (found['nvbandwidth']['rc'], found['nvbandwidth']['stderr']) == (
        127, 'cannot run {0}: No such file or directory'.format(NVB))


def test_perf_without_a_gpu_listed_runs_nothing(monkeypatch, capsys):
    result, calls = run(monkeypatch, capsys, {'perf_tools': {'all_reduce_perf': ARP}, 'perf_timeout': 120}, [],
                        bins=('timeout',))
    assert calls == []
    perf = result['ansible_facts']['nodeprep_perf']
    assert (perf['all_reduce_perf']['rc'], perf['all_reduce_perf']['stderr']) == (None, 'not run: nvidia-smi listed no GPU')
    assert result['ansible_facts']['nodeprep_gathered'] == ['perf']


@pytest.mark.parametrize('args, words', [
    ({'perf_tools': {'all_reduce_perf': ARP}, 'perf_timeout': 0},
     'perf_timeout=0 is not a timeout; allowed: a whole number of seconds, at least 1'),
    ({'perf_tools': {'ib_write_bw': '/usr/bin/ib_write_bw'}},
     'perf_tools: unknown tools ib_write_bw; allowed: all_reduce_perf, nvbandwidth'),
])
def test_perf_options_are_checked(monkeypatch, capsys, args, words):
    result, calls = run(monkeypatch, capsys, args, [])
    assert result['failed'] is True and words in result['msg'] and calls == []
