# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/action/node_plan.py: settings typed once, one gather only when the facts lack it, the plans."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import hashlib
import re
import subprocess
import types
from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.nodeprep.plugins.action import node_plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_summary
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ansible_bin, ansible_env


def fake_rules():
    module = types.ModuleType('_plan_fake')
    module.ROLE = 'fake'
    module.CHECKS = ('fake.check',)
    module.SETTINGS = {'nodeprep_fake_flag': {'type': 'bool', 'default': True, 'description': 'A flag.'}}
    module.gather = lambda settings: dict(_plan.new_gather(), subsets=['shm'], files=['/etc/fake.conf'])

    def plan(facts, settings, context):
        out = _plan.new_plan('fake')
        out['args']['seen'] = {'flag': settings['nodeprep_fake_flag'], 'check_mode': context['check_mode'],
                               'host': context['host'], 'shm': facts.get('shm')}
        _plan.want_path(out, facts, '/etc/fake.conf', content='x\n', mode='0644', check='fake.check')
        return out
    module.plan = plan
    return module


@pytest.fixture(autouse=True)
def fake(monkeypatch):
    monkeypatch.setitem(_plans.RULES, 'fake', fake_rules())


GATHERED = {'nodeprep_gathered': ['shm', 'files'], 'shm': {'path': '/dev/shm', 'size_bytes': 1},
            'nodeprep_files': {'/etc/fake.conf': {'exists': False, 'type': None, 'mode': None, 'uid': None,
                                                  'gid': None, 'size': None, 'sha1': None, 'target': None}}}


def run(args, variables, module_result=None, check_mode=False):
    task = MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = check_mode
    task.diff = False
    context = PlayContext()
    context.check_mode = check_mode
    action = node_plan.ActionModule(task, MagicMock(), context, loader=DataLoader(),
                                    templar=Templar(loader=DataLoader()), shared_loader_obj=None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, module_args))
        return module_result if module_result is not None else {'ansible_facts': dict(GATHERED)}
    action._execute_module = execute
    result = action.run(task_vars=dict(variables, inventory_hostname='gpu-a01'))
    return result, calls


def test_gathers_what_is_missing_once_and_plans_with_typed_settings():
    result, calls = run({'roles': ['gpufleet.nodeprep.fake']}, {'nodeprep_fake_flag': 'false'})
    assert calls == [('gpufleet.nodeprep.gpu_node_facts',
                      {'gather_subset': ['shm'], 'keep_gathered': [], 'fail_on_error': True,
                       'command_timeout': 60, 'files': ['/etc/fake.conf']})]
    plan = result['ansible_facts']['nodeprep_plans']['fake']
    assert plan['args']['seen'] == {'flag': False, 'check_mode': False, 'host': 'gpu-a01',
                                    'shm': {'path': '/dev/shm', 'size_bytes': 1}}
    assert plan['run'] == ['/etc/fake.conf: missing']
    # The plans live once, in the facts: the task result has no second copy of them.
    assert sorted(result) == ['ansible_facts', 'changed', 'gathered']
    assert result['gathered'] is True and result['changed'] is False
    assert result['ansible_facts']['shm'] == {'path': '/dev/shm', 'size_bytes': 1}


def test_no_gather_when_the_facts_hold_everything():
    result, calls = run({'roles': ['fake']}, {'ansible_facts': GATHERED})
    assert calls == []
    assert result['gathered'] is False
    assert 'shm' not in result['ansible_facts']


def test_gather_always_reads_everything_again():
    _result, calls = run({'roles': ['fake'], 'gather': 'always', 'gather_extra': {'units': ['x']},
                          'fail_on_error': False, 'nvidia_timeout': 5}, {'ansible_facts': GATHERED})
    # What the play gathered besides what is read again stays (here the file states of other paths).
    assert calls[0][1] == {'gather_subset': ['shm'], 'keep_gathered': ['files'], 'fail_on_error': False,
                           'files': ['/etc/fake.conf'], 'units': ['x'], 'nvidia_timeout': 5, 'command_timeout': 60}


