# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/rules/_rolling.py: the parsers on Slurm 22.05.8's real output (slurm/SOURCES.md) and the decision
tables of the rolling maintenance run."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import time

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rolling as R

SLURM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'slurm', '22.05')
EL, UB = 'el9-b200-01', 'ubuntu2404-h200-01'


def read(name):
    with open(os.path.join(SLURM, name)) as handle:
        return handle.read()


def nodes(name):
    return R.parse_nodes(read(name))


# --- parsers on real output ------------------------------------------------------------------------------------

def test_parse_nodes_idle_keeps_values_with_spaces():
    got = nodes('show-node-idle.txt')
    assert sorted(got) == [EL, UB]
    assert got[EL]['State'] == 'IDLE'
    assert got[EL]['OS'] == 'Linux 6.18.44-fc-v1045 #1 SMP PREEMPT_DYNAMIC @0'
    assert got[EL]['Partitions'] == 'gpu'
    assert 'Reason' not in got[EL]


@pytest.mark.parametrize('capture, node, base, flags, reason, drained, usable, held, ours, reboot', [
    ('show-node-idle.txt', EL, 'IDLE', [], '', False, True, False, None, False),
    ('show-node-mixed-allocated.txt', EL, 'MIXED', [], '', False, True, False, None, False),
    ('show-node-mixed-allocated.txt', UB, 'ALLOCATED', [], '', False, True, False, None, False),
    ('show-node-draining.txt', EL, 'MIXED', ['DRAIN'], 'nodeprep:cap1:drain', False, False, False, 'drain', False),
    ('show-node-draining.txt', UB, 'ALLOCATED', ['DRAIN'], 'nodeprep:cap1:drain', False, False, False, 'drain',
     False),
    ('show-node-drained.txt', EL, 'IDLE', ['DRAIN'], 'nodeprep:cap1:drain', True, False, False, 'drain', False),
    # Rebooted while drained by us (ReturnToService=1): DOWN, but the reason is still ours.
    ('show-node-drained-rebooted-admin.txt', EL, 'DOWN', ['DRAIN'], 'nodeprep:cap1:drain', True, False, False,
     'drain', False),
    ('show-node-drained-rebooted-admin.txt', UB, 'IDLE', ['DRAIN'], 'admin: bad fan, ticket 42', True, False, True,
     None, False),
    ('show-node-reboot-requested.txt', EL, 'MIXED', ['REBOOT_REQUESTED'], 'site: firmware', False, False, True, None,
     True),
    ('show-node-after-cancel-reboot.txt', EL, 'IDLE', [], '', False, True, False, None, False),
    ('show-node-resumed-after-reboot.txt', EL, 'IDLE', [], '', False, True, False, None, False),
])
def test_node_status_on_real_states(capture, node, base, flags, reason, drained, usable, held, ours, reboot):
    status = R.node_status(nodes(capture)[node])
    assert (status['base'], status['flags'], status['reason']) == (base, flags, reason)
    assert (status['drained'], status['usable'], status['held'], status['reboot_pending']) == \
        (drained, usable, held, reboot)
    assert (status['ours'] or {}).get('phase') == ours
    assert status['partitions'] == ['gpu']


def test_parse_jobs_real_squeue():
    jobs = R.parse_jobs(read('squeue-all.txt'))
    # squeue -o '%i|%T|%u' (no %N column): the jobs' nodes are unknown, not guessed.
    assert jobs == [{'id': '3', 'state': 'PENDING', 'user': 'root', 'nodes': []},
                    {'id': '1', 'state': 'RUNNING', 'user': 'root', 'nodes': []},
                    {'id': '2', 'state': 'RUNNING', 'user': 'root', 'nodes': []}]
    assert R.active_jobs(jobs) == ['1', '2']      # a pending job holds no node
    assert R.active_jobs(R.parse_jobs(read('squeue-w-ubuntu.txt'))) == ['2']
    assert R.active_jobs(R.parse_jobs(read('squeue-w-el9-tall.txt'))) == ['1']
    assert R.parse_jobs(read('squeue-w-empty.txt')) == []


def test_parse_jobs_refuses_another_format():
    with pytest.raises(R.RollingError, match=r"squeue printed '1 RUNNING'"):
        R.parse_jobs('1 RUNNING\n')


def test_parse_config_and_partitions_real():
    config = R.parse_config(read('show-config.txt'))
    assert config['ResumeTimeout'] == '600 sec'
    assert R.parse_seconds(config['ResumeTimeout']) == 600
    assert config['ReturnToService'] == '1'
    assert config['SLURM_VERSION'] == '22.05.8'
    parts = R.parse_partitions(read('show-partition.txt'))
    assert list(parts) == ['gpu']
    assert parts['gpu']['Nodes'] == 'el9-b200-01,ubuntu2404-h200-01'
    assert 'ResumeTimeout' not in parts['gpu']


@pytest.mark.parametrize('value, seconds', [('600 sec', 600), ('60', 60), ('GLOBAL', None), ('NONE', None),
                                            (None, None), ('1 min', None)])
def test_parse_seconds(value, seconds):
    assert R.parse_seconds(value) == seconds


# --- the reason ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('reason, expected', [
    ('nodeprep:r1:drain', {'run_id': 'r1', 'phase': 'drain', 'checks': [], 'notes': []}),
    ('nodeprep:20261201T2300:work [root@2026-12-01T23:19:31]', {'run_id': '20261201T2300', 'phase': 'work',
                                                                'checks': [], 'notes': []}),
    ('nodeprep:r1:verify-failed:driver.version,gpu.count',
     {'run_id': 'r1', 'phase': 'verify-failed', 'checks': ['driver.version', 'gpu.count'], 'notes': []}),
    ('nodeprep:r1:verify', {'run_id': 'r1', 'phase': 'verify', 'checks': [], 'notes': []}),
    ('nodeprep:r1:reboot', {'run_id': 'r1', 'phase': 'reboot', 'checks': [], 'notes': []}),
    # What slurmctld 22.05 appends during scontrol reboot (set_node_reboot_reason: " : <note>").
    ('nodeprep:r1:reboot : reboot issued [slurm@2026-12-02T03:01:02]',
     {'run_id': 'r1', 'phase': 'reboot', 'checks': [], 'notes': ['reboot issued']}),
    ('nodeprep:r1:reboot : reboot issued : reboot complete [slurm@2026-12-02T03:01:40]',
     {'run_id': 'r1', 'phase': 'reboot', 'checks': [], 'notes': ['reboot issued', 'reboot complete']}),
    ('nodeprep:r1:reboot : reboot issued : reboot timed out',
     {'run_id': 'r1', 'phase': 'reboot', 'checks': [], 'notes': ['reboot issued', 'reboot timed out']}),
    ('nodeprep:r1:reboot : my own words', None),
    ('admin: bad fan, ticket 42', None),
    ('Node unexpectedly rebooted', None),
    ('reboot requested', None),
    ('nodeprep:r1:rebooting', None),       # not a phase of ours
    ('nodeprep:r 1:drain', None),
    ('nodeprep:r1:drain:extra', None),
    ('nodeprep-other:r1:drain', None),
    ('', None),
])
def test_parse_reason(reason, expected):
    assert R.parse_reason(reason) == expected


def test_format_reason_round_trip():
    for phase in ('drain', 'work', 'reboot', 'verify'):
        assert R.parse_reason(R.format_reason('run-1', phase)) == {'run_id': 'run-1', 'phase': phase, 'checks': [],
                                                                   'notes': []}
    assert R.format_reason('run-1', 'verify-failed', ['a.b', 'c']) == 'nodeprep:run-1:verify-failed:a.b,c'


