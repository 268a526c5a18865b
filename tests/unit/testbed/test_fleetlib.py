# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pure parts of tests/testbed/fleetlib.py, the helpers every fleet scenario (make slurm-fleet, hung-fleet, ...)
shares: ansible-playbook's recap, the inventory's hosts, a fleet's identity and environment, and the lines and exit
code a scenario ends with. The recaps are ansible-core 2.20's output, captured by make hung-fleet on the 4-node fleet
on 2026-12-06 (.tmp/hung-fleet/logs: site.yml and readiness.yml with the fault ssh-hang, the first converge)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT

sys.path.insert(0, os.path.join(ROOT, 'tests', 'testbed'))

import fleetlib  # noqa: E402

# site.yml, ubuntu2404-h200-01 hung (fault ssh-hang): the last task and the recap, as printed
SITE_SSH_HANG = (
    'TASK [Fail the nodes whose kernel or driver prediction failed (check mode)] ****\n'
    'skipping: [el9-b200-01]\n'
    'skipping: [el10-b200-01]\n'
    'skipping: [el8-h100-01]\n'
    '\n'
    'PLAY RECAP *********************************************************************\n'
    'el10-b200-01               : ok=2    changed=0    unreachable=0    failed=0    skipped=2    rescued=0    ignored=0   \n'
    'el8-h100-01                : ok=2    changed=0    unreachable=0    failed=0    skipped=2    rescued=0    ignored=0   \n'
    'el9-b200-01                : ok=4    changed=0    unreachable=0    failed=0    skipped=2    rescued=0    ignored=0   \n'
    'ubuntu2404-h200-01         : ok=1    changed=0    unreachable=1    failed=0    skipped=0    rescued=1    ignored=0   \n')
# readiness.yml, the same fault: a failed task's line (a "=>" and JSON, not a recap line), then the recap
READINESS_SSH_HANG = (
    'fatal: [el9-b200-01 -> {{ nodeprep_readiness_slurm_controller or groups[\'slurm_head\'][0] }}]: FAILED! => '
    '{"changed": false, "msg": "Task failed: object of type \'dict\' has no attribute \'slurm_head\'"}\n'
    '\n'
    'PLAY RECAP *********************************************************************\n'
    'el10-b200-01               : ok=2    changed=0    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0   \n'
    'el8-h100-01                : ok=2    changed=0    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0   \n'
    'el9-b200-01                : ok=4    changed=0    unreachable=0    failed=1    skipped=1    rescued=0    ignored=0   \n'
    'ubuntu2404-h200-01         : ok=2    changed=0    unreachable=0    failed=0    skipped=0    rescued=0    ignored=1   \n')
# site.yml converging fresh nodes
CONVERGE = (
    'PLAY RECAP *********************************************************************\n'
    'el10-b200-01               : ok=107  changed=31   unreachable=0    failed=0    skipped=84   rescued=0    ignored=0   \n'
    'el8-h100-01                : ok=108  changed=32   unreachable=0    failed=0    skipped=83   rescued=0    ignored=0   \n'
    'el9-b200-01                : ok=110  changed=32   unreachable=0    failed=0    skipped=83   rescued=0    ignored=0   \n'
    'ubuntu2404-h200-01         : ok=111  changed=34   unreachable=0    failed=0    skipped=80   rescued=0    ignored=0   \n')


def counts(ok, changed, unreachable, failed, skipped, rescued, ignored):
    return {'ok': ok, 'changed': changed, 'unreachable': unreachable, 'failed': failed, 'skipped': skipped,
            'rescued': rescued, 'ignored': ignored}


def test_recap_of_a_run_with_a_hung_node():
    assert fleetlib.recap(SITE_SSH_HANG) == {
        'el10-b200-01': counts(2, 0, 0, 0, 2, 0, 0),
        'el8-h100-01': counts(2, 0, 0, 0, 2, 0, 0),
        'el9-b200-01': counts(4, 0, 0, 0, 2, 0, 0),
        'ubuntu2404-h200-01': counts(1, 0, 1, 0, 0, 1, 0)}


def test_recap_reads_only_the_recap_lines():
    got = fleetlib.recap(READINESS_SSH_HANG)
    assert sorted(got) == ['el10-b200-01', 'el8-h100-01', 'el9-b200-01', 'ubuntu2404-h200-01']
    assert got['el9-b200-01'] == counts(4, 0, 0, 1, 1, 0, 0)
    assert got['ubuntu2404-h200-01'] == counts(2, 0, 0, 0, 0, 0, 1)