def test_gather_never_reports_what_is_missing():
    result, calls = run({'roles': ['fake'], 'gather': 'never'}, {})
    assert calls == []
    assert result['ansible_facts']['nodeprep_plans']['fake']['missing'] == ['subsets: shm', 'files: /etc/fake.conf']


def test_a_failed_gather_is_the_result():
    result, _calls = run({'roles': ['fake']}, {}, module_result={'failed': True, 'msg': 'nvidia-smi hung'})
    assert result['failed'] is True and result['msg'] == 'nvidia-smi hung'


def test_plans_of_other_roles_are_kept():
    facts = dict(GATHERED, nodeprep_plans={'other': {'run': []}})
    result, _calls = run({'roles': ['fake']}, {'ansible_facts': facts})
    assert sorted(result['ansible_facts']['nodeprep_plans']) == ['fake', 'other']


def test_check_mode_reaches_the_plan():
    result, _calls = run({'roles': ['fake']}, {'ansible_facts': GATHERED}, check_mode=True)
    assert result['ansible_facts']['nodeprep_plans']['fake']['args']['seen']['check_mode'] is True


def test_an_unknown_role_is_refused():
    with pytest.raises(AnsibleActionFail, match='nope is not a role of gpufleet.nodeprep that plans in Python'):
        run({'roles': ['nope']}, {})


def test_an_unknown_gather_extra_key_is_refused():
    with pytest.raises(AnsibleActionFail, match='gather_extra: bogus not known'):
        run({'roles': ['fake'], 'gather_extra': {'bogus': 1}}, {})


def test_a_subset_read_again_is_read_with_every_user_and_its_old_error_goes():
    # limits were gathered, but another role's gather left them out of nodeprep_gathered: read again for every user
    # the roles ask for (root was there already), not only the missing ones; the old error of the subset is gone.
    facts = {'nodeprep_gathered': ['shm', 'files'], 'shm': {'path': '/dev/shm'},
             'limits': {'effective': {'root': {}}}, 'nodeprep_files': {'/etc/fake.conf': GATHERED['nodeprep_files'][
                 '/etc/fake.conf']}, 'nodeprep_errors': {'limits': 'old failure', 'nvidia': 'still failing'}}

    def gather(settings):
        return dict(_plan.new_gather(), subsets=['limits'], limits_users=['root', 'train'])
    _plans.RULES['fake'].gather = gather
    result, calls = run({'roles': ['fake']}, {'ansible_facts': facts},
                        module_result={'ansible_facts': {'nodeprep_gathered': ['shm', 'files', 'limits'],
                                                         'limits': {'effective': {'root': {}, 'train': {}}}}})
    assert calls == [('gpufleet.nodeprep.gpu_node_facts',
                      {'gather_subset': ['limits'], 'keep_gathered': ['shm', 'files'], 'fail_on_error': True,
                       'command_timeout': 60, 'limits_users': ['root', 'train']})]
    assert result['ansible_facts']['nodeprep_errors'] == {'nvidia': 'still failing'}


def test_plan_false_only_gathers():
    result, calls = run({'roles': ['fake'], 'gather': 'always', 'plan': False}, {})
    assert len(calls) == 1
    assert sorted(result) == ['ansible_facts', 'changed', 'gathered']
    assert 'nodeprep_plans' not in result['ansible_facts']
    assert result['ansible_facts']['shm'] == {'path': '/dev/shm', 'size_bytes': 1}


@pytest.mark.parametrize('subsets, topology, want', [
    (['nvidia', 'kernel'], True, True),
    (['nvidia'], False, None),
    (['kernel'], True, None),
])
def test_node_plan_asks_for_topology_only_with_nvidia(subsets, topology, want):
    # The gather runs nvidia-smi topo -m only when the readiness role asks for it and the nvidia subset is read.
    from ansible_collections.gpufleet.nodeprep.plugins.action.node_plan import gather_args
    args = gather_args({'subsets': subsets}, nvidia_topology=topology)
    assert args.get('nvidia_topology') is want


# fail_on_problems: a role's prologue stops the host on its plan's problems, errors and missing facts.