@pytest.mark.parametrize('run_id', ['', 'a:b', 'a b', 'x' * 65, None, 7])
def test_run_id_refused(run_id):
    with pytest.raises(R.RollingError, match='nodeprep_rolling_run_id'):
        R.format_reason(run_id, 'drain')


def test_marker_round_trip():
    assert R.parse_marker(R.format_marker('r1', 'taken')) == \
        {'run_id': 'r1', 'phase': 'taken', 'held': False, 'original_reason': ''}
    assert R.parse_marker(R.format_marker('r1', 'work', True, 'admin: bad fan')) == \
        {'run_id': 'r1', 'phase': 'work', 'held': True, 'original_reason': 'admin: bad fan'}
    assert R.parse_marker('') is None
    assert R.parse_marker(None) is None
    assert R.parse_marker('garbage\n') is None


# --- the plans -------------------------------------------------------------------------------------------------

def plans(kernel=(), driver=(), reboot=False, settings=()):
    empty = {'reasons': [], 'reboot': {'needed': False, 'why': []}, 'run': []}
    out = {'kernel': dict(empty, reasons=list(kernel), run=list(kernel)),
           'nvidia_driver': dict(empty, reasons=list(driver), run=list(driver),
                                 reboot={'needed': reboot, 'why': ['new module'] if reboot else []}),
           'shm': dict(empty, run=list(settings), reasons=list(settings))}
    return out


@pytest.mark.parametrize('p, disruptive, settings', [
    (plans(), [], []),
    (plans(settings=['size 64G']), [], ['shm: size 64G']),
    (plans(driver=['branch 570 -> 580']), ['nvidia_driver: branch 570 -> 580'], []),
    (plans(kernel=['kernel 5.14 -> 6.1']), ['kernel: kernel 5.14 -> 6.1'], []),
    (plans(reboot=True), ['nvidia_driver: reboot (new module)'], []),
])
def test_disruptive_is_kernel_or_driver_work(p, disruptive, settings):
    assert R.disruptive(p) == disruptive
    assert R.settings_work(p) == settings


# --- decide: one rule a row ------------------------------------------------------------------------------------

IDLE = nodes('show-node-idle.txt')
MIXED = nodes('show-node-mixed-allocated.txt')
DRAINING = nodes('show-node-draining.txt')
DRAINED = nodes('show-node-drained.txt')
REBOOTED_ADMIN = nodes('show-node-drained-rebooted-admin.txt')
REBOOT_REQ = nodes('show-node-reboot-requested.txt')
DRIVER = plans(driver=['branch 570 -> 580'])
OURS_MARK = R.parse_marker('cap1 taken ours\n')


def with_reason(record, reason, state=None):
    out = dict(record, Reason=reason + ' [root@2026-12-01T23:19:31]')
    if state:
        out['State'] = state
    return out


@pytest.mark.parametrize('rule, p, marker, record, options, state, start, ours, held', [
    ('nothing to do: not a candidate, Slurm not needed', plans(), None, None, {}, 'on-target', None, False, False),
    ('settings only: in place, never drained', plans(settings=['size']), None, IDLE[EL], {}, 'in-place', None, False,
     False),
    ('disruptive on an idle node: drain first', DRIVER, None, IDLE[EL], {}, 'candidate', 'drain', False, False),
    ('disruptive on a busy node: drain first (then wait)', DRIVER, None, MIXED[EL], {}, 'candidate', 'drain', False,
     False),
    ('unknown to Slurm: skipped', DRIVER, None, None, {}, 'skipped-held', None, False, False),
    ('an admin drain: skipped', DRIVER, None, REBOOTED_ADMIN[UB], {}, 'skipped-held', None, False, False),
    ('an admin drain with include_held: worked on, held', DRIVER, None, REBOOTED_ADMIN[UB], {'include_held': True},
     'candidate', 'wait', False, True),
    ('a reboot pending: skipped', DRIVER, None, REBOOT_REQ[EL], {}, 'skipped-held', None, False, False),
    ('DOWN, unexpectedly rebooted: skipped', DRIVER, None,
     with_reason(IDLE[EL], 'Node unexpectedly rebooted', 'DOWN'), {}, 'skipped-held', None, False, False),
    ('a reason without DRAIN (health check): skipped', DRIVER, None, with_reason(IDLE[EL], 'hc: xid 79'), {},
     'skipped-held', None, False, False),
    ('ours, draining: keep waiting, no second drain', DRIVER, OURS_MARK, DRAINING[EL], {}, 'draining', 'wait', True,
     False),
    ('ours, drained: wait (returns at once)', DRIVER, OURS_MARK, DRAINED[EL], {}, 'draining', 'wait', True, False),
    ('ours and DOWN after our reboot: still ours', plans(), OURS_MARK, REBOOTED_ADMIN[EL], {}, 'draining', 'wait',
     True, False),
    ('ours in work: work again', DRIVER, OURS_MARK, with_reason(DRAINED[EL], 'nodeprep:r0:work'), {}, 'work', 'work',
     True, False),
    ('ours in work, plan already on target: still finished (verify, resume)', plans(), OURS_MARK,
     with_reason(DRAINED[EL], 'nodeprep:r0:work'), {}, 'work', 'work', True, False),
    ('ours in verify: verify again', plans(), OURS_MARK, with_reason(DRAINED[EL], 'nodeprep:r0:verify'), {}, 'verify',
     'verify', True, False),
    ('ours verify-failed: verify only', plans(), OURS_MARK,
     with_reason(DRAINED[EL], 'nodeprep:r0:verify-failed:gpu.count'), {}, 'verify', 'verify', True, False),
    ('ours verify-failed with retry_failed: work again', plans(), OURS_MARK,
     with_reason(DRAINED[EL], 'nodeprep:r0:verify-failed:gpu.count'), {'retry_failed': True}, 'work', 'work', True,
     False),
    ('our marker, no reason (stopped before the drain): drain', DRIVER, OURS_MARK, IDLE[EL], {}, 'candidate',
     'drain', False, False),
    ('our marker, an admin drained it since: skipped', DRIVER, OURS_MARK, REBOOTED_ADMIN[UB], {}, 'skipped-held',
     None, False, False),
    ('our marker left, nothing disruptive, no reason of ours: nothing', plans(), OURS_MARK, IDLE[EL], {}, 'on-target',
     None, False, False),
    ('ours, stopped in its Slurm reboot (issued): work again (reboot_step waits)', DRIVER, OURS_MARK,
     with_reason(IDLE[EL], 'nodeprep:r0:reboot : reboot issued', 'DOWN+REBOOT_ISSUED'), {}, 'work', 'work', True,
     False),
    ('ours, Slurm reboot complete: work again (on target: the roles do nothing)', plans(), OURS_MARK,
     with_reason(IDLE[EL], 'nodeprep:r0:reboot : reboot issued : reboot complete', 'DOWN'), {}, 'work', 'work',
     True, False),
    ('held node worked on earlier (marker held, work), include_held: work, still held', DRIVER,
     R.parse_marker('r0 work held admin: bad fan, ticket 42\n'), REBOOTED_ADMIN[UB], {'include_held': True}, 'work',
     'work', False, True),
    # The marker of an include_held run obeys include_held and Slurm's state (issue: a node worked on under a job).
    ('held marker, include_held off, still held: skipped', DRIVER,
     R.parse_marker('r0 work held admin: bad fan, ticket 42\n'), REBOOTED_ADMIN[UB], {}, 'skipped-held', None, False,
     False),
    ('held marker, back in service running a job, include_held off: drained first', DRIVER,
     R.parse_marker('r0 work held admin: bad fan, ticket 42\n'), MIXED[EL], {}, 'candidate', 'drain', False, False),
    ('held marker, back in service running a job, include_held on: drained first, not held', DRIVER,
     R.parse_marker('r0 work held admin: bad fan, ticket 42\n'), MIXED[EL], {'include_held': True}, 'candidate',
     'drain', False, False),
    ('held marker, back in service, nothing disruptive left: nothing', plans(),
     R.parse_marker('r0 verify held admin: bad fan\n'), MIXED[EL], {}, 'on-target', None, False, False),
])
def test_decide(rule, p, marker, record, options, state, start, ours, held):
    got = R.decide('n1', p, marker, record, options)
    assert (got['state'], got['start'], got['ours'], got['held']) == (state, start, ours, held), rule
    if record is None or state in R.OUTSIDE:
        return
    assert got['slurm_state'] == record['State']


