# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/action/rolling_slurm.py against Slurm 22.05.8's and 24.11.5's captured answers: the argv it runs, and what it
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

SLURM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'module_utils', 'slurm', '22.05')
EL, UB = 'el9-b200-01', 'ubuntu2404-h200-01'


def read(name):
    with open(os.path.join(SLURM, name)) as handle:
        return handle.read()


def states(version, name):
    with open(os.path.join(os.path.dirname(SLURM), version, 'states', name)) as handle:
        return handle.read()


ENV = ['env', 'LC_ALL=C', 'SLURM_TIME_FORMAT=standard']


def run(args, nodes_capture, squeue='', check_mode=False, config=None, links=None, hostvars=None):
    """Run the action with `scontrol show node -o [hostlist]` answering ``nodes_capture`` (a capture's name, or a
    callable giving the text of each call), squeue answering ``squeue`` (text, or a callable), the lock's link
    commands acting on ``links`` ({path: target}); the argv lists run (after the environment), the result."""
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
    links = {} if links is None else links

    def execute(module_name, module_args, task_vars):
        assert module_name == 'ansible.builtin.command'
        argv = module_args['argv']
        assert argv[:3] == ENV
        argv = argv[3:]
        calls.append(argv)
        if argv[:4] == ['scontrol', 'show', 'node', '-o']:
            return {'rc': 0, 'stdout': nodes_capture() if callable(nodes_capture) else read(nodes_capture)}
        if argv == ['scontrol', 'show', 'config']:
            return {'rc': 0, 'stdout': config or read('show-config.txt')}
        if argv == ['scontrol', 'show', 'partition', '-o']:
            return {'rc': 0, 'stdout': read('show-partition.txt')}
        if argv[0] == 'squeue':
            assert argv[1:3] == ['-h', '-w'] and argv[4:] == ['-o', '%i|%T|%u|%N']
            return {'rc': 0, 'stdout': squeue(argv[3]) if callable(squeue) else squeue}
        if argv[:2] in (['scontrol', 'update'], ['scontrol', 'reboot']):
            return {'rc': 0, 'stdout': ''}
        if argv[0] == 'readlink':
            return {'rc': 0, 'stdout': links[argv[1]] + '\n'} if argv[1] in links else {'rc': 1, 'stdout': ''}
        if argv[0] == 'mkdir':
            return {'rc': 0, 'stdout': ''}
        if argv[:2] == ['ln', '-s']:
            if argv[3] in links:
                return {'rc': 1, 'stdout': '', 'stderr': 'File exists'}
            links[argv[3]] = argv[2]
            return {'rc': 0, 'stdout': ''}
        if argv[:2] == ['ln', '-sfn']:
            links[argv[3]] = argv[2]
            return {'rc': 0, 'stdout': ''}
        if argv[:2] == ['mv', '-T']:
            links[argv[3]] = links.pop(argv[2])
            return {'rc': 0, 'stdout': ''}
        if argv[:2] == ['rm', '-f']:
            links.pop(argv[2], None)
            return {'rc': 0, 'stdout': ''}
        raise AssertionError(argv)
    action._execute_module = execute
    result = action.run(task_vars={'inventory_hostname': 'slurm-head', 'hostvars': hostvars or {}})
    return result, calls


UPDATE = ['scontrol', 'update']


def updates(calls):
    return [c for c in calls if c[:2] == UPDATE]