def test_fail_on_problems_fails_the_host_with_the_plans_words():
    result, _calls = run({'roles': ['fake'], 'fail_on_problems': True},
                         {'nodeprep_fake_flag': 'maybe', 'ansible_facts': GATHERED})
    assert result['failed'] is True
    assert result['msg'].startswith('fake on gpu-a01: invalid settings: nodeprep_fake_flag="maybe": ')
    assert 'Valid booleans include' in result['msg']
    # The plan is still returned, with the same problem.
    assert result['ansible_facts']['nodeprep_plans']['fake']['problems'][0].startswith('nodeprep_fake_flag="maybe"')


def test_fail_on_problems_names_the_facts_not_gathered():
    result, _calls = run({'roles': ['fake'], 'fail_on_problems': True, 'gather': 'never'}, {})
    assert result['failed'] is True
    assert result['msg'] == 'fake on gpu-a01: facts not gathered: subsets: shm; files: /etc/fake.conf'


def test_fail_on_problems_passes_a_plan_with_only_work():
    result, _calls = run({'roles': ['fake'], 'fail_on_problems': True}, {'ansible_facts': GATHERED})
    assert 'failed' not in result
    assert result['ansible_facts']['nodeprep_plans']['fake']['reasons'] == ['/etc/fake.conf: missing']


def test_without_fail_on_problems_a_problem_stays_in_the_plan():
    # site.yml's first play and the readiness role plan every role: one role's bad setting fails no node there.
    result, _calls = run({'roles': ['fake']}, {'nodeprep_fake_flag': 'maybe', 'ansible_facts': GATHERED})
    assert 'failed' not in result
    assert result['ansible_facts']['nodeprep_plans']['fake']['run'][0].startswith('invalid settings: ')


def test_what_the_run_did_reaches_the_plan_of_that_role():
    """The later stages of a role plan again with what the run did (``run``), checked by the role's run_state."""
    module = _plans.RULES['fake']

    def run_state(state):
        if (state or {}).get('stage') not in (None, 'start', 'installed'):
            raise ValueError('run.stage={0!r}: allowed start, installed'.format(state.get('stage')))
        return state
    module.run_state = run_state
    plain_plan = module.plan

    def plan(facts, settings, context):
        out = plain_plan(facts, settings, context)
        out['args']['run'] = context['run'].get('fake')
        return out
    module.plan = plan
    facts = dict(GATHERED, nodeprep_file_patterns=[])
    result, calls = run({'roles': ['fake'], 'run': {'gpufleet.nodeprep.fake': {'stage': 'installed'}}},
                        {'ansible_facts': facts})
    assert calls == []
    assert result['ansible_facts']['nodeprep_plans']['fake']['args']['run'] == {'stage': 'installed'}
    with pytest.raises(AnsibleActionFail) as exc:
        run({'roles': ['fake'], 'run': {'fake': {'stage': 'later'}}}, {'ansible_facts': facts})
    assert str(exc.value) == "run.fake: run.stage='later': allowed start, installed"
    with pytest.raises(AnsibleActionFail) as exc:
        run({'roles': ['fake'], 'run': {'shm': {}}}, {'ansible_facts': facts})
    assert str(exc.value) == ('run: shm is not a role whose plan reads what the run did; those that do: fake, kernel, '
                              'nvidia_driver')


# The limits subset: the node returns what it read; the action resolves it with the function limits_facts runs.

def limits_read(users):
    return {'debian': False, 'nr_open': '1048576\n', 'proc1_limits': None,
            'files': [{'path': '/etc/security/limits.d/90-nodeprep-memlock.conf', 'not_utf8': False, 'error': None,
                       'text': '*\t-\tmemlock\tunlimited\nroot\t-\tmemlock\tunlimited\n'},
                      {'path': '/etc/security/limits.d/99-site.conf', 'not_utf8': False, 'error': None,
                       'text': '* hard memlock 65536\n'}],
            'accounts': users,
            'systemd': {'files': [], 'manager': None, 'services': {}, 'reason': 'systemctl not found in PATH'},
            'slurm': None}