def test_decide_held_keeps_the_original_reason():
    got = R.decide('n1', DRIVER, None, REBOOTED_ADMIN[UB], {'include_held': True})
    assert got['original_reason'] == 'admin: bad fan, ticket 42'
    assert 'never resumed by us' in got['why']


# --- busy policy, resume, verify, stop -------------------------------------------------------------------------

@pytest.mark.parametrize('jobs, timed_out, policy, state', [
    ([], False, 'skip', 'drained'),
    ([], True, 'fail', 'drained'),
    (['7'], False, 'skip', 'draining'),
    (['7'], True, 'skip', 'busy'),
    (['7'], True, 'wait', 'draining'),
    (['7'], True, 'fail', 'failed'),
])
def test_after_wait(jobs, timed_out, policy, state):
    assert R.after_wait({}, jobs, timed_out, policy) == state


def test_after_wait_refuses_a_policy():
    with pytest.raises(R.RollingError, match=r"nodeprep_rolling_busy: 'later' is not one of skip, wait, fail"):
        R.after_wait({}, ['1'], True, 'later')


@pytest.mark.parametrize('record, may, back', [
    (DRAINED[EL], True, False),                         # ours
    (REBOOTED_ADMIN[EL], True, False),                  # ours, DOWN after our reboot: RESUME brings it back
    (REBOOTED_ADMIN[UB], False, False),                 # the admin's: never
    # A pending reboot: RESUME would cancel it; such a node does not count as usable either.
    (REBOOT_REQ[EL], False, False),
    (with_reason(dict(REBOOT_REQ[EL]), 'nodeprep:r0:work'), False, False),
    (IDLE[EL], False, True),                            # nothing of ours to undo
    (MIXED[UB], False, True),
])
def test_may_resume_and_back_in_service(record, may, back):
    assert R.may_resume(record) is may
    assert R.back_in_service(record) is back


def test_failed_checks_and_stop():
    checks = [{'id': 'gpu.count', 'status': 'fail'}, {'id': 'driver.loaded', 'status': 'pass'},
              {'id': 'shm.size', 'status': 'warn'}, {'id': 'nic.mtu', 'status': 'fail'}]
    assert R.failed_checks(checks) == ['gpu.count', 'nic.mtu']
    assert R.stop_run(1, 1) is False      # max_failed 1: one failure is allowed
    assert R.stop_run(2, 1) is True
    assert R.stop_run(1, 0) is True


# --- batches and preflight -------------------------------------------------------------------------------------

@pytest.mark.parametrize('batch, count, size', [
    (1, 5, 1), ('2', 5, 2), ('50%', 5, 2), ('10%', 5, 1), ('100%', 3, 3), ('34%', 3, 1), (10, 3, 10),
])
def test_batch_size_as_ansible_serial(batch, count, size):
    assert R.batch_size(batch, count) == size


@pytest.mark.parametrize('batch', [0, '0', '-1', '0%', '101%', 'half', True, '1.5'])
def test_batch_size_refused(batch):
    with pytest.raises(R.RollingError, match='nodeprep_rolling_batch'):
        R.batch_size(batch, 4)


def test_batches():
    assert R.batches(['a', 'b', 'c'], 2) == [['a', 'b'], ['c']]
    assert R.batches(['a', 'b', 'c'], '100%') == [['a', 'b', 'c']]
    assert R.batches([], 1) == []


CONFIG = R.parse_config(read('show-config.txt'))
PARTS = R.parse_partitions(read('show-partition.txt'))


def by_slurm(*names, **kw):
    """Decisions of nodes worked on and rebooted by Slurm (nodeprep_rolling_reboot: slurm)."""
    return [dict({'node': n, 'start': 'drain', 'reboot': 'slurm', 'held': False, 'reboot_needed': True,
                  'down': False}, **kw) for n in names]


def test_preflight_passes_on_the_fleet():
    assert R.preflight(CONFIG, PARTS, IDLE, [[EL], [UB]], 600, 1, by_slurm(EL, UB)) == []


def test_preflight_resume_timeout_shorter_than_reboot():
    problems = R.preflight(CONFIG, PARTS, IDLE, [[EL]], 1800, 0, by_slurm(EL))
    assert problems == ['ResumeTimeout=600 s (slurm.conf) is shorter than the reboot timeout 1800 s '
                        '(nodeprep_kernel_reboot_timeout, nodeprep_nvidia_driver_reboot_timeout): a node still '
                        'rebooting would be marked DOWN; raise ResumeTimeout or lower the reboot timeouts']


def test_preflight_partition_resume_timeout():
    parts = {'gpu': dict(PARTS['gpu'], ResumeTimeout='300')}
    assert R.preflight(CONFIG, parts, IDLE, [[EL]], 600, 0, by_slurm(EL)) == [
        'partition gpu: ResumeTimeout=300 s is shorter than the reboot timeout 600 s']
    parts = {'gpu': dict(PARTS['gpu'], ResumeTimeout='GLOBAL')}
    assert R.preflight(CONFIG, parts, IDLE, [[EL]], 600, 0, by_slurm(EL)) == []


def test_preflight_min_available():
    # Both nodes in one batch leave none.
    assert R.preflight(CONFIG, PARTS, IDLE, [[EL, UB]], 600, 1) == [
        'batch 1 (el9-b200-01, ubuntu2404-h200-01) would leave partition gpu with 0 usable node(s) (none); '
        'nodeprep_rolling_min_available is 1']
    # An admin-drained node is not usable: draining the other leaves none.
    assert R.preflight(CONFIG, PARTS, REBOOTED_ADMIN, [[EL]], 600, 1) == [
        'batch 1 (el9-b200-01) would leave partition gpu with 0 usable node(s) (none); '
        'nodeprep_rolling_min_available is 1']
    assert R.preflight(CONFIG, PARTS, IDLE, [[EL, UB]], 600, 0) == []


def test_preflight_no_resume_timeout():
    assert R.preflight({'RebootProgram': '/usr/sbin/reboot'}, PARTS, IDLE, [[EL]], 600, 0, by_slurm(EL)) == [
        'scontrol show config gave no ResumeTimeout (got None)']


