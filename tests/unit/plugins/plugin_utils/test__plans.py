# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/plugin_utils/_plans.py: settings typed once, with Ansible's validator, before any plan."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import types

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness as r
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as F


def fake_rules():
    module = types.ModuleType('_plan_fake')
    module.ROLE = 'fake'
    module.CHECKS = ('fake.check',)
    module.SETTINGS = {
        'nodeprep_fake_flag': {'type': 'bool', 'default': True, 'description': 'A flag.'},
        'nodeprep_fake_users': {'type': 'list', 'elements': 'str', 'default': ['root'], 'description': 'Users.'},
        'nodeprep_fake_count': {'type': 'int', 'default': 3, 'description': 'A count.'},
        'nodeprep_fake_raw': {'type': 'raw', 'description': 'Anything.'},
    }
    module.gather = lambda settings: dict(_plan.new_gather(), subsets=['shm'])

    def plan(facts, settings, context):
        out = _plan.new_plan('fake')
        if not settings['nodeprep_fake_flag']:
            out['reasons'].append('flag is off')
        return out
    module.plan = plan
    return module


@pytest.fixture
def fake(monkeypatch):
    module = fake_rules()
    monkeypatch.setitem(_plans.RULES, 'fake', module)
    return module


def test_text_false_is_false_and_a_string_list_is_a_list(fake):
    settings, problems = _plans.typed_settings('fake', {'nodeprep_fake_flag': 'false',
                                                        'nodeprep_fake_users': 'root,alice'})
    assert problems == []
    assert settings == {'nodeprep_fake_flag': False, 'nodeprep_fake_users': ['root', 'alice'],
                        'nodeprep_fake_count': 3, 'nodeprep_fake_raw': None}


@pytest.mark.parametrize('value', ['no', 'off', '0', 0, False])
def test_every_spelling_of_false(fake, value):
    assert _plans.typed_settings('fake', {'nodeprep_fake_flag': value})[0]['nodeprep_fake_flag'] is False


def test_a_value_that_does_not_type_is_a_problem_naming_it_and_falls_back(fake):
    settings, problems = _plans.typed_settings('fake', {'nodeprep_fake_flag': 'maybe', 'nodeprep_fake_count': 'x',
                                                        'nodeprep_fake_users': ['bob']})
    assert settings['nodeprep_fake_flag'] is True
    assert settings['nodeprep_fake_count'] == 3
    assert settings['nodeprep_fake_users'] == ['bob']
    assert len(problems) == 2
    assert problems[0].startswith('nodeprep_fake_count="x": ')
    assert 'int' in problems[0] and '(role fake: docs/roles/fake.md)' in problems[0]
    assert problems[1].startswith('nodeprep_fake_flag="maybe": ')
    assert 'Valid booleans include' in problems[1]


def test_other_variables_are_not_read(fake):
    settings, problems = _plans.typed_settings('fake', {'nodeprep_other': 'x', 'nodeprep_fake_count': 5})
    assert problems == [] and 'nodeprep_other' not in settings and settings['nodeprep_fake_count'] == 5


def test_plan_role_with_problems_plans_nothing(fake):
    settings, problems = _plans.typed_settings('fake', {'nodeprep_fake_flag': 'maybe'})
    plan = _plans.plan_role('fake', {'nodeprep_gathered': ['shm'], 'shm': {}}, settings, problems,
                            _plan.new_context())
    assert plan['reasons'] == []
    assert plan['run'][0].startswith('invalid settings: nodeprep_fake_flag="maybe"')


def test_plan_role_says_what_is_missing_and_drops_the_rest(fake):
    settings, problems = _plans.typed_settings('fake', {'nodeprep_fake_flag': False})
    plan = _plans.plan_role('fake', {}, settings, problems, _plan.new_context())
    assert plan['missing'] == ['subsets: shm']
    assert plan['reasons'] == []
    assert plan['drift'] == [{'check': 'fake.check', 'msg': 'not gathered: subsets: shm', 'level': 'fail',
                              'fixable': False}]
    assert plan['run'] == ['facts to gather: subsets: shm']
    full = _plans.plan_role('fake', {'nodeprep_gathered': ['shm'], 'shm': {}}, settings, problems,
                            _plan.new_context())
    assert full['run'] == ['flag is off'] and full['settings']['nodeprep_fake_flag'] is False


def test_an_unknown_role_names_the_roles_that_plan(fake):
    with pytest.raises(_plans.PlanError, match=r"'nope' is not a role of gpufleet.nodeprep that plans in Python"):
        _plans.rules('nope')


def test_site_roles_lists_every_role_once():
    assert len(set(_plans.SITE_ROLES)) == len(_plans.SITE_ROLES)
    assert set(_plans.RULES) == set(_plans.SITE_ROLES)
    # site.yml's two stages: each role in one of them, in SITE_ROLES' order.
    assert _plans.DISRUPTIVE_ROLES + _plans.SETTINGS_ROLES == _plans.SITE_ROLES