def test_the_limits_the_node_read_are_resolved_here():
    def gather(settings):
        return dict(_plan.new_gather(), subsets=['limits'], limits_users=['root', '*'])
    _plans.RULES['fake'].gather = gather
    read = limits_read({'root': {'uid': 0, 'gid': 0, 'groups': ['root'], 'gids': [0]},
                        '*': {'uid': None, 'gid': None, 'groups': [], 'gids': []}})
    result, calls = run({'roles': ['fake']}, {}, module_result={
        'ansible_facts': {'nodeprep_gathered': ['limits'], 'nodeprep_errors': {}, 'limits': {'read': read}}})
    limits = result['ansible_facts']['limits']
    assert 'read' not in limits
    assert limits['effective']['*']['memlock'] == {'soft': 65536, 'hard': 65536}
    assert limits['sources']['*']['memlock']['hard'] == '/etc/security/limits.d/99-site.conf:1'
    assert limits['effective']['root']['memlock'] == {'soft': 'unlimited', 'hard': 'unlimited'}
    assert limits['slurm'] is None


@pytest.mark.parametrize('fail_on_error', [True, False])
def test_a_user_the_node_does_not_know(fail_on_error):
    def gather(settings):
        return dict(_plan.new_gather(), subsets=['limits'], limits_users=['nosuch'])
    _plans.RULES['fake'].gather = gather
    result, _calls = run({'roles': ['fake'], 'fail_on_error': fail_on_error}, {}, module_result={
        'ansible_facts': {'nodeprep_gathered': ['limits'], 'nodeprep_errors': {},
                          'limits': {'read': limits_read({'nosuch': None})}}})
    message = ("limits facts: user 'nosuch' given in users does not exist on this host (pwd lookup failed); pass its "
               "groups in 'groups' to evaluate it anyway")
    if fail_on_error:
        assert (result['failed'], result['msg'], result['subset']) == (True, message, 'limits')
    else:
        assert result['ansible_facts']['nodeprep_errors'] == {'limits': message}
        assert 'limits' not in result['ansible_facts']


RIGHT_FILE = {'/etc/fake.conf': {'exists': True, 'type': 'file', 'mode': '0644', 'uid': 0, 'gid': 0, 'size': 2,
                                 'sha1': hashlib.sha1(b'x\n').hexdigest(), 'target': None}}


def test_keep_summary_keeps_everything_where_a_plan_has_work():
    # The file is missing: the fake role has work, so the host keeps the gathered facts and the whole plan.
    full, _calls = run({'roles': ['fake'], 'gather': 'always'}, {})
    kept, _calls = run({'roles': ['fake'], 'gather': 'always', 'keep': 'summary'}, {})
    assert kept['ansible_facts']['nodeprep_plans']['fake']['run'] == ['/etc/fake.conf: missing']
    assert kept == full


def test_keep_summary_on_a_host_without_work_keeps_what_site_reads():
    gathered = dict(GATHERED, nodeprep_files=RIGHT_FILE)
    full, _calls = run({'roles': ['fake'], 'gather': 'always'}, {}, module_result={'ansible_facts': gathered})
    plan = full['ansible_facts']['nodeprep_plans']['fake']
    assert plan['run'] == [] and 'files' in plan and 'shm' in full['ansible_facts']
    kept, _calls = run({'roles': ['fake'], 'gather': 'always', 'keep': 'summary'}, {},
                       module_result={'ansible_facts': gathered})
    # Only the plans' keys that site.yml's first play and the run summary read; no gathered namespace.
    assert kept['ansible_facts'] == {'nodeprep_plans': {'fake': dict(
        (key, plan[key]) for key in node_plan.SUMMARY_KEYS if key in plan)}}
    assert sorted(kept['ansible_facts']['nodeprep_plans']['fake']) == ['reasons', 'reboot', 'run']
    assert kept['gathered'] is True and kept['changed'] is False


def test_keep_must_be_one_of_its_choices():
    with pytest.raises(Exception, match='keep'):
        run({'roles': ['fake'], 'keep': 'some'}, {'ansible_facts': GATHERED})