def test_table():
    decisions = [R.decide(EL, DRIVER, None, MIXED[EL], {}), R.decide(UB, plans(), None, None, {})]
    rows = R.table(decisions, {EL: 1}, {EL: ['1']})
    assert rows[0] == {'node': EL, 'state': 'candidate', 'changes': 'nvidia_driver (1)',
                       'slurm': 'MIXED', 'jobs': '1', 'batch': 1,
                       'why': 'disruptive work: drain, work, verify, resume'}
    assert rows[1]['state'] == 'on-target' and rows[1]['slurm'] == '-' and rows[1]['batch'] == '-'
    text = R.format_table(rows)
    assert text.splitlines()[0].split() == ['node', 'state', 'batch', 'slurm', 'jobs', 'changes']
    assert text.splitlines()[1].split()[:5] == [EL, 'candidate', '1', 'MIXED', '1']


def test_summary():
    assert R.summary(R.disruptive(plans(kernel=['a'], driver=['b', 'c'], reboot=True))) == \
        'kernel (1), nvidia_driver (2, reboot)'
    assert R.summary([]) == '-'


# --- the whole plan --------------------------------------------------------------------------------------------

OPTIONS = {'run_id': 'r1', 'batch': 1, 'busy': 'skip', 'min_available': 0, 'max_failed': 1, 'reboot_timeout': 600}
STATE = {'records': IDLE, 'config': CONFIG, 'partitions': PARTS, 'jobs': {EL: [], UB: []}}


def test_plan_run_on_target_asks_slurm_nothing():
    got = R.plan_run([{'node': EL, 'plans': plans(), 'marker': None},
                      {'node': UB, 'plans': plans(settings=['size']), 'marker': None}], None, OPTIONS)
    assert got['need_slurm'] == []
    assert [d['state'] for d in got['decisions']] == ['on-target', 'in-place']
    assert got['work'] == [] and got['batches'] == [] and got['problems'] == []


def test_plan_run_asks_slurm_then_batches():
    nodes = [{'node': EL, 'plans': DRIVER, 'marker': None}, {'node': UB, 'plans': DRIVER, 'marker': None}]
    first = R.plan_run(nodes, None, OPTIONS)
    assert first['need_slurm'] == [EL, UB] and first['decisions'] == []
    got = R.plan_run(nodes, STATE, OPTIONS)
    assert got['work'] == [EL, UB] and got['batches'] == [[EL], [UB]] and got['batch_of'] == {EL: 1, UB: 2}
    assert got['problems'] == []
    assert R.parse_marker(got['decisions'][0]['marker']) == \
        {'run_id': 'r1', 'phase': 'taken', 'held': False, 'original_reason': ''}


def test_plan_run_a_marker_alone_asks_slurm():
    got = R.plan_run([{'node': EL, 'plans': plans(), 'marker': 'r0 taken ours\n'}], None, OPTIONS)
    assert got['need_slurm'] == [EL]


def test_plan_run_skips_held_and_checks_min_available():
    state = dict(STATE, records=REBOOTED_ADMIN)
    nodes = [{'node': UB, 'plans': DRIVER, 'marker': None}]
    got = R.plan_run(nodes, state, OPTIONS)
    assert got['decisions'][0]['state'] == 'skipped-held' and got['work'] == []
    got = R.plan_run([{'node': EL, 'plans': DRIVER, 'marker': None}], STATE, dict(OPTIONS, min_available=2))
    assert got['problems'] == ['batch 1 (el9-b200-01) would leave partition gpu with 1 usable node(s) '
                               '(ubuntu2404-h200-01); nodeprep_rolling_min_available is 2']


@pytest.mark.parametrize('key, value, match', [
    ('busy', 'later', 'nodeprep_rolling_busy'),
    ('min_available', -1, 'nodeprep_rolling_min_available'),
    ('max_failed', True, 'nodeprep_rolling_max_failed'),
    ('run_id', 'a:b', 'nodeprep_rolling_run_id'),
])
def test_plan_run_refuses_options(key, value, match):
    with pytest.raises(R.RollingError, match=match):
        R.plan_run([], None, dict(OPTIONS, **{key: value}))


# --- nodeprep_rolling_reboot: slurm ------------------------------------------------------------------------------

@pytest.mark.parametrize('mode, held, how', [
    ('roles', False, 'roles'),
    ('roles', True, 'roles'),
    ('slurm', False, 'slurm'),
    # scontrol reboot nextstate=DOWN would clear a held node's DRAIN flag and append to its reason.
    ('slurm', True, 'roles'),
])
def test_reboot_how(mode, held, how):
    assert R.reboot_how(mode, held) == how


def test_reboot_how_refuses_a_mode():
    with pytest.raises(R.RollingError, match="nodeprep_rolling_reboot: 'ipmi' is not one of roles, slurm"):
        R.reboot_how('ipmi', False)


# The states and reasons slurmctld 22.05 gives a node through `scontrol reboot nextstate=DOWN reason=...`
# (proc_req.c _slurm_rpc_reboot_nodes: REBOOT_REQUESTED, our reason; controller.c: DOWN+REBOOT_ISSUED,
# " : reboot issued"; node_mgr.c validate_node_specs: DOWN, DRAIN cleared, " : reboot complete"; node_mgr.c
# "reboot timed out" after ResumeTimeout), on the real drained record of el9-b200-01.
@pytest.mark.parametrize('rule, record, required, step', [
    ('drained by us, the roles need a reboot: ask Slurm', DRAINED[EL], True, 'request'),
    ('drained by us, no reboot needed: nothing', DRAINED[EL], False, 'none'),
    ('in work, the roles need a reboot: ask Slurm', with_reason(DRAINED[EL], 'nodeprep:r1:work'), True, 'request'),
    ('asked, not issued yet (REBOOT_REQUESTED): wait, never ask twice',
     with_reason(DRAINED[EL], 'nodeprep:r1:reboot', 'IDLE+DRAIN+REBOOT_REQUESTED'), True, 'wait'),
    ('issued (DOWN+REBOOT_ISSUED): wait',
     with_reason(DRAINED[EL], 'nodeprep:r1:reboot : reboot issued', 'DOWN+REBOOT_ISSUED'), True, 'wait'),
    ('registered again, nextstate=DOWN: complete',
     with_reason(DRAINED[EL], 'nodeprep:r1:reboot : reboot issued : reboot complete', 'DOWN'), False, 'complete'),
    ('complete, the stale plan still asks: complete, not asked again',
     with_reason(DRAINED[EL], 'nodeprep:r1:reboot : reboot issued : reboot complete', 'DOWN'), True, 'complete'),
    ('not registered within ResumeTimeout: timed out',
     with_reason(DRAINED[EL], 'nodeprep:r1:reboot : reboot issued : reboot timed out', 'DOWN'), True, 'timed-out'),
    ('asked, the request gone (State=RESUME cancels it), still needed: ask again',
     with_reason(DRAINED[EL], 'nodeprep:r1:reboot'), True, 'request'),
    ('issued, flag gone without "complete": wait (bounded by the timeout)',
     with_reason(DRAINED[EL], 'nodeprep:r1:reboot : reboot issued', 'DOWN'), True, 'wait'),
    ('a reboot someone else asked (real capture): wait', REBOOT_REQ[EL], True, 'wait'),
])
def test_reboot_step(rule, record, required, step):
    assert R.reboot_step(record, required) == step, rule


def test_a_node_back_from_our_slurm_reboot_may_be_resumed():
    record = with_reason(DRAINED[EL], 'nodeprep:r1:verify', 'DOWN')
    assert R.may_resume(record) and not R.back_in_service(record)
    pending = with_reason(DRAINED[EL], 'nodeprep:r1:reboot : reboot issued', 'DOWN+REBOOT_ISSUED')
    assert not R.may_resume(pending)