@pytest.mark.parametrize('version', ['22.05', '24.11'])
def test_state_is_four_calls_whatever_the_nodes(version):
    result, calls = run({'op': 'state', 'nodes': [EL, UB]}, lambda: states(version, 'show-node-hostlist-busy.txt'),
                        squeue=states(version, 'squeue-w-hostlist.txt'),
                        config=states(version, 'show-config.txt'))
    assert updates(calls) == []
    assert result['changed'] is False
    assert result['records'][EL]['State'] == 'ALLOCATED' and result['records'][UB]['State'] == 'MIXED'
    assert result['config']['SLURM_VERSION'].startswith(version + '.')
    assert result['config']['SlurmdTimeout'] == '300 sec' and result['config']['RebootProgram'] == '/usr/sbin/reboot'
    # one squeue over both nodes: the two-node job is on both
    assert result['jobs'] == {EL: ['2', '3'], UB: ['3']}
    assert calls == [['scontrol', 'show', 'node', '-o'], ['scontrol', 'show', 'config'],
                     ['scontrol', 'show', 'partition', '-o'],
                     ['squeue', '-h', '-w', 'el9-b200-01,ubuntu2404-h200-01', '-o', '%i|%T|%u|%N']]


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
    busy = '1|RUNNING|root|el9-b200-01\n2|RUNNING|root|ubuntu2404-h200-01\n'
    result, calls = run({'op': 'wait_empty', 'nodes': [EL, UB], 'timeout': 0}, 'show-node-draining.txt', squeue=busy)
    assert result['busy'] == {EL: ['1'], UB: ['2']} and result['timed_out'] is True and updates(calls) == []
    result, calls = run({'op': 'wait_empty', 'nodes': [EL, UB], 'timeout': 0}, 'show-node-drained.txt')
    assert result['busy'] == {} and result['empty'] == [EL, UB] and result['timed_out'] is False


def test_wait_empty_polls_two_calls_per_poll_for_a_batch_of_any_size():
    """Issue 29: one squeue per node per poll was an RPC storm; a poll is one scontrol and one squeue."""
    answers = {'n': 0}
    line = next(l for l in read('show-node-draining.txt').splitlines() if l.startswith('NodeName=' + EL))
    names = ['gpu{0:03d}'.format(i) for i in range(100)]
    text = ''.join(line.replace('NodeName=' + EL, 'NodeName=' + n).replace('State=MIXED+DRAIN', 'State=IDLE+DRAIN')
                   + '\n' for n in names)

    def squeue(hostlist):
        answers['n'] += 1
        # a job on gpu000..gpu009 until the third poll
        return '' if answers['n'] >= 3 else '7|RUNNING|root|gpu[000-009]\n'
    result, calls = run({'op': 'wait_empty', 'nodes': names, 'timeout': 60, 'interval': 0}, lambda: text,
                        squeue=squeue)
    assert result['polls'] == 3 and result['empty'] == sorted(names) and result['busy'] == {}
    assert len(calls) == 2 * 3
    assert all(c[:2] in (['scontrol', 'show'], ['squeue', '-h']) for c in calls)
    assert calls[0] == ['scontrol', 'show', 'node', '-o', ','.join(names)]


def test_wait_empty_a_held_node_without_drain_is_empty_when_no_job_runs():
    """Issue 29: a held DOWN node never counted as empty (the batch waited the whole drain timeout)."""
    down = read('show-node-drained-rebooted-admin.txt').replace('State=DOWN+DRAIN', 'State=DOWN').replace(
        'nodeprep:cap1:drain', 'Node unexpectedly rebooted')
    result, _calls = run({'op': 'wait_empty', 'nodes': [EL], 'held': [EL], 'timeout': 0}, lambda: down)
    assert result['empty'] == [EL] and result['timed_out'] is False and result['not_ours'] == []


def test_wait_empty_names_a_node_someone_took_during_the_wait():
    # UB was ours when the batch was drained; an admin's reason now: reported, never worked on.
    result, _calls = run({'op': 'wait_empty', 'nodes': [EL, UB], 'timeout': 0},
                         'show-node-drained-rebooted-admin.txt')
    assert result['not_ours'] == [UB]


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
    assert calls == [['scontrol', 'show', 'node', '-o', EL]] * 2


def test_wait_reboot_reports_a_timed_out_reboot():
    text = drained_el('DOWN', 'nodeprep:r1:reboot : reboot issued : reboot timed out')
    result, _calls = run({'op': 'wait_reboot', 'nodes': [EL], 'timeout': 60, 'interval': 0}, lambda: text)
    assert result['rebooted'] == [] and result['not_rebooted'][EL].startswith('step=timed-out State=DOWN')


# --- min_available at the drain, resume of a node already in service, empty answers ------------------------------

