# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/action/rolling_slurm.py against Slurm 22.05.8's captured answers: the argv it runs, and what it
refuses (never drains twice, never overwrites or resumes someone else's state)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.nodeprep.plugins.action import rolling_slurm

SLURM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'module_utils', 'slurm')
EL, UB = 'el9-b200-01', 'ubuntu2404-h200-01'


def read(name):
    with open(os.path.join(SLURM, name)) as handle:
        return handle.read()


def run(args, nodes_capture, squeue=None, check_mode=False):
    """Run the action with `scontrol show node -o` answering ``nodes_capture`` (a capture's name, or a callable
    giving the text of each call); the argv lists run, the result."""
    task = MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = check_mode
    task.diff = False
    context = PlayContext()
    context.check_mode = check_mode
    action = rolling_slurm.ActionModule(task, MagicMock(), context, loader=DataLoader(),
                                        templar=Templar(loader=DataLoader()), shared_loader_obj=None)
    calls = []

    def execute(module_name, module_args, task_vars):
        assert module_name == 'ansible.builtin.command'
        argv = module_args['argv']
        assert argv[:2] == ['env', 'LC_ALL=C']
        calls.append(argv[2:])
        if argv[2:] == ['scontrol', 'show', 'node', '-o']:
            return {'rc': 0, 'stdout': nodes_capture() if callable(nodes_capture) else read(nodes_capture)}
        if argv[2:] == ['scontrol', 'show', 'config']:
            return {'rc': 0, 'stdout': read('show-config.txt')}
        if argv[2:] == ['scontrol', 'show', 'partition', '-o']:
            return {'rc': 0, 'stdout': read('show-partition.txt')}
        if argv[2] == 'squeue':
            return {'rc': 0, 'stdout': (squeue or {}).get(argv[5], '')}
        if argv[2:4] in (['scontrol', 'update'], ['scontrol', 'reboot']):
            return {'rc': 0, 'stdout': ''}
        raise AssertionError(argv)
    action._execute_module = execute
    result = action.run(task_vars={'inventory_hostname': 'slurm-head'})
    return result, calls


UPDATE = ['scontrol', 'update']


def updates(calls):
    return [c for c in calls if c[:2] == UPDATE]


def test_state_reads_records_config_partitions_and_jobs():
    result, calls = run({'op': 'state', 'nodes': [EL, UB]}, 'show-node-mixed-allocated.txt',
                        squeue={EL: read('squeue-w-el9-tall.txt'), UB: read('squeue-w-ubuntu.txt')})
    assert updates(calls) == []
    assert result['changed'] is False
    assert result['records'][UB]['State'] == 'ALLOCATED'
    assert result['config']['ResumeTimeout'] == '600 sec'
    assert result['jobs'] == {EL: ['1'], UB: ['2']}
    assert ['squeue', '-h', '-w', EL, '-o', '%i|%T|%u'] in calls


def test_drain_is_one_update_with_our_reason():
    result, calls = run({'op': 'drain', 'nodes': [EL, UB], 'reason': 'nodeprep:r1:drain'}, 'show-node-idle.txt')
    assert updates(calls) == [['scontrol', 'update', 'nodename=el9-b200-01,ubuntu2404-h200-01', 'state=DRAIN',
                               'reason=nodeprep:r1:drain']]
    assert result['changed'] is True


@pytest.mark.parametrize('capture, node', [
    ('show-node-drained-rebooted-admin.txt', UB),      # an admin's drain
    ('show-node-drained.txt', EL),                     # ours already: never drained twice
    ('show-node-reboot-requested.txt', EL),            # a reboot pending
])
def test_drain_refuses_a_held_or_already_drained_node(capture, node):
    with pytest.raises(AnsibleActionFail, match='will not drain {0}'.format(node)):
        run({'op': 'drain', 'nodes': [node], 'reason': 'nodeprep:r1:drain'}, capture)


def test_drain_refuses_a_reason_not_ours():
    with pytest.raises(AnsibleActionFail, match="needs a reason of ours"):
        run({'op': 'drain', 'nodes': [EL], 'reason': 'maintenance'}, 'show-node-idle.txt')


def test_set_reason_only_where_the_reason_is_ours():
    result, calls = run({'op': 'set_reason', 'nodes': [EL, UB], 'reason': 'nodeprep:r1:work'},
                        'show-node-drained-rebooted-admin.txt')
    assert updates(calls) == [['scontrol', 'update', 'nodename=el9-b200-01', 'reason=nodeprep:r1:work']]
    assert result['not_ours'] == [UB]


def test_set_reason_per_node():
    result, calls = run({'op': 'set_reason', 'nodes': [EL, UB],
                         'reasons': {EL: 'nodeprep:r1:verify-failed:gpu.count', UB: 'nodeprep:r1:verify'}},
                        'show-node-drained.txt')
    # One update per distinct reason, in the reasons' order.
    assert updates(calls) == [['scontrol', 'update', 'nodename=ubuntu2404-h200-01', 'reason=nodeprep:r1:verify'],
                              ['scontrol', 'update', 'nodename=el9-b200-01',
                               'reason=nodeprep:r1:verify-failed:gpu.count']]
    assert result['changed'] is True