def test_plan_run_reboot_mode():
    nodes = [{'node': EL, 'plans': DRIVER, 'marker': None}, {'node': UB, 'plans': DRIVER, 'marker': None}]
    state = dict(STATE, records={EL: IDLE[EL], UB: REBOOTED_ADMIN[UB]})
    got = R.plan_run(nodes, state, dict(OPTIONS, reboot='slurm', include_held=True))
    assert [(d['node'], d['held'], d['reboot']) for d in got['decisions']] == [(EL, False, 'slurm'), (UB, True, 'roles')]
    got = R.plan_run(nodes, state, OPTIONS)
    assert [(d['node'], d['state'], d['reboot']) for d in got['decisions']] == \
        [(EL, 'candidate', 'roles'), (UB, 'skipped-held', None)]
    with pytest.raises(R.RollingError, match='nodeprep_rolling_reboot'):
        R.plan_run(nodes, state, dict(OPTIONS, reboot='now'))


# --- Slurm 22.05 and 24.11 on the same states (slurm/<version>/states/SOURCES.md: tests/testbed/slurm_captures.py) ---

VERSIONS = ('22.05', '24.11')


def states(version, name):
    with open(os.path.join(os.path.dirname(SLURM), version, 'states', name)) as handle:
        return handle.read()


def state_nodes(version, name):
    return R.parse_nodes(states(version, name))


def one(version, name, node=None):
    got = state_nodes(version, name)
    return got[node] if node else list(got.values())[0]


def test_captures_are_the_versions_they_claim():
    for version in VERSIONS:
        assert states(version, 'version.txt').strip() == 'slurm-wlm ' + {'22.05': '22.05.8', '24.11': '24.11.5'}[version]
        assert R.slurm_version(R.parse_config(states(version, 'show-config.txt'))) == \
            tuple(int(x) for x in version.split('.'))


# (capture, State, ours (phase, notes) or None, usable, held, drained) per version: what each Slurm does with our
# reason and the node through the same steps.
STATE_TABLE = [
    # Ours, drained.
    ('show-node-drained-ours.txt', {'22.05': ('IDLE+DRAIN', ('drain', [])), '24.11': ('IDLE+DRAIN', ('drain', []))},
     False, False, True),
    # Rebooted by the node itself within SlurmdTimeout: 22.05 sets it DOWN ("unexpectedly rebooted", our reason kept);
    # from 23.11 a drained node stays IDLE+DRAIN (commit 1d33c33679).
    ('show-node-ours-quick-reboot.txt', {'22.05': ('DOWN+DRAIN', ('work', [])), '24.11': ('IDLE+DRAIN', ('work', []))},
     False, False, True),
    # Off for 45 s with SlurmdTimeout=10: DOWN; from 23.02 slurmctld appends "Not responding" to our reason
    # (commit a8c56beb56), 22.05 leaves it as it is. Both stay ours.
    ('show-node-ours-slow-reboot.txt', {'22.05': ('DOWN+DRAIN', ('work', [])),
                                        '24.11': ('DOWN+DRAIN', ('work', ['Not responding']))}, False, False, True),
    # Our scontrol reboot nextstate=DOWN: the reboot notes, on both.
    ('show-node-reboot-issued.txt', {'22.05': ('DOWN+DRAIN+REBOOT_ISSUED', ('reboot', ['reboot issued'])),
                                     '24.11': ('DOWN+DRAIN+REBOOT_ISSUED', ('reboot', ['reboot issued']))},
     False, False, True),
    ('show-node-reboot-complete.txt', {'22.05': ('DOWN', ('reboot', ['reboot issued', 'reboot complete'])),
                                       '24.11': ('DOWN', ('reboot', ['reboot issued', 'reboot complete']))},
     False, False, False),
    ('show-node-reboot-timed-out.txt', {'22.05': ('DOWN', ('reboot', ['reboot issued', 'reboot timed out'])),
                                        '24.11': ('DOWN', ('reboot', ['reboot issued', 'reboot timed out']))},
     False, False, False),
]


@pytest.mark.parametrize('version', VERSIONS)
@pytest.mark.parametrize('capture, expected, usable, held, drained', STATE_TABLE)
def test_our_reason_through_reboots_on_both_versions(version, capture, expected, usable, held, drained):
    record = one(version, capture, EL)
    state, (phase, notes) = expected[version]
    status = R.node_status(record)
    assert record['State'] == state
    assert status['ours'] is not None, record.get('Reason')
    assert (status['ours']['phase'], status['ours']['notes']) == (phase, notes)
    assert (status['usable'], status['held'], status['drained']) == (usable, held, drained)
    # Ours on every version: the run picks it up and may resume it once no reboot is pending.
    assert R.may_resume(record) is (not status['reboot_pending'])


@pytest.mark.parametrize('version', VERSIONS)
def test_a_slow_reboot_by_the_roles_is_resumed_by_the_run(version):
    """The issue's lost node: rebooted by the roles for longer than SlurmdTimeout, it must stay ours."""
    record = one(version, 'show-node-ours-slow-reboot.txt', EL)
    d = R.decide(EL, DRIVER, OURS_MARK, record, {})
    assert (d['state'], d['start'], d['ours'], d['held']) == ('work', 'work', True, False)
    assert R.may_resume(record) and not R.back_in_service(record)
    assert R.node_empty(record, [])


@pytest.mark.parametrize('version, reason', [
    ('22.05', None),
    # 24.11 without accounting storage keeps the reason after RESUME (accounting_storage.c, commit 332d015ef3).
    ('24.11', 'nodeprep:cap1:work : Not responding'),
])
def test_our_stale_reason_on_a_resumed_node_is_not_a_hold(version, reason):
    record = one(version, 'show-node-resumed-ours.txt', EL)
    assert record['State'] == 'IDLE'
    assert R.strip_reason(record.get('Reason')) == (reason or '')
    status = R.node_status(record)
    assert status['ours'] is None and status['usable'] and not status['held']
    assert status['stale_reason'] == (reason or '')
    # Never picked up as a phase of a run (a node back in service may run a job): a candidate, drained first.
    d = R.decide(EL, DRIVER, None, record, {})
    assert (d['state'], d['start']) == ('candidate', 'drain')
    assert not R.may_resume(record) and R.back_in_service(record)


@pytest.mark.parametrize('version, reason', [
    ('22.05', 'admin: bad fan'),
    # From 23.02 Slurm appends its note to the admin's reason too: still theirs.
    ('24.11', 'admin: bad fan : Not responding'),
])
def test_an_admin_drain_rebooted_slowly_stays_theirs(version, reason):
    record = one(version, 'show-node-admin-slow-reboot.txt', UB)
    status = R.node_status(record)
    assert record['State'] == 'DOWN+DRAIN' and status['reason'] == reason
    assert status['ours'] is None and status['held']
    assert R.decide(UB, DRIVER, None, record, {})['state'] == 'skipped-held'
    assert not R.may_resume(record)


@pytest.mark.parametrize('version', VERSIONS)
def test_an_unexpected_reboot_is_slurms_note_not_ours(version):
    record = one(version, 'show-node-unexpected-reboot.txt', UB)
    assert record['State'] == 'DOWN'
    assert R.strip_reason(record['Reason']) == 'Node unexpectedly rebooted'
    assert R.parse_reason(record['Reason']) is None
    assert R.node_status(record)['held']


@pytest.mark.parametrize('version', VERSIONS)
def test_a_reason_holding_key_value_text_stays_one_reason(version):
    record = one(version, 'show-node-admin-key-value.txt', UB)
    assert R.strip_reason(record['Reason']) == 'admin: ticket=42 disk=bad'
    assert 'ticket' not in record and 'disk' not in record
    assert R.node_status(record)['held']