def test_recap_of_a_converging_run():
    assert dict((host, values['changed']) for host, values in fleetlib.recap(CONVERGE).items()) == {
        'el10-b200-01': 31, 'el8-h100-01': 32, 'el9-b200-01': 32, 'ubuntu2404-h200-01': 34}
    assert fleetlib.recap(CONVERGE)['ubuntu2404-h200-01']['ok'] == 111


@pytest.mark.parametrize('text', ['', 'PLAY RECAP ****\n', 'ERROR! the playbook: x.yml could not be found\n',
                                  'ok: [el9-b200-01] => {"msg": "a : b=1"}\n'])
def test_recap_of_text_without_one_is_empty(text):
    assert fleetlib.recap(text) == {}


def test_inventory_hosts_in_the_order_met_each_once():
    inventory = {'all': {'hosts': {'slurm-head': {}}, 'children': {
        'gpu': {'hosts': {'el9-b200-01': {}, 'ubuntu2404-h200-01': None}},
        'slurm_nodes': {'hosts': {'el9-b200-01': {}}, 'children': {'empty': None}}}}}
    assert fleetlib.inventory_hosts(inventory) == ['slurm-head', 'el9-b200-01', 'ubuntu2404-h200-01']
    assert fleetlib.inventory_hosts({'all': {'hosts': {}}}) == []


def test_identity_defaults_and_environment(monkeypatch):
    for suffix in ('PREFIX', 'SUBNET', 'DIR'):
        monkeypatch.delenv('IMEX_FLEET_' + suffix, raising=False)
    assert fleetlib.identity('IMEX_FLEET', 'npix', '10.252', '.testbed-imex') == (
        'npix', '10.252', os.path.join(fleetlib.REPO, '.testbed-imex'))
    monkeypatch.setenv('IMEX_FLEET_PREFIX', 'npht')
    monkeypatch.setenv('IMEX_FLEET_SUBNET', '10.233')
    monkeypatch.setenv('IMEX_FLEET_DIR', '/srv/fleet')
    assert fleetlib.identity('IMEX_FLEET', 'npix', '10.252', '.testbed-imex') == ('npht', '10.233', '/srv/fleet')


def test_fleet_environment_names_the_fleet_and_drops_the_callers_settings(monkeypatch):
    monkeypatch.setenv('TESTBED_KINDS', 'el8-h100')
    monkeypatch.setenv('TESTBED_IMEX', '1')
    monkeypatch.setenv('TESTBED_PREFIX', 'other')
    fleet = fleetlib.Fleet('imex-fleet', 'npix', '10.252', '/srv/imex', leaks=fleetlib.IMEX_LEAKS)
    assert (fleet.env['TESTBED_PREFIX'], fleet.env['TESTBED_SUBNET'], fleet.env['TESTBED_DIR']) == (
        'npix', '10.252', '/srv/imex')
    assert fleet.env['LC_ALL'] == 'C'
    assert 'TESTBED_KINDS' not in fleet.env and 'TESTBED_IMEX' not in fleet.env
    assert fleet.inventory == '/srv/imex/inventory.yml'
    plain = fleetlib.Fleet('sliced-fleet', 'npsf', '10.237', '/srv/sliced')
    assert plain.env['TESTBED_IMEX'] == '1'      # only the leaks named are dropped
    env = plain.playbook_env(record='/srv/rec')
    assert env['LC_ALL'] == 'C.UTF-8' and env['ANSIBLE_NOCOLOR'] == '1' and env['NODEPREP_RECORD_DIR'] == '/srv/rec'
    assert env['ANSIBLE_COLLECTIONS_PATH'].startswith(os.path.join(fleetlib.REPO, '.tmp', 'collections') + ':')
    assert env['PATH'].startswith(fleetlib.VENV_BIN + ':')
    assert 'ANSIBLE_SSH_CONTROL_PATH_DIR' not in env
    assert plain.playbook_argv('site.yml', '-e', 'a=1') == [
        os.path.join(fleetlib.VENV_BIN, 'ansible-playbook'), '-i', '/srv/sliced/inventory.yml',
        os.path.join(fleetlib.REPO, 'playbooks', 'site.yml'), '-e', 'a=1']