def test_resume_only_ours_and_reports_back():
    result, calls = run({'op': 'resume', 'nodes': [EL, UB], 'resume_timeout': 0},
                        'show-node-drained-rebooted-admin.txt')
    assert updates(calls) == [['scontrol', 'update', 'nodename=el9-b200-01', 'state=RESUME']]
    assert result['resumed'] == [EL]
    assert UB in result['not_ours']
    # The fake Slurm still answers DOWN+DRAIN: not back.
    assert result['back'] == [] and result['not_back'] == {EL: 'DOWN+DRAIN'}


def test_resume_never_cancels_a_pending_reboot():
    result, calls = run({'op': 'resume', 'nodes': [EL]}, 'show-node-reboot-requested.txt')
    assert updates(calls) == [] and result['resumed'] == [] and EL in result['not_ours']


def test_wait_empty_returns_busy_nodes_with_their_jobs():
    result, calls = run({'op': 'wait_empty', 'nodes': [EL, UB], 'timeout': 0}, 'show-node-draining.txt',
                        squeue={EL: read('squeue-w-el9-tall.txt'), UB: read('squeue-w-ubuntu.txt')})
    assert result['busy'] == {EL: ['1'], UB: ['2']} and result['timed_out'] is True and updates(calls) == []
    result, calls = run({'op': 'wait_empty', 'nodes': [EL, UB], 'timeout': 0}, 'show-node-drained.txt')
    assert result['busy'] == {} and result['empty'] == [EL, UB] and result['timed_out'] is False


def test_check_mode_writes_nothing():
    for op in ('drain', 'set_reason', 'resume'):
        result, calls = run({'op': op, 'nodes': [EL], 'reason': 'nodeprep:r1:drain'}, 'show-node-idle.txt',
                            check_mode=True)
        assert calls == [] and result['changed'] is True


def test_unknown_node_is_named():
    with pytest.raises(AnsibleActionFail, match='Slurm does not know node.s. gpu-99'):
        run({'op': 'drain', 'nodes': ['gpu-99'], 'reason': 'nodeprep:r1:drain'}, 'show-node-idle.txt')


REBOOT = ['scontrol', 'reboot']


def drained_el(state, reason):
    """The real IDLE+DRAIN line of el9-b200-01 with the State and Reason slurmctld 22.05 gives it during our
    `scontrol reboot nextstate=DOWN` (the rows of test__rolling.test_reboot_step)."""
    line = next(l for l in read('show-node-drained.txt').splitlines() if l.startswith('NodeName=' + EL))
    line = line.replace('State=IDLE+DRAIN ', 'State={0} '.format(state))
    start = line.index(' Reason=') + len(' Reason=')
    end = line.index(' [', start)
    return line[:start] + reason + line[end:] + '\n'


def test_reboot_asks_slurm_with_nextstate_down_and_our_reason():
    result, calls = run({'op': 'reboot', 'nodes': [EL], 'reason': 'nodeprep:r1:reboot'}, 'show-node-drained.txt')
    assert [c for c in calls if c[:2] == REBOOT] == [
        ['scontrol', 'reboot', 'nextstate=DOWN', 'reason=nodeprep:r1:reboot', EL]]
    assert result['asked'] == [EL] and result['changed'] is True


def test_reboot_is_never_asked_twice():
    text = drained_el('DOWN+REBOOT_ISSUED', 'nodeprep:r1:reboot : reboot issued')
    result, calls = run({'op': 'reboot', 'nodes': [EL], 'reason': 'nodeprep:r2:reboot'}, lambda: text)
    assert [c for c in calls if c[:2] == REBOOT] == [] and result['asked'] == [] and result['steps'] == {EL: 'wait'}


def test_reboot_refuses_a_node_not_ours():
    with pytest.raises(AnsibleActionFail, match='will not ask Slurm to reboot ubuntu2404-h200-01'):
        run({'op': 'reboot', 'nodes': [UB], 'reason': 'nodeprep:r1:reboot'}, 'show-node-drained-rebooted-admin.txt')


def test_reboot_needs_the_reboot_reason():
    with pytest.raises(AnsibleActionFail, match='op=reboot needs the reason nodeprep:<run id>:reboot'):
        run({'op': 'reboot', 'nodes': [EL], 'reason': 'nodeprep:r1:work'}, 'show-node-drained.txt')


def test_reboot_in_check_mode_asks_nothing():
    result, calls = run({'op': 'reboot', 'nodes': [EL], 'reason': 'nodeprep:r1:reboot'}, 'show-node-drained.txt',
                        check_mode=True)
    assert calls == [] and result['changed'] is True


def test_wait_reboot_polls_until_complete():
    answers = [drained_el('DOWN+REBOOT_ISSUED', 'nodeprep:r1:reboot : reboot issued'),
               drained_el('DOWN', 'nodeprep:r1:reboot : reboot issued : reboot complete')]
    result, calls = run({'op': 'wait_reboot', 'nodes': [EL], 'timeout': 60, 'interval': 0},
                        lambda: answers.pop(0) if len(answers) > 1 else answers[0])
    assert result['rebooted'] == [EL] and result['not_rebooted'] == {}
    assert calls == [['scontrol', 'show', 'node', '-o']] * 2


def test_wait_reboot_reports_a_timed_out_reboot():
    text = drained_el('DOWN', 'nodeprep:r1:reboot : reboot issued : reboot timed out')
    result, _calls = run({'op': 'wait_reboot', 'nodes': [EL], 'timeout': 60, 'interval': 0}, lambda: text)
    assert result['rebooted'] == [] and result['not_rebooted'][EL].startswith('step=timed-out State=DOWN')