# Nodes in power saving or a reservation are not usable (min_available) and are someone else's (skipped).
@pytest.mark.parametrize('version', VERSIONS)
@pytest.mark.parametrize('capture, flags', [
    # Asked to power down: POWER_DOWN (24.11, at once) or POWERING_DOWN (22.05, and 24.11 a moment later).
    ('show-node-powering-down.txt', ('POWER_DOWN', 'POWERING_DOWN')),
    ('show-node-powered-down.txt', ('POWERED_DOWN',)),
    ('show-node-reserved.txt', ('RESERVED',)),
    ('show-node-maint.txt', ('MAINTENANCE',)),
])
def test_power_saving_and_reserved_nodes_are_not_usable(version, capture, flags):
    record = one(version, capture, UB)
    status = R.node_status(record)
    assert set(flags).intersection(status['flags']), record['State']
    assert status['base'] == 'IDLE' and not status['usable'] and status['held']
    assert R.decide(UB, DRIVER, None, record, {})['state'] == 'skipped-held'


@pytest.mark.parametrize('version', VERSIONS)
def test_reboot_asap_someone_asked_is_held(version):
    record = one(version, 'show-node-reboot-asap.txt', UB)
    status = R.node_status(record)
    assert status['flags'] == ['DRAIN', 'REBOOT_REQUESTED'] and status['reason'] == 'Reboot ASAP'
    assert status['held'] and status['reboot_pending'] and not R.may_resume(record)


# --- held nodes without DRAIN: empty when no job runs ------------------------------------------------------------

@pytest.mark.parametrize('rule, record, jobs, empty', [
    ('ours, drained, no job', DRAINED[EL], [], True),
    ('ours, draining (jobs)', DRAINING[EL], ['1'], False),
    ('ours, DOWN after our Slurm reboot (DRAIN cleared), no job',
     with_reason(DRAINED[EL], 'nodeprep:r1:reboot : reboot issued : reboot complete', 'DOWN'), [], True),
    ('held, an admin drain, no job', REBOOTED_ADMIN[UB], [], True),
    ('held, DOWN without DRAIN, no job', with_reason(IDLE[EL], 'Node unexpectedly rebooted', 'DOWN'), [], True),
    ('held, FAIL without DRAIN, no job', with_reason(IDLE[EL], 'admin: psu', 'IDLE+FAIL'), [], True),
    ('held, MAINTENANCE without DRAIN (real 22.05 capture), no job', one('22.05', 'show-node-maint.txt', UB), [],
     True),
    ('held, MAINTENANCE, a job of the reservation runs', one('22.05', 'show-node-maint.txt', UB), ['9'], False),
    ('held, a job completing', with_reason(IDLE[EL], 'admin: x', 'DOWN+COMPLETING'), [], False),
])
def test_node_empty(rule, record, jobs, empty):
    assert R.node_empty(record, jobs) is empty, rule


# --- min_available before every batch's drain --------------------------------------------------------------------

def test_drain_allowed_counts_a_node_that_failed_verification():
    # Three nodes: batch 1 (a) failed verification and stays drained; draining b must leave c, and min 2 refuses.
    base = IDLE[EL]
    records = {'a': dict(base, NodeName='a', State='IDLE+DRAIN', Reason='nodeprep:r1:verify-failed:gpu.health [root@x]'),
               'b': dict(base, NodeName='b'), 'c': dict(base, NodeName='c')}
    assert R.drain_allowed(records, ['b'], 1) == []
    assert R.drain_allowed(records, ['b'], 2) == [
        'batch (b) would leave partition gpu with 1 usable node(s) (c); nodeprep_rolling_min_available is 2']
    # The same batch before a failed: a counted as usable then.
    fresh = dict(records, a=dict(base, NodeName='a'))
    assert R.drain_allowed(fresh, ['b'], 2) == []


# --- the reason's text -------------------------------------------------------------------------------------------

@pytest.mark.parametrize('reason, expected', [
    ('nodeprep:r1:work : Not responding [slurm@2026-12-05T23:57:44]',
     {'run_id': 'r1', 'phase': 'work', 'checks': [], 'notes': ['Not responding']}),
    ('nodeprep:r1:work : Node unexpectedly rebooted', {'run_id': 'r1', 'phase': 'work', 'checks': [],
                                                       'notes': ['Node unexpectedly rebooted']}),
    ('nodeprep:r1:reboot : reboot issued : Not responding : reboot complete',
     {'run_id': 'r1', 'phase': 'reboot', 'checks': [], 'notes': ['reboot issued', 'Not responding', 'reboot complete']}),
    ('nodeprep:r1:verify-failed:gpu.health : ResumeTimeout reached',
     {'run_id': 'r1', 'phase': 'verify-failed', 'checks': ['gpu.health'], 'notes': ['ResumeTimeout reached']}),
    ('nodeprep:r1:work : Kill task failed', None),      # a note of another kind: not ours to undo
    ('nodeprep:r1:work : admin: keep it', None),
    # Time stamps in other SLURM_TIME_FORMAT formats are stripped too.
    ('nodeprep:r1:drain [root@Dec 05 23:57]', {'run_id': 'r1', 'phase': 'drain', 'checks': [], 'notes': []}),
    ('nodeprep:r1:drain [root@Ystday 23:57]', {'run_id': 'r1', 'phase': 'drain', 'checks': [], 'notes': []}),
    ('nodeprep:r1:drain [root@12/05-23:57:04]', {'run_id': 'r1', 'phase': 'drain', 'checks': [], 'notes': []}),
])
def test_parse_reason_notes_and_time_formats(reason, expected):
    assert R.parse_reason(reason) == expected


def test_run_id_with_a_trailing_newline_is_refused():
    with pytest.raises(R.RollingError, match=r"nodeprep_rolling_run_id: 'r1\\n' is not allowed"):
        R.check_run_id('r1\n')
    assert R.parse_reason('nodeprep:r1\n:drain') is None


@pytest.mark.parametrize('batch', ['\u00b2', '\u0663%', '\uff12', '1\u00b2'])
def test_batch_with_non_ascii_digits_is_a_clear_error(batch):
    with pytest.raises(R.RollingError, match='nodeprep_rolling_batch: .* is not allowed'):
        R.batch_size(batch, 10)


# --- hostlists and one poll per batch ----------------------------------------------------------------------------

@pytest.mark.parametrize('version', VERSIONS)
def test_expand_hostlist_as_scontrol_does(version):
    compressed = states(version, 'show-hostlist.txt').strip()
    assert compressed == 'gpu[001-003,007],rack1-n[01-02],rack2-n01'
    assert R.expand_hostlist(compressed) == ['gpu001', 'gpu002', 'gpu003', 'gpu007', 'rack1-n01', 'rack1-n02',
                                             'rack2-n01']
    assert R.expand_hostlist('gpu[001-003,007],rack[1-2]-n[01-02],b200x') == \
        states(version, 'show-hostnames.txt').split()


@pytest.mark.parametrize('text', ['gpu[1-', 'gpu[3-1]', 'gpu[a-b]'])
def test_expand_hostlist_refuses(text):
    with pytest.raises(R.RollingError, match='hostlist'):
        R.expand_hostlist(text)