def test_the_driver_settings_come_typed_from_the_plan():
    """-e nodeprep_nvidia_driver_persistenced=false reaches readiness as the plan typed it: not managed.  The driver
    checks are the nvidia_driver plan's: readiness reads none of that role's variables itself."""
    facts, settings, probe = F.converged()
    settings.update({'nodeprep_nvidia_driver_persistenced': 'false', 'nodeprep_nvidia_driver_blacklist_nouveau': 'no'})
    plans = F.plans(facts, settings, probe)
    assert plans['nvidia_driver']['settings']['nodeprep_nvidia_driver_persistenced'] is False
    readiness_settings = dict((name, value) for name, value in settings.items()
                              if not name.startswith('nodeprep_nvidia_driver_'))
    checks = dict((c['id'], c) for c in r.evaluate(facts, readiness_settings, probe, plans))
    assert (checks['driver.persistenced']['expected'], checks['driver.persistenced']['status']) == (
        'not managed (nodeprep_nvidia_driver_persistenced false)', 'skip')
    assert (checks['driver.nouveau_blacklisted']['expected'], checks['driver.nouveau_blacklisted']['status']) == (
        'not managed (nodeprep_nvidia_driver_blacklist_nouveau false)', 'skip')


@pytest.mark.parametrize('plan, expected', [
    ({'problems': [], 'errors': [], 'missing': []}, None),
    ({'problems': ['nodeprep_x=1: allowed: 2', 'nodeprep_y="a": allowed: b'], 'errors': [], 'missing': []},
     'shm on gpu-a01: invalid settings: nodeprep_x=1: allowed: 2; nodeprep_y="a": allowed: b'),
    ({'problems': ['nodeprep_x=1: allowed: 2'], 'errors': ['/dev/shm is not a mounted tmpfs on gpu-a01.'],
      'missing': ['subsets: shm']},
     'shm on gpu-a01: invalid settings: nodeprep_x=1: allowed: 2; /dev/shm is not a mounted tmpfs on gpu-a01.; '
     'facts not gathered: subsets: shm'),
    ({'problems': [], 'errors': [], 'missing': ['subsets: shm', 'files: /etc/fstab']},
     'shm on gpu-a01: facts not gathered: subsets: shm; files: /etc/fstab'),
])
def test_refusal_is_the_plans_words(plan, expected):
    assert _plans.refusal('shm', plan, 'gpu-a01') == expected


# ------------------------------------------------------------------------------ site.yml's plays per node

def _site_plans(**runs):
    """A plan of every site role: ``run`` empty but for the roles named."""
    return dict((role, {'run': list(runs.get(role, []))}) for role in _plans.SITE_ROLES)


@pytest.mark.parametrize('plans, expected', [
    # Already right: no play.
    (_site_plans(), []),
    # A settings role with work: that role's play and the settings play.
    (_site_plans(memlock=['/etc/security/limits.d/90-nodeprep.conf: missing']),
     [('memlock', ['/etc/security/limits.d/90-nodeprep.conf: missing']), ('settings', ['memlock'])]),
    # Two settings roles: site.yml's order, whatever the order of the plans.
    (_site_plans(nccl=['nccl.conf: differs'], gpu_settings=['GPU 0: power limit']),
     [('gpu_settings', ['GPU 0: power limit']), ('nccl', ['nccl.conf: differs']),
      ('settings', ['gpu_settings', 'nccl'])]),
    # Kernel or driver work: the batched play with every reason, then every settings role after it.
    (_site_plans(kernel=['kernel-devel missing'], nvidia_driver=['nouveau not blacklisted'], shm=['size']),
     [('kernel_driver', ['kernel-devel missing', 'nouveau not blacklisted'])]
     + [(role, ['after the kernel and driver']) for role in _plans.SETTINGS_ROLES]
     + [('settings', list(_plans.SETTINGS_ROLES))]),
])
def test_site_runs_are_the_plays_a_node_goes_through(plans, expected):
    assert _plans.site_runs(plans) == expected


def test_site_runs_name_a_node_that_is_not_a_gpu_node_once():
    plans = _site_plans(memlock=['users'])
    plans['kernel']['gpu_skip'] = 'no NVIDIA GPU on the PCI bus: kernel has nothing to do'
    plans['nccl']['gpu_skip'] = 'no NVIDIA GPU on the PCI bus: nccl has nothing to do'
    plans['shm']['gpu_skip'] = None
    assert _plans.site_runs(plans) == [
        ('memlock', ['users']), ('settings', ['memlock']),
        ('no_gpu', ['no NVIDIA GPU on the PCI bus: kernel has nothing to do'])]


def test_site_groups_are_the_groups_site_yml_plays_run_on():
    assert [_plans.site_group(key) for key in ('kernel_driver', 'memlock', 'settings', 'no_gpu')] == [
        'nodeprep_kernel_driver_work', 'nodeprep_memlock_work', 'nodeprep_settings_work', 'nodeprep_no_gpu']
