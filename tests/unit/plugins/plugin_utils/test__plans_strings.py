# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Settings given as strings behave exactly as the typed values, for every bool and int setting of every role that
plans (``-e nodeprep_shm_fstab=false``, an INI inventory's ``nodeprep_reboot_ok=0``).

The table is the roles' SETTINGS: each bool and int setting, given as the strings ``-e`` and INI inventories hand
over, goes through the node_plan action's typing (_plans.typed_settings) and then the role's plan on a converged
node; the typed settings and the plan must be those of the typed value.  A new bool or int setting is in the table
without a line here.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_node
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as F

# What -e and INI inventories give, and the value each must mean.
BOOL_STRINGS = (('false', False), ('0', False), ('no', False), ('yes', True), ('true', True), ('1', True))
# Raw settings that read booleans given as text themselves (and numbers given as digits).
RAW_CASES = {
    _gpu_node.NAME: (('false', False), ('no', False), ('true', True), ('yes', True), ('auto', 'auto')),
    'nodeprep_memlock_value': (('65536', 65536), ('unlimited', 'unlimited')),
}


def int_strings(entry):
    values = [0, 1] + ([entry['default']] if isinstance(entry.get('default'), int) else [])
    return tuple((str(value), value) for value in sorted(set(values)))


def cases():
    out = []
    for role in _plans.SITE_ROLES:
        for name, entry in sorted(_plans.RULES[role].SETTINGS.items()):
            if entry['type'] == 'bool':
                out.append((role, name, BOOL_STRINGS))
            elif entry['type'] == 'int':
                out.append((role, name, int_strings(entry)))
            elif name in RAW_CASES:
                out.append((role, name, RAW_CASES[name]))
    return out


CASES = cases()


def test_the_table_covers_every_bool_and_int_setting():
    typed = set((role, name) for role in _plans.SITE_ROLES for name, entry in _plans.RULES[role].SETTINGS.items()
                if entry['type'] in ('bool', 'int'))
    assert typed <= set((role, name) for role, name, _values in CASES)
    assert len(typed) > 40


@pytest.fixture(scope='module')
def node():
    facts, _settings, probe = F.converged()
    return facts, probe


def role_facts(role, node):
    facts, probe = node
    if role == 'nvidia_driver':
        return F.driver_facts(facts, probe, _plan.defaults(_plans.RULES[role]))
    return copy.deepcopy(facts)


def planned(role, facts, given):
    settings, problems = _plans.typed_settings(role, given)
    plan = _plans.plan_role(role, copy.deepcopy(facts), settings, problems, _plan.new_context(host='gpu-a01'))
    return settings, problems, plan


@pytest.mark.parametrize('role, name, values', CASES, ids=['{0}:{1}'.format(c[0], c[1]) for c in CASES])
def test_a_string_means_its_typed_value(role, name, values, node):
    facts = role_facts(role, node)
    for text, value in values:
        settings, problems, plan = planned(role, facts, {name: text})
        want_settings, want_problems, want_plan = planned(role, facts, {name: value})
        if _plans.RULES[role].SETTINGS[name]['type'] == 'raw':
            # Not typed by the validator: the plan reads the text itself; everything it decides is the same.
            assert settings[name] == text
            settings[name] = plan['settings'][name] = value
        else:
            assert settings[name] == value and type(settings[name]) is type(value), (text, settings[name])
        assert (settings, problems) == (want_settings, want_problems), text
        assert plan == want_plan, text


@pytest.mark.parametrize('role, name', [(c[0], c[1]) for c in CASES if c[2] is BOOL_STRINGS])
def test_a_string_that_is_no_boolean_is_a_problem(role, name, node):
    settings, problems = _plans.typed_settings(role, {name: 'maybe'})
    assert settings[name] == copy.deepcopy(_plans.RULES[role].SETTINGS[name].get('default'))
    assert len(problems) == 1 and problems[0].startswith('{0}="maybe": '.format(name))