@pytest.mark.parametrize('version', VERSIONS)
def test_one_squeue_over_the_hostlist_gives_each_node_its_jobs(version):
    jobs = R.parse_jobs(states(version, 'squeue-w-hostlist.txt'))
    assert [(j['id'], j['nodes']) for j in jobs] == [('2', [EL]), ('3', [EL, UB])]
    assert R.jobs_by_node(jobs, [EL, UB, 'x']) == {EL: ['2', '3'], UB: ['3'], 'x': []}
    records = state_nodes(version, 'show-node-hostlist-busy.txt')
    assert sorted(records) == [EL, UB]


def test_poll_commands_are_two_whatever_the_batch():
    names = ['gpu{0:04d}'.format(i) for i in range(500)]
    polls = R.poll_commands(names)
    assert [p[:2] for p in polls] == [['scontrol', 'show'], ['squeue', '-h']]
    assert polls[0] == ['scontrol', 'show', 'node', '-o', ','.join(names)]
    assert polls[1] == ['squeue', '-h', '-w', ','.join(names), '-o', '%i|%T|%u|%N']
    assert R.poll_commands([]) == []


def test_plan_of_1250_nodes_at_10_percent():
    names = ['gpu{0:04d}'.format(i) for i in range(1250)]
    base = IDLE[EL]
    records = dict((n, dict(base, NodeName=n)) for n in names)
    state = {'records': records, 'config': CONFIG, 'partitions': PARTS, 'jobs': dict((n, []) for n in names)}
    nodes = [{'node': n, 'plans': DRIVER, 'marker': None} for n in names]
    started = time.process_time()
    got = R.plan_run(nodes, state, dict(OPTIONS, batch='10%', min_available=100))
    spent = time.process_time() - started
    assert got['problems'] == [] and got['batch_size'] == 125
    assert [len(b) for b in got['batches']] == [125] * 10
    # One poll of a batch is 2 Slurm calls, each naming the whole batch in one hostlist argument.
    assert [len(p) for p in got['polls']] == [2] * 10
    for batch, (scontrol, squeue) in zip(got['batches'], got['polls']):
        assert scontrol == ['scontrol', 'show', 'node', '-o', ','.join(batch)]
        assert squeue == ['squeue', '-h', '-w', ','.join(batch), '-o', R.SQUEUE_FORMAT]
    assert spent < 1.0, 'planning 1,250 nodes took {0:.2f} s of CPU'.format(spent)


# --- preflight per version: SlurmdTimeout and RebootProgram --------------------------------------------------------

def held_roles(name, **kw):
    return dict({'node': name, 'start': 'wait', 'reboot': 'roles', 'held': True, 'reboot_needed': True,
                 'down': False, 'slurm_state': 'IDLE+DRAIN'}, **kw)


@pytest.mark.parametrize('version, decisions, slurmd_timeout, refused', [
    # Our own nodes rebooted by the roles: resumed by the run on every version, whatever SlurmdTimeout.
    ('22.05', [dict(held_roles(EL), held=False, start='drain')], '300 sec', False),
    ('24.11', [dict(held_roles(EL), held=False, start='drain')], '60 sec', False),
    # A held node the roles reboot for longer than SlurmdTimeout: from 23.02 Slurm appends to its owner's reason
    # and leaves it DOWN: refused there; 22.05 sets it DOWN whatever the time (unexpected reboot): nothing to win.
    ('24.11', [held_roles(UB)], '300 sec', True),
    ('22.05', [held_roles(UB)], '300 sec', False),
    ('24.11', [held_roles(UB)], '0 sec', False),            # SlurmdTimeout=0: never marked not responding
    ('24.11', [held_roles(UB, down=True)], '300 sec', False),        # already DOWN: nothing changes
    ('24.11', [held_roles(UB, reboot_needed=False)], '300 sec', False),
])
def test_preflight_slurmd_timeout_only_where_it_loses_the_node(version, decisions, slurmd_timeout, refused):
    config = dict(R.parse_config(states(version, 'show-config.txt')), SlurmdTimeout=slurmd_timeout)
    problems = R.preflight(config, PARTS, IDLE, [], 1800, 0, decisions)
    assert bool(problems) is refused, problems
    if refused:
        assert problems == [
            'held node(s) ubuntu2404-h200-01 (State=IDLE+DRAIN) would be rebooted by the roles for up to 1800 s '
            '(nodeprep_kernel_reboot_timeout, nodeprep_nvidia_driver_reboot_timeout), longer than SlurmdTimeout=300 '
            's: Slurm 24.11.5 would set them DOWN and append "Not responding" to their owner\'s reason, and this run '
            'never resumes a node it does not hold; lower the reboot timeouts to 300 s or less, raise SlurmdTimeout, '
            'or leave nodeprep_rolling_include_held off']


@pytest.mark.parametrize('program', ['(null)', '', None])
def test_preflight_slurm_reboots_need_a_reboot_program(program):
    config = dict(R.parse_config(states('24.11', 'show-config.txt')), RebootProgram=program)
    if program is None:
        del config['RebootProgram']
    problems = R.preflight(config, PARTS, IDLE, [[EL]], 600, 0, by_slurm(EL))
    assert problems == ['nodeprep_rolling_reboot is slurm but slurm.conf sets no RebootProgram (scontrol show config: '
                        'RebootProgram={0}); scontrol reboot would never reboot el9-b200-01; set RebootProgram or use '
                        'nodeprep_rolling_reboot=roles'.format(program or '(none)')]
    # The roles reboot: RebootProgram and ResumeTimeout do not matter.
    assert R.preflight(config, PARTS, IDLE, [[EL]], 1800, 0, [dict(by_slurm(EL)[0], reboot='roles')]) == []


# --- the lock, AWX slicing, the settings --------------------------------------------------------------------------

def test_lock_round_trip_and_path():
    text = R.format_lock('r1', 'ctl.example', 4242, 1765000000)
    assert text == 'r1@ctl.example.4242:1765000000'
    assert R.parse_lock(text) == {'run_id': 'r1', 'controller': 'ctl.example', 'pid': 4242, 'since': 1765000000}
    assert R.parse_lock('') is None and R.parse_lock('garbage') is None
    assert R.lock_path('npsb') == '/var/lib/nodeprep/rolling-npsb.lock'
    assert R.lock_path('a/b c') == '/var/lib/nodeprep/rolling-a_b_c.lock'


@pytest.mark.parametrize('held, alive, decision', [
    (None, None, 'take'),
    ({'run_id': 'r1', 'controller': 'c1', 'pid': 1, 'since': 0}, True, 'ours'),     # a rerun of the same run id
    ({'run_id': 'r0', 'controller': 'c1', 'pid': 1, 'since': 0}, False, 'stale'),   # this controller, process gone
    ({'run_id': 'r0', 'controller': 'c1', 'pid': 1, 'since': 0}, True, 'refuse'),   # a second run, alive
    ({'run_id': 'r0', 'controller': 'c2', 'pid': 1, 'since': 0}, None, 'refuse'),   # another controller: unknown
])
def test_lock_decision(held, alive, decision):
    assert R.lock_decision(held, 'r1', 'c1', alive) == decision


@pytest.mark.parametrize('variables, sliced', [
    ({}, False),
    # A job of a workflow template (awx_meta_vars: the workflow's own name).
    ({'awx_workflow_job_id': 7, 'awx_workflow_job_name': 'maintenance', 'awx_job_template_name': 'rolling'}, False),
    # A slice: the workflow job AWX made from the job template carries the template's name.
    ({'awx_workflow_job_id': 7, 'awx_workflow_job_name': 'rolling', 'awx_job_template_name': 'rolling'}, True),
    ({'tower_workflow_job_id': 7, 'tower_workflow_job_name': 'rolling', 'tower_job_template_name': 'rolling'}, True),
    ({'awx_job_template_name': 'rolling'}, False),
])
def test_sliced_job(variables, sliced):
    got = R.sliced_job(variables)
    assert bool(got) is sliced
    if sliced:
        assert 'run the rolling job unsliced' in got


