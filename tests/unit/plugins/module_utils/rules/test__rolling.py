# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/rules/_rolling.py: the parsers on Slurm 22.05.8's real output (slurm/SOURCES.md) and the decision
tables of the rolling maintenance run."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rolling as R

SLURM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'slurm')
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
    assert jobs == [{'id': '3', 'state': 'PENDING', 'user': 'root'}, {'id': '1', 'state': 'RUNNING', 'user': 'root'},
                    {'id': '2', 'state': 'RUNNING', 'user': 'root'}]
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
    ('held node worked on earlier (marker held, work): work, still held', DRIVER,
     R.parse_marker('r0 work held admin: bad fan, ticket 42\n'), REBOOTED_ADMIN[UB], {}, 'work', 'work', False, True),
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


def test_preflight_passes_on_the_fleet():
    assert R.preflight(CONFIG, PARTS, IDLE, [[EL], [UB]], 600, 1) == []


def test_preflight_resume_timeout_shorter_than_reboot():
    problems = R.preflight(CONFIG, PARTS, IDLE, [[EL]], 1800, 0)
    assert problems == ['ResumeTimeout=600 s (slurm.conf) is shorter than the reboot timeout 1800 s '
                        '(nodeprep_kernel_reboot_timeout, nodeprep_nvidia_driver_reboot_timeout): a node still '
                        'rebooting would be marked DOWN; raise ResumeTimeout or lower the reboot timeouts']


def test_preflight_partition_resume_timeout():
    parts = {'gpu': dict(PARTS['gpu'], ResumeTimeout='300')}
    assert R.preflight(CONFIG, parts, IDLE, [[EL]], 600, 0) == [
        'partition gpu: ResumeTimeout=300 s is shorter than the reboot timeout 600 s']
    parts = {'gpu': dict(PARTS['gpu'], ResumeTimeout='GLOBAL')}
    assert R.preflight(CONFIG, parts, IDLE, [[EL]], 600, 0) == []


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
    assert R.preflight({}, PARTS, IDLE, [[EL]], 600, 0) == ['scontrol show config gave no ResumeTimeout (got None)']


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