def test_drain_refuses_when_a_partition_would_keep_too_few_usable_nodes():
    # The admin's node is not usable: draining el9 would leave the partition with none.
    with pytest.raises(AnsibleActionFail, match=r'will not drain: draining \(el9-b200-01\) would leave partition gpu '
                                                r'with 0 usable node\(s\) \(none\); nodeprep_rolling_min_available is 1'):
        run({'op': 'drain', 'nodes': [EL], 'reason': 'nodeprep:r1:drain', 'min_available': 1},
            lambda: read('show-node-drained-rebooted-admin.txt').replace('State=DOWN+DRAIN', 'State=IDLE').replace(
                ' Reason=nodeprep:cap1:drain [root@2026-12-01T23:19:31]', ''))
    result, calls = run({'op': 'drain', 'nodes': [EL], 'reason': 'nodeprep:r1:drain', 'min_available': 1},
                        'show-node-idle.txt')
    assert len(updates(calls)) == 1


def test_resume_a_node_already_back_with_our_stale_reason_24_11():
    """24.11 without accounting storage keeps our reason on a resumed node: it is back, not resumed again."""
    result, calls = run({'op': 'resume', 'nodes': [EL]}, lambda: states('24.11', 'show-node-resumed-ours.txt'))
    assert updates(calls) == [] and result['resumed'] == [] and result['back'] == [EL] and result['already'] == [EL]
    assert result['not_ours'] == {}


@pytest.mark.parametrize('op, keys', [
    ('wait_empty', {'empty': [], 'busy': {}, 'not_ours': [], 'timed_out': False, 'polls': 0}),
    ('resume', {'resumed': [], 'back': [], 'not_back': {}, 'not_ours': {}}),
    ('wait_reboot', {'rebooted': [], 'not_rebooted': {}}),
    ('set_reason', {'updated': [], 'not_ours': []}),
])
def test_no_node_no_call_and_every_key(op, keys):
    result, calls = run({'op': op, 'nodes': [], 'reason': 'nodeprep:r1:work'}, 'show-node-idle.txt')
    assert calls == []
    for key, value in keys.items():
        assert result[key] == value


# --- the lock of a run ------------------------------------------------------------------------------------------

LOCK = '/var/lib/nodeprep/rolling-npsb.lock'


@pytest.fixture
def controller(monkeypatch):
    monkeypatch.setattr(rolling_slurm.socket, 'gethostname', lambda: 'ctl1')
    monkeypatch.setattr(rolling_slurm.os, 'getppid', lambda: 4242)
    alive = {'pids': set()}
    monkeypatch.setattr(rolling_slurm, 'process_alive', lambda pid: pid in alive['pids'])
    return alive


def lock(run_id, links, check_mode=False):
    return run({'op': 'lock', 'run_id': run_id}, 'show-node-idle.txt', links=links, check_mode=check_mode,
               config=states('24.11', 'show-config.txt'))


def test_lock_taken_when_free(controller):
    links = {}
    result, calls = lock('r1', links)
    assert result['decision'] == 'take' and result['changed'] is True and result['lock'] == LOCK
    assert links[LOCK].startswith('r1@ctl1.4242:')
    assert ['ln', '-s', links[LOCK], LOCK] in calls


def test_lock_kept_by_the_same_run_id(controller):
    links = {LOCK: 'r1@ctl1.99:1765000000'}
    result, _calls = lock('r1', links)
    assert result['decision'] == 'ours' and links[LOCK] == 'r1@ctl1.99:1765000000'


def test_a_second_run_is_refused_naming_the_first(controller):
    controller['pids'].add(99)
    links = {LOCK: 'r0@ctl1.99:1765000000'}
    with pytest.raises(AnsibleActionFail, match=r'run r0 holds the lock of this cluster \(/var/lib/nodeprep/rolling-'
                                                r'npsb.lock -> r0@ctl1.99:1765000000: controller ctl1, process 99'):
        lock('r1', links)
    assert links[LOCK] == 'r0@ctl1.99:1765000000'
    # another controller: its process cannot be seen from here, so refused too
    links = {LOCK: 'r0@ctl2.99:1765000000'}
    with pytest.raises(AnsibleActionFail, match='run r0 holds the lock'):
        lock('r1', links)


def test_a_lock_left_by_a_gone_run_of_this_controller_is_taken_over(controller):
    links = {LOCK: 'r0@ctl1.99:1765000000'}
    result, calls = lock('r1', links)
    assert result['decision'] == 'stale' and links[LOCK].startswith('r1@ctl1.4242:')
    assert ['mv', '-T', LOCK + '.r1', LOCK] in calls


