# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The memlock settings as users write them (``-e k=v``, INI inventories), typed once by _plans.typed_settings
before the memlock plan sees them, and the plan that results (plan_role)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import test__plan_memlock as T


def plan(provided, facts=None):
    settings, problems = _plans.typed_settings('memlock', provided)
    return settings, _plans.plan_role('memlock', T.fresh() if facts is None else facts, settings, problems,
                                      _plan.new_context(host='node1'))


def test_memlock_plans_in_python():
    assert _plans.RULES['memlock'] is T.M


def test_a_domain_given_as_a_string_is_one_domain():
    """``-e nodeprep_memlock_domains=root`` planned limits for r, o, o, t before the settings were typed."""
    settings, result = plan({'nodeprep_memlock_domains': 'root'})
    assert settings['nodeprep_memlock_domains'] == ['root']
    assert [f['content'] for f in result['files'] if f['part'] == 'limits'] == [
        T.HEADER + 'root\t-\tmemlock\tunlimited\n']


def test_a_comma_separated_string_is_a_list():
    settings, result = plan({'nodeprep_memlock_domains': '*,root,@rdma', 'nodeprep_memlock_services': 'slurmd',
                             'nodeprep_memlock_verify_users': 'root'})
    assert (settings['nodeprep_memlock_domains'], settings['nodeprep_memlock_services'],
            settings['nodeprep_memlock_verify_users']) == (['*', 'root', '@rdma'], ['slurmd'], ['root'])
    assert result['problems'] == []


@pytest.mark.parametrize('text', ['false', 'no', 'off', '0'])
def test_false_as_text_is_false(text):
    settings, result = plan({'nodeprep_memlock_limits': text, 'nodeprep_memlock_systemd_default': text})
    assert settings['nodeprep_memlock_limits'] is False
    assert settings['nodeprep_memlock_systemd_default'] is False
    assert (result['problems'], result['reasons'], result['files'], result['run']) == ([], [], [], [])


def test_a_number_as_text_from_the_command_line():
    settings, result = plan({'nodeprep_memlock_value': '65536'}, facts=T.converged())
    assert settings['nodeprep_memlock_value'] == '65536'
    assert result['problems'] == []
    assert result['reasons'] == [T.differs(T.FILE), T.differs(T.DROPIN)]
    assert [f['content'] for f in result['files'] if f['state'] == 'file'] == [T.LIMITS_64K, T.MANAGER_64K]


def test_a_flag_that_is_no_boolean_is_a_problem():
    settings, result = plan({'nodeprep_memlock_verify': 'maybe'})
    assert settings['nodeprep_memlock_verify'] is True
    assert len(result['problems']) == 1
    assert result['problems'][0].startswith('nodeprep_memlock_verify="maybe": ')
    assert result['problems'][0].endswith(' (role memlock: docs/roles/memlock.md)')
    assert (result['reasons'], result['files']) == ([], [])


@pytest.mark.parametrize('value, problem', [
    ('0', 'nodeprep_memlock_value="0": ' + T.VALUE),
    ('-1', 'nodeprep_memlock_value="-1": ' + T.VALUE),
    ('lots', 'nodeprep_memlock_value="lots": ' + T.VALUE),
    (0.5, 'nodeprep_memlock_value=0.5: ' + T.VALUE),
])
def test_values_users_write_that_are_refused(value, problem):
    _settings, result = plan({'nodeprep_memlock_value': value})
    assert result['problems'] == [problem]
    assert result['run'] == ['invalid settings: ' + problem]


def test_facts_not_gathered_plan_nothing_and_fail_the_checks():
    _settings, result = plan({}, facts={})
    assert result['missing'] == ['subsets: limits', 'files: {0}, {1}, {2}'.format(T.FILE, T.SYSD, T.DROPIN),
                                 'limits_users: root, *']
    assert (result['reasons'], result['files']) == ([], [])
    assert [d['check'] for d in result['drift']] == ['memlock.users', 'memlock.services']