def test_checks_times_and_exit_code(capsys):
    fleet = fleetlib.Fleet('slurm-fleet', 'npsl', '10.236', '/srv/slurm')
    assert fleet.check(True, 'sinfo: both idle', 'not printed') is True
    assert fleet.check(False, 'job COMPLETED', 'FAILED 1:0') is False
    fleet.times.append(('sbatch of sleep 12 until COMPLETED', 14.04))
    assert fleet.finish() == 1
    assert capsys.readouterr().out.splitlines() == [
        'slurm-fleet: PASS sinfo: both idle',
        'slurm-fleet: FAIL job COMPLETED: FAILED 1:0',
        'slurm-fleet: time:   14.0 s  sbatch of sleep 12 until COMPLETED',
        'slurm-fleet: 1 check(s) failed: job COMPLETED']
    fleet = fleetlib.Fleet('imex-fleet', 'npix', '10.252', '/srv/imex')
    fleet.check(True, 'imex.yml again: changed=0 on every node (idempotent)')
    assert fleet.finish() == 0
    assert capsys.readouterr().out.splitlines()[-1] == 'imex-fleet: all checks passed'


@pytest.mark.parametrize('down_rc, up_rc, want, lines, calls', [
    (0, 0, True, ['imex-fleet: PASS testbed.py down before up (fresh nodes)', 'imex-fleet: PASS testbed.py up --imex'],
     ['down', 'up']),
    (0, 1, False, ['imex-fleet: PASS testbed.py down before up (fresh nodes)', 'imex-fleet: FAIL testbed.py up --imex'],
     ['down', 'up']),
    (1, 0, False, ['imex-fleet: FAIL testbed.py down before up (fresh nodes)'], ['down']),
])
def test_fresh_up_takes_the_fleet_down_then_up_each_a_check(monkeypatch, capsys, down_rc, up_rc, want, lines, calls):
    fleet = fleetlib.Fleet('imex-fleet', 'npix', '10.252', '/srv/imex')
    called = []

    def testbed(*argv, **kw):
        called.append(argv[0])
        return subprocess.CompletedProcess(argv, down_rc)

    def up():
        called.append('up')
        return subprocess.CompletedProcess(['up'], up_rc)

    monkeypatch.setattr(fleet, 'testbed', testbed)
    assert fleet.fresh_up(up, 'testbed.py up --imex', timed_as='testbed.py up --imex (3 GB200 nodes)') is want
    assert capsys.readouterr().out.splitlines() == lines
    assert called == calls
    assert [step[0] for step in fleet.times] == (['testbed.py up --imex (3 GB200 nodes)'] if len(calls) == 2 else [])


def test_timed_prints_the_step_only_when_asked(capsys):
    quiet = fleetlib.Fleet('slurm-fleet', 'npsl', '10.236', '/srv/slurm')
    loud = fleetlib.Fleet('sliced-fleet', 'npsf', '10.237', '/srv/sliced', echo_times=True)
    start = fleetlib.time.time()
    quiet.timed('drain and resume', start)
    loud.timed('fleet up (4 nodes)', start)
    assert [label for label, _seconds in quiet.times + loud.times] == ['drain and resume', 'fleet up (4 nodes)']
    assert capsys.readouterr().out == 'sliced-fleet: fleet up (4 nodes): 0 s\n'


def probe_of(answers):
    """A probe that gives the answers in turn (an exception is raised)."""
    answers = list(answers)

    def probe():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer
    return probe


def test_wait_for_polls_until_a_true_value_through_unreachable_nodes():
    fleet = fleetlib.Fleet('slurm-fleet', 'npsl', '10.236', '/srv/slurm', interval=0)
    unreachable = RuntimeError("slurm-head: 'sinfo' failed (rc=255): ")
    timeout = subprocess.TimeoutExpired(['ssh'], 60)
    assert fleet.wait_for('idle', probe_of([unreachable, timeout, False, {'State': 'IDLE'}])) == {'State': 'IDLE'}


def test_wait_for_stops_at_a_failed_command_unless_told_to_poll_on(capsys):
    failed = RuntimeError("slurm-head: 'scontrol show node -o' failed (rc=1): ")
    fleet = fleetlib.Fleet('slurm-fleet', 'npsl', '10.236', '/srv/slurm', interval=0)
    with pytest.raises(RuntimeError, match='rc=1'):
        fleet.wait_for('idle', probe_of([failed]))
    patient = fleetlib.Fleet('imex-fleet', 'npix', '10.252', '/srv/imex', interval=0, reraise=False)
    assert patient.wait_for('channel0', probe_of([failed, 'up'])) == 'up'
    assert patient.wait_for('UP', lambda: False, timeout=0) is None
    assert capsys.readouterr().out == 'imex-fleet: timed out after 0 s waiting for UP; last: None\n'
