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

The sweep (below) gives every setting of every role the strings "false", "0", "yes", "1", "none" and "": each is
the value it writes for the setting's type (written by hand, written_value) with the plan of that value, or a
problem names the variable.
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


# ---------------------------------------------------------------------------------------------------------------
# The sweep: every setting of every role that plans, given each string -e and INI inventories hand over for "off",
# "on", "nothing".  Either the setting takes the value the string writes for its type (written by hand below, not
# computed by the code under test) and the plan is the plan of that value, or a problem names the variable.

SWEEP = ('false', '0', 'yes', '1', 'none', '')
REFUSED = object()
BOOLS = dict(BOOL_STRINGS)
# Raw settings: what each string means to the setting's own rule (absent: refused).
RAW_SWEEP = {
    _gpu_node.NAME: {'false': False, '0': False, 'yes': True, '1': True, '': 'auto'},
    'nodeprep_memlock_value': {'1': 1},
    # 1 W (the node then refuses it: outside every GPU's range).
    'nodeprep_gpu_settings_power_limit': {'1': 1},
    # A size of 1 byte ('1'); '' is no size, as the default (None).
    'nodeprep_shm_size': {'1': 1, '': None},
}


def written_value(name, entry, text):
    """The value ``text`` writes for the setting, or REFUSED when it writes none of the setting's type."""
    kind = entry['type']
    if kind == 'bool':
        return BOOLS.get(text, REFUSED)
    if kind == 'int':
        return int(text) if text.isdigit() else REFUSED
    if kind == 'float':
        return float(text) if text.isdigit() else REFUSED
    if kind == 'str':
        return text
    if kind == 'path':
        # A path on the node: absolute, or '' where '' is the default (none).
        return text if text.startswith('/') or (text == '' and entry.get('default') == '') else REFUSED
    if kind == 'list':
        return text.split(',') if text else REFUSED
    if kind == 'raw':
        return RAW_SWEEP.get(name, {}).get(text, REFUSED)
    return REFUSED  # a dict is never written as one of these words


def sweep_cases():
    return [pytest.param(role, name, text, id='{0}:{1}:{2!r}'.format(role, name, text))
            for role in _plans.SITE_ROLES for name in sorted(_plans.RULES[role].SETTINGS) for text in SWEEP]


def test_the_sweep_covers_every_setting_of_every_role():
    names = set(name for _role, name, _text in [c.values for c in sweep_cases()])
    assert names == set(name for role in _plans.SITE_ROLES for name in _plans.RULES[role].SETTINGS)
    assert len(names) > 100


@pytest.mark.parametrize('role, name, text', sweep_cases())
def test_a_string_is_its_typed_value_or_is_refused_naming_the_variable(role, name, text, node):
    facts = role_facts(role, node)
    entry = _plans.RULES[role].SETTINGS[name]
    settings, problems, plan = planned(role, facts, {name: text})
    want = written_value(name, entry, text)
    # A problem names the variable: "name=value: ...", or an item of it ("name[0] ...", "name.KEY: ...").
    named = [p for p in plan['problems'] if p.startswith(name) and p[len(name)] in '=[.']
    if want is REFUSED or named:
        assert named, '{0}={1!r} was taken as {2!r} ({3}): say what it means, or refuse it'.format(
            name, text, settings[name], plan['problems'] or 'no problem')
        assert settings[name] == copy.deepcopy(entry.get('default')) or not problems
        return
    # Taken: exactly as the value it writes (the node's errors too: a power limit of 1 W is outside the range).
    want_settings, want_problems, want_plan = planned(role, facts, {name: want})
    if entry['type'] == 'raw':
        assert settings[name] == text
        settings[name] = plan['settings'][name] = want
    assert settings[name] == want and type(settings[name]) is type(want), (text, settings[name])
    assert (settings, problems) == (want_settings, want_problems)
    assert plan == want_plan