def test_record_keeps_what_run_summary_record_keeps():
    before = {'other': {'changes': ['x'], 'reboot': [], 'reboot_allowed': False, 'gpu_skip': None}}
    result, _calls = run({'roles': ['fake'], 'gather': 'always', 'record': True},
                         {'ansible_facts': {'nodeprep_run_record': before}})
    plans = result['ansible_facts']['nodeprep_plans']
    assert result['ansible_facts']['nodeprep_run_record'] == _run_summary.record(plans, ['fake'], before)
    assert result['ansible_facts']['nodeprep_run_record']['fake']['changes'] == ['/etc/fake.conf: missing']
    assert result['ansible_facts']['nodeprep_run_record']['other'] == before['other']
    # Without record the fact is not touched.
    result, _calls = run({'roles': ['fake'], 'gather': 'always'}, {})
    assert 'nodeprep_run_record' not in result['ansible_facts']


def test_record_with_keep_summary_on_a_host_without_work():
    result, _calls = run({'roles': ['fake'], 'gather': 'always', 'record': True, 'keep': 'summary'}, {},
                         module_result={'ansible_facts': dict(GATHERED, nodeprep_files=RIGHT_FILE)})
    assert sorted(result['ansible_facts']) == ['nodeprep_plans', 'nodeprep_run_record']
    assert result['ansible_facts']['nodeprep_run_record'] == {
        'fake': {'changes': [], 'reboot': [], 'reboot_allowed': False, 'gpu_skip': None}}


# ------------------------------------------------------------------------------ the limits of the gather

def run_failing(args, error, ssh_timeout=10):
    """node_plan whose gather's connection fails with ``error``; the connection's timeout option is ssh_timeout."""
    task = MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = False
    connection = MagicMock()
    connection.get_option = lambda name: {'timeout': ssh_timeout}[name]
    action = node_plan.ActionModule(task, connection, PlayContext(), loader=DataLoader(),
                                    templar=Templar(loader=DataLoader()), shared_loader_obj=None)

    def execute(module_name, module_args, task_vars):
        raise error
    action._execute_module = execute
    return action.run(task_vars={'inventory_hostname': 'gpu-a01'})


BANNER = ('Failed to connect to the host via ssh: Connection timed out during banner exchange\r\n'
          'Connection to 10.238.0.13 port 22 timed out')


def test_a_connection_that_timed_out_names_the_ssh_connect_limit():
    with pytest.raises(AnsibleConnectionFailure) as caught:
        run_failing({'roles': ['fake']}, AnsibleConnectionFailure(BANNER))
    assert str(caught.value).endswith('(the SSH connect limit of 10 s passed: ansible_ssh_timeout)')


def test_on_unreachable_fail_fails_the_task_with_the_limit_for_the_rescue():
    result = run_failing({'roles': ['fake'], 'on_unreachable': 'fail'}, AnsibleConnectionFailure(BANNER))
    assert result['failed'] is True and result['nodeprep_unreachable'] is True
    assert result['limit'] == {'limit': 'ssh_connect', 'variable': 'ansible_ssh_timeout', 'seconds': 10,
                               'what': 'the SSH connection'}
    assert 'banner exchange' in result['msg']


def test_a_connection_refused_is_no_limit():
    refused = AnsibleConnectionFailure('ssh: connect to host 10.238.0.13 port 22: Connection refused')
    with pytest.raises(AnsibleConnectionFailure) as caught:
        run_failing({'roles': ['fake']}, refused)
    assert 'limit' not in str(caught.value)
    result = run_failing({'roles': ['fake'], 'on_unreachable': 'fail'}, refused)
    assert result['nodeprep_unreachable'] is True and result['limit'] is None


@pytest.mark.parametrize('given, passed', [('30', 30), (45, 45)])
def test_the_command_limit_is_typed_once_and_passed_to_the_gather(given, passed):
    _result, calls = run({'roles': ['fake']}, {'nodeprep_command_timeout': given})
    assert calls[0][1]['command_timeout'] == passed


@pytest.mark.parametrize('given, words', [
    ('abc', "nodeprep_command_timeout='abc': argument 'nodeprep_command_timeout' is of type str and we were unable "
            "to convert to int"),
    (0, 'nodeprep_command_timeout=0: must be at least 1 second')])