def test_check_settings():
    good = dict((name, spec['default']) for name, spec in R.SETTINGS.items())
    assert R.check_settings(good) == []
    bad = dict(good, nodeprep_rolling_batch='\u00b2', nodeprep_rolling_drain_timeout=-1,
               nodeprep_rolling_poll_interval=0, nodeprep_rolling_run_id='r1\n')
    problems = R.check_settings(bad)
    assert problems[0] == 'nodeprep_rolling_drain_timeout=-1 is not allowed; give a whole number, 0 or more'
    assert problems[1] == 'nodeprep_rolling_poll_interval=0 is not allowed; give a whole number, 1 or more'
    assert problems[2].startswith("nodeprep_rolling_batch: '\u00b2' is not allowed")
    assert problems[3].startswith("nodeprep_rolling_run_id: 'r1\\n' is not allowed")


# --- readiness's verdict in Slurm (nodeprep_readiness_slurm=drain) ------------------------------------------------

def test_health_reason_round_trip():
    assert R.format_health_reason(['gpu.health', 'gpu.count', 'gpu.health']) == 'nodeprep:health:gpu.health,gpu.count'
    assert R.parse_health_reason('nodeprep:health:gpu.health,gpu.count [root@2026-12-06T00:13:48]') == \
        {'checks': ['gpu.health', 'gpu.count'], 'notes': []}
    # Slurm's notes after it (a node of ours that stopped answering) keep it ours, on 24.11 as on 22.05.
    assert R.parse_health_reason('nodeprep:health:gpu.health : Not responding') == \
        {'checks': ['gpu.health'], 'notes': ['Not responding']}
    for other in ('NHC: check_hw_eth failed', 'admin: bad fan', 'nodeprep:r1:drain', 'nodeprep:health:',
                  'nodeprep:health:a b', 'nodeprep:health:gpu.health : admin note'):
        assert R.parse_health_reason(other) is None, other
    # a rolling reason is never read as a health one, and the run id "health" is refused.
    assert R.parse_reason('nodeprep:health:gpu.health') is None
    with pytest.raises(R.RollingError, match="nodeprep_rolling_run_id: 'health' is not allowed"):
        R.check_run_id('health')
    with pytest.raises(R.RollingError, match='cannot go into a Slurm reason'):
        R.format_health_reason(['gpu health'])


def node_line(version, capture, node, state=None, reason=None):
    record = dict(one(version, capture, node))
    if state:
        record['State'] = state
    if reason is not None:
        record['Reason'] = reason + ' [root@2026-12-06T00:13:48]'
    return record


# (rule, record, failed, action): NHC's rule (mej/nhc helpers/node-mark-offline, node-mark-online) on our reason.
HEALTH_TABLE = [
    ('idle, fails: drained', lambda v: one(v, 'show-node-idle.txt', EL), ['gpu.health'], 'drain'),
    ('running a job, fails: drained (its job ends first)', lambda v: one(v, 'show-node-hostlist-busy.txt', EL),
     ['gpu.count'], 'drain'),
    ('idle, passes: nothing', lambda v: one(v, 'show-node-idle.txt', EL), [], 'none'),
    ('not judged (unreachable): nothing', lambda v: one(v, 'show-node-idle.txt', EL), None, 'none'),
    ("an admin's drain, fails: theirs, untouched", lambda v: one(v, 'show-node-admin-key-value.txt', UB),
     ['gpu.health'], 'skip'),
    ("an admin's drain, passes: never resumed", lambda v: one(v, 'show-node-admin-key-value.txt', UB), [], 'none'),
    ("NHC's drain, fails: another tool's, untouched",
     lambda v: node_line(v, 'show-node-drained-ours.txt', EL, reason='NHC: check_fs_mount: /scratch not mounted'),
     ['gpu.health'], 'skip'),
    ('drained by our verdict, same checks: kept',
     lambda v: node_line(v, 'show-node-drained-ours.txt', EL, reason='nodeprep:health:gpu.health'), ['gpu.health'],
     'keep'),
    ('drained by our verdict, other checks now: reason updated',
     lambda v: node_line(v, 'show-node-drained-ours.txt', EL, reason='nodeprep:health:gpu.health'),
     ['gpu.count'], 'update'),
    ('drained by our verdict, passes: resumed',
     lambda v: node_line(v, 'show-node-drained-ours.txt', EL, reason='nodeprep:health:gpu.health'), [], 'resume'),
    ('our verdict, DOWN after it stopped answering, passes: resumed',
     lambda v: node_line(v, 'show-node-ours-slow-reboot.txt', EL, reason='nodeprep:health:gpu.health : Not responding'),
     [], 'resume'),
    ('a rolling run holds it, fails: left to that run', lambda v: one(v, 'show-node-drained-ours.txt', EL),
     ['gpu.health'], 'skip'),
    ('a rolling run holds it, passes: not resumed by the verdict', lambda v: one(v, 'show-node-drained-ours.txt', EL),
     [], 'none'),
    ('reboot ASAP pending, fails: left to it', lambda v: one(v, 'show-node-reboot-asap.txt', UB), ['gpu.health'],
     'skip'),
    ('DOWN (unexpectedly rebooted), fails: Slurm\'s reason, untouched',
     lambda v: one(v, 'show-node-unexpected-reboot.txt', UB), ['gpu.health'], 'skip'),
    ('a maintenance reservation, fails: untouched', lambda v: one(v, 'show-node-maint.txt', UB), ['gpu.health'],
     'skip'),
    ('reserved (no reason), fails: drained', lambda v: one(v, 'show-node-reserved.txt', UB), ['gpu.health'], 'drain'),
    ('powered down, fails: untouched', lambda v: one(v, 'show-node-powered-down.txt', UB), ['gpu.health'], 'skip'),
]


@pytest.mark.parametrize('version', VERSIONS)
@pytest.mark.parametrize('rule, make, failed, action', HEALTH_TABLE)
def test_health_action(version, rule, make, failed, action):
    got = R.health_action(make(version), failed)
    assert got['action'] == action, (rule, got)
    if action in ('drain', 'update'):
        assert got['reason'] == R.format_health_reason(failed)


@pytest.mark.parametrize('version, action', [
    # 22.05 drops the reason on RESUME: a clean IDLE node.
    ('22.05', 'drain'),
    # 24.11 without accounting storage keeps our rolling reason on the resumed node: a stale one, still drained.
    ('24.11', 'drain'),
])
def test_health_action_on_a_resumed_node(version, action):
    record = one(version, 'show-node-resumed-ours.txt', EL)
    assert R.health_action(record, ['gpu.health'])['action'] == action
    stale_ours = dict(record, Reason='nodeprep:health:gpu.health [root@2026-12-06T00:13:48]')
    assert R.health_action(stale_ours, ['gpu.count'])['action'] == 'drain'
    assert R.health_action(stale_ours, [])['action'] == 'none'        # already back in service
    # An admin's reason left on a resumed 24.11 node still counts as theirs: the node is not drained by the verdict.
    theirs = dict(record, Reason='admin: bad fan [root@2026-12-06T00:13:48]')
    assert R.health_action(theirs, ['gpu.health'])['action'] == 'skip'