def test_lock_in_check_mode_reads_only(controller):
    links = {}
    result, calls = lock('r1', links, check_mode=True)
    assert result['decision'] == 'take' and links == {} and not [c for c in calls if c[0] in ('ln', 'mv', 'mkdir')]


def test_unlock_only_our_own(controller):
    links = {LOCK: 'r0@ctl1.99:1765000000'}
    result, _calls = run({'op': 'unlock', 'run_id': 'r1'}, 'show-node-idle.txt', links=links,
                         config=states('24.11', 'show-config.txt'))
    assert result['changed'] is False and LOCK in links
    result, _calls = run({'op': 'unlock', 'run_id': 'r0'}, 'show-node-idle.txt', links=links,
                         config=states('24.11', 'show-config.txt'))
    assert result['changed'] is True and links == {}


def test_lock_refuses_a_run_id_with_a_newline(controller):
    with pytest.raises(AnsibleActionFail, match="op=lock: nodeprep_rolling_run_id: 'r1\\\\n' is not allowed"):
        lock('r1\n', {})


# --- op=health: readiness's verdict ---------------------------------------------------------------------------------

def readiness(*failed):
    return {'nodeprep_readiness': {'checks': [{'id': 'gpu.count', 'status': 'pass'}] +
                                   [{'id': c, 'status': 'fail'} for c in failed] +
                                   [{'id': 'shm.size', 'status': 'warn'}]}}


@pytest.mark.parametrize('version', ['22.05', '24.11'])
def test_health_drains_the_failing_node_with_our_reason_and_leaves_an_admins(version):
    text = states(version, 'show-node-idle.txt').replace(
        'NodeName=ubuntu2404-h200-01', 'NodeName=ubuntu2404-h200-01').rstrip('\n')
    admin = states(version, 'show-node-admin-key-value.txt')
    lines = [line for line in text.splitlines() if line.startswith('NodeName=' + EL)] + [admin.strip()]
    result, calls = run({'op': 'health', 'nodes': [EL, UB]}, lambda: '\n'.join(lines) + '\n',
                        hostvars={EL: readiness('gpu.health', 'gpu.topology'), UB: readiness('gpu.health')})
    assert updates(calls) == [['scontrol', 'update', 'nodename=el9-b200-01', 'state=DRAIN',
                               'reason=nodeprep:health:gpu.health,gpu.topology']]
    assert calls[0] == ['scontrol', 'show', 'node', '-o']
    assert result['drained'] == [EL] and UB in result['skipped'] and result['changed'] is True


def test_health_resumes_only_what_our_verdict_drained():
    ours = drained_el('IDLE+DRAIN', 'nodeprep:health:gpu.health')
    result, calls = run({'op': 'health', 'nodes': [EL]}, lambda: ours, hostvars={EL: readiness()})
    assert updates(calls) == [['scontrol', 'update', 'nodename=el9-b200-01', 'state=RESUME']]
    assert result['resumed'] == [EL]
    # a rolling run's drain passes: not the verdict's to resume
    result, calls = run({'op': 'health', 'nodes': [EL]}, 'show-node-drained.txt', hostvars={EL: readiness()})
    assert updates(calls) == [] and result['resumed'] == [] and result['changed'] is False


def test_health_unreachable_nodes_are_not_judged_and_check_mode_changes_nothing():
    result, calls = run({'op': 'health', 'nodes': [EL, UB]}, 'show-node-idle.txt',
                        hostvars={EL: readiness('gpu.health'), UB: {'nodeprep_readiness': {'unreachable': True}}})
    assert result['actions'][UB]['action'] == 'none' and 'not judged' in result['actions'][UB]['why']
    result, calls = run({'op': 'health', 'nodes': [EL, UB]}, 'show-node-idle.txt', check_mode=True,
                        hostvars={EL: readiness('gpu.health'), UB: readiness()})
    assert updates(calls) == [] and result['changed'] is True and result['drained'] == [EL]


def test_health_from_explicit_verdicts_and_an_unknown_node():
    result, calls = run({'op': 'health', 'verdicts': {EL: ['gpu.health'], 'gpu-99': ['x']}}, 'show-node-idle.txt')
    assert result['unknown'] == ['gpu-99'] and result['drained'] == [EL] and len(updates(calls)) == 1