def test_a_command_limit_that_is_not_one_fails_naming_it(given, words):
    with pytest.raises(AnsibleActionFail) as caught:
        run({'roles': ['fake']}, {'nodeprep_command_timeout': given})
    assert str(caught.value).startswith(words)


# ------------------------------------------------------------------------------ site_groups: the plays of site.yml

def run_grouping(args, known_runs, add_group):
    """node_plan for role fake (a missing file: work) with site_groups, every other site role's plan already known
    (``known_runs``: role -> run); ``add_group`` stands for ansible-core 2.21's ActionBase.add_group (None: before
    2.21, where ActionBase has none)."""
    task = MagicMock()
    task.args = dict(args, site_groups=True)
    task.async_val = 0
    task.check_mode = False
    action = node_plan.ActionModule(task, MagicMock(), PlayContext(), loader=DataLoader(),
                                    templar=Templar(loader=DataLoader()), shared_loader_obj=None)
    action.add_group = add_group
    action._execute_module = lambda module_name, module_args, task_vars: {'ansible_facts': dict(GATHERED)}
    known = dict((role, {'run': list(known_runs.get(role, []))}) for role in _plans.SITE_ROLES)
    return action.run(task_vars={'inventory_hostname': 'gpu-a01', 'ansible_facts': {'nodeprep_plans': known}})


def test_site_groups_through_the_action_api_of_ansible_core_2_21(monkeypatch):
    shown = []
    monkeypatch.setattr(node_plan.display, 'display', lambda msg, **kwargs: shown.append(msg))
    monkeypatch.setattr(_plans, 'SITE_ROLES', _plans.SITE_ROLES + ('fake',))
    monkeypatch.setattr(_plans, 'SETTINGS_ROLES', _plans.SETTINGS_ROLES + ('fake',))
    added = []
    result = run_grouping({'roles': ['fake'], 'gather': 'always'}, {'memlock': ['users']},
                          lambda name, parent_group_names=None: added.append((name, parent_group_names)))
    assert added == [('nodeprep_memlock_work', ['all']), ('nodeprep_fake_work', ['all']),
                     ('nodeprep_settings_work', ['all'])]
    # Why, in the run's output without -v (as the group_by task's loop labels showed it).
    assert shown == ['[gpu-a01] memlock: users', '[gpu-a01] fake: /etc/fake.conf: missing',
                     '[gpu-a01] settings: memlock; fake']
    assert result['site_runs'] == {'memlock': ['users'], 'fake': ['/etc/fake.conf: missing'],
                                   'settings': ['memlock', 'fake']}
    assert 'add_group' not in result and 'parent_groups' not in result and result['changed'] is False


def test_site_groups_through_the_result_before_ansible_core_2_21(monkeypatch):
    monkeypatch.setattr(_plans, 'SITE_ROLES', _plans.SITE_ROLES + ('fake',))
    monkeypatch.setattr(_plans, 'SETTINGS_ROLES', _plans.SETTINGS_ROLES + ('fake',))
    result = run_grouping({'roles': ['fake'], 'gather': 'always'}, {'kernel': ['kernel-devel missing']}, None)
    # One group per result (the strategy adds it, as group_by's): under every group of the node's plays.
    assert result['add_group'] == 'nodeprep_site_kernel_driver__' + '__'.join(_plans.SETTINGS_ROLES) + '__settings'
    assert result['parent_groups'] == (['nodeprep_kernel_driver_work']
                                       + ['nodeprep_{0}_work'.format(r) for r in _plans.SETTINGS_ROLES]
                                       + ['nodeprep_settings_work'])


def test_site_groups_put_a_node_already_right_in_no_group(monkeypatch):
    shown = []
    monkeypatch.setattr(node_plan.display, 'display', lambda msg, **kwargs: shown.append(msg))
    monkeypatch.setattr(_plans, 'SITE_ROLES', _plans.SITE_ROLES + ('fake',))
    added = []
    task_facts = dict(GATHERED, nodeprep_files=RIGHT_FILE)
    task = MagicMock()
    task.args = {'roles': ['fake'], 'gather': 'always', 'site_groups': True, 'keep': 'summary'}
    task.async_val = 0
    task.check_mode = False
    action = node_plan.ActionModule(task, MagicMock(), PlayContext(), loader=DataLoader(),
                                    templar=Templar(loader=DataLoader()), shared_loader_obj=None)
    action.add_group = lambda name, parent_group_names=None: added.append(name)
    action._execute_module = lambda module_name, module_args, task_vars: {'ansible_facts': task_facts}
    known = dict((role, {'run': []}) for role in _plans.SITE_ROLES if role != 'fake')
    result = action.run(task_vars={'inventory_hostname': 'gpu-a01', 'ansible_facts': {'nodeprep_plans': known}})
    assert added == [] and result['site_runs'] == {} and shown == []
    assert 'add_group' not in result
    assert sorted(result['ansible_facts']['nodeprep_plans']['fake']) == ['reasons', 'reboot', 'run']


def test_site_groups_need_the_plans_of_every_role():
    with pytest.raises(AnsibleActionFail, match='site_groups: .*no plan of kernel, nvidia_driver'):
        run({'roles': ['fake'], 'gather': 'always', 'site_groups': True}, {})


GROUPING_ACTION = '''
from ansible.plugins.action import ActionBase
from ansible_collections.gpufleet.nodeprep.plugins.action.node_plan import display, runs_lines, site_group_result


class ActionModule(ActionBase):
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        runs = [(key, reasons) for key, reasons in self._task.args['runs']]
        result.update(site_group_result(runs, getattr(self, 'add_group', None)), changed=False)
        for line in runs_lines(task_vars['inventory_hostname'], runs):
            display.display(line)
        return result
'''

GROUPING_PLAY = '''
- hosts: all
  gather_facts: false
  tasks:
    - grouping:
        runs: "{{ runs }}"
      # ansible-core before 2.21 says changed where a result's add_group made a group (site.yml says the same).
      changed_when: false
- hosts: nodeprep_settings_work
  gather_facts: false
  tasks:
    - debug:
        msg: "IN {{ inventory_hostname }} {{ group_names | select('match', 'nodeprep_.*_work') | sort | join(',') }}"
'''


def test_site_groups_reach_the_plays_of_the_running_ansible_core(tmp_path):
    """With the running ansible-core (2.21: the action API; under make units-matrix 2.20: the result's add_group), a
    host is in the groups of its plays and only those; a host without work is in none."""
    (tmp_path / 'action_plugins').mkdir()
    (tmp_path / 'action_plugins' / 'grouping.py').write_text(GROUPING_ACTION)
    (tmp_path / 'play.yml').write_text(GROUPING_PLAY)
    (tmp_path / 'hosts.yml').write_text(
        'all:\n  vars:\n    ansible_connection: local\n    ansible_python_interpreter: "{{ ansible_playbook_python }}"\n'
        '  hosts:\n'
        '    a: {runs: [[kernel_driver, [x]], [memlock, [after]], [settings, [memlock]]]}\n'
        '    b: {runs: [[nccl, [y]], [settings, [nccl]]]}\n'
        '    c: {runs: []}\n')
    proc = subprocess.run([ansible_bin('ansible-playbook'), '-i', str(tmp_path / 'hosts.yml'),
                           str(tmp_path / 'play.yml')], capture_output=True, text=True, cwd=str(tmp_path),
                          env=ansible_env(), timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = sorted(line.strip().strip('"').split('IN ', 1)[1] for line in proc.stdout.splitlines() if '"IN ' in line)
    assert lines == ['a nodeprep_kernel_driver_work,nodeprep_memlock_work,nodeprep_settings_work',
                     'b nodeprep_nccl_work,nodeprep_settings_work']
    assert re.search(r'^a +: ok=2 +changed=0 ', proc.stdout, re.M), proc.stdout
    # The reasons reach the run's output (the worker's display) without -v; nothing for the host without work.
    assert '[a] kernel_driver: x' in proc.stdout and '[b] settings: nccl' in proc.stdout, proc.stdout
    assert not re.search(r'^\[c\] ', proc.stdout, re.M), proc.stdout
