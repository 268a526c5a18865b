# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Values no setting can take, refused by the one typing path (_plans.typed_settings) naming the variable, for every
setting of every role that plans: the tables are the roles' SETTINGS (a new setting is in them without a line here).

* Numbers: an infinite or NaN float (YAML ``.inf``, ``.nan``), a number beyond a signed 64-bit integer (400 digits),
  in an int, float or raw setting, inside a list or a dict, or written as digits to a raw setting.  Before, the plans
  raised ("cannot convert float infinity to integer"), naming no variable, and node_plan lost the plans of every
  role of the node (site.yml's first play and readiness plan them all at once).
* Paths: every path setting names a file or folder on the node; Ansible's path type expanded ``~`` and ``$HOME`` on
  the controller (with the controller's home) and a trailing newline passed.
* Lists of strings: an empty item (``-e name=`` or ``a,,b``) names nothing.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import posixpath

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.action import test_node_plan as NP
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.rules import test_readiness_facts as F

INF = float('inf')
NAN = float('nan')
HUGE = int('1' * 400)
# (id, value): numbers no setting holds, as YAML and JSON give them.
BAD_NUMBERS = [('inf', INF), ('-inf', -INF), ('nan', NAN), ('400 digits', HUGE), ('-400 digits', -HUGE),
               ('2**63', 2 ** 63), ('-2**63-1', -2 ** 63 - 1), ('1e300', 1e300)]
# The same as text (-e name=value, an INI inventory): an int or float setting types it into the number, a raw
# setting's rule reads digits as a number.
BAD_NUMBER_TEXTS = [('400 digits as text', '1' * 400), ('5000 digits as text', '9' * 5000),
                    ('-30 digits as text', '-' + '9' * 30), ('1e999 as text', '1e999')]
NUMBER_ALLOWED = 'allowed: a finite number from -9223372036854775808 to 9223372036854775807'


def numeric_settings():
    """(role, name, entry, where) of every setting that holds a number: int, float and raw settings, lists of int,
    and dicts with int or float options (where: the option, or None)."""
    out = []
    for role in _plans.SITE_ROLES:
        for name, entry in sorted(_plans.RULES[role].SETTINGS.items()):
            if entry['type'] in ('int', 'float', 'raw') or entry.get('elements') in ('int', 'float'):
                out.append((role, name, entry, None))
            for option, sub in sorted((entry.get('options') or {}).items()):
                if sub['type'] in ('int', 'float'):
                    out.append((role, name, entry, option))
    return out


NUMERIC = numeric_settings()


def test_the_table_covers_the_numbers_of_every_role():
    roles = set(role for role, _name, _entry, _where in NUMERIC)
    assert roles >= {'kernel', 'nvidia_driver', 'gpu_settings', 'memlock', 'shm', 'nccl', 'rdma', 'dcgm'}
    assert ('shm', 'nodeprep_shm_size') in [(r, n) for r, n, _e, _w in NUMERIC]
    assert ('gpu_settings', 'nodeprep_gpu_settings_applications_clocks') in [(r, n) for r, n, _e, w in NUMERIC if w]
    assert len(NUMERIC) >= 15


def given_value(entry, where, bad):
    if where:
        value = dict((option, 1000) for option in entry['options'])
        value[where] = bad
        return value
    if entry['type'] == 'list':
        return [1, bad]
    return bad


def number_cases():
    out = []
    for role, name, entry, where in NUMERIC:
        values = list(BAD_NUMBERS)
        if entry['type'] in ('int', 'float', 'raw') and not where:
            values += BAD_NUMBER_TEXTS
        for label, bad in values:
            out.append(pytest.param(role, name, entry, where, bad,
                                    id='{0}:{1}:{2}'.format(name, where or '', label)))
    return out


@pytest.mark.parametrize('role, name, entry, where, bad', number_cases())
def test_a_number_no_setting_holds_is_refused_naming_the_variable(role, name, entry, where, bad):
    value = given_value(entry, where, bad)
    settings, problems = _plans.typed_settings(role, {name: value})
    assert len(problems) == 1, problems
    assert problems[0].startswith('{0}='.format(name))
    assert '(role {0}: docs/roles/{0}.md)'.format(role) in problems[0]
    if where or entry['type'] == 'list':
        # Where the number sits, or the validator's own words for a list item it cannot type.
        assert ('{0}: '.format(where or '[1]') in problems[0] and NUMBER_ALLOWED in problems[0]) or \
            'cannot be typed' in problems[0] or 'unable to convert' in problems[0]
    else:
        assert NUMBER_ALLOWED in problems[0] or 'unable to convert to' in problems[0], problems[0]
    assert settings[name] == copy.deepcopy(entry.get('default'))


def test_the_number_words():
    assert _plans.number_problem(INF) == 'an infinite number; ' + NUMBER_ALLOWED
    assert _plans.number_problem(NAN) == 'NaN is not a number; ' + NUMBER_ALLOWED
    assert _plans.number_problem([1, {'max': HUGE}]) == '[1]: max: a number out of range; ' + NUMBER_ALLOWED
    assert _plans.number_problem('1' * 400) is None  # text is a number only to a raw setting
    assert _plans.number_problem('1' * 400, raw=True) == 'a number out of range; ' + NUMBER_ALLOWED
    assert _plans.number_problem(' 65536 ', raw=True) is None
    assert _plans.number_problem('64G', raw=True) is None
    for good in (0, -1, 2 ** 63 - 1, -2 ** 63, 0.5, True, None, 'unlimited', {'min': 1, 'max': 2}):
        assert _plans.number_problem(good, raw=True) is None


def test_the_value_is_shown_short():
    _settings, problems = _plans.typed_settings('shm', {'nodeprep_shm_size': HUGE})
    assert problems == ['nodeprep_shm_size={0}... (400 characters): a number out of range; {1} (role shm: '
                        'docs/roles/shm.md)'.format('1' * 50, NUMBER_ALLOWED)]
    _settings, problems = _plans.typed_settings('shm', {'nodeprep_shm_size': INF})
    assert problems == ['nodeprep_shm_size=Infinity: an infinite number; {0} (role shm: docs/roles/shm.md)'.format(
        NUMBER_ALLOWED)]


def test_a_size_beyond_the_range_with_a_unit_is_refused_by_the_size_grammar():
    facts = F.converged()[0]
    for value in ('1' * 400 + 'G', '9999999999999999999P'):
        settings, problems = _plans.typed_settings('shm', {'nodeprep_shm_size': value})
        assert problems == []
        plan = _plans.plan_role('shm', copy.deepcopy(facts), settings, problems, _plan.new_context(host='gpu-a01'))
        assert len(plan['problems']) == 1
        assert plan['problems'][0].startswith('nodeprep_shm_size="{0}'.format(value[:40]))
        assert 'larger than 9223372036854775807 bytes; allowed: bytes, or a number with K' in plan['problems'][0]


# ---------------------------------------------------------------------------------------------------------------
# node_plan as site.yml's first play and the readiness role run it: every role at once.

def node_facts():
    facts, _settings, probe = F.converged()
    # The memlock role's default users are root and '*' (any user no line names); the converged node's '*' is root's.
    facts['limits']['effective']['*'] = copy.deepcopy(facts['limits']['effective']['root'])
    return F.driver_facts(facts, probe, _plan.defaults(_plans.RULES['nvidia_driver']))


@pytest.fixture(scope='module')
def facts():
    return node_facts()


# The cases, then one non-finite value for every setting that holds a number.
NODE_CASES = [('shm', 'nodeprep_shm_size', INF), ('shm', 'nodeprep_shm_size', NAN),
              ('shm', 'nodeprep_shm_size', HUGE), ('shm', 'nodeprep_shm_size', '1' * 400)] + [
    (role, name, given_value(entry, where, INF)) for role, name, entry, where in NUMERIC]


@pytest.mark.parametrize('role, name, value', NODE_CASES,
                         ids=['{0}={1}'.format(c[1], repr(c[2])[:20]) for c in NODE_CASES])
def test_node_plan_still_plans_every_role(role, name, value, facts):
    result, calls = NP.run({'gather': 'never'}, {name: value, 'ansible_facts': copy.deepcopy(facts)})
    assert calls == [] and 'failed' not in result, result.get('msg')
    plans = result['ansible_facts']['nodeprep_plans']
    assert sorted(plans) == sorted(_plans.SITE_ROLES)
    for other, plan in plans.items():
        mine = [problem for problem in plan['problems'] if problem.startswith(name + '=')]
        if name in _plans.RULES[other].SETTINGS:
            assert len(mine) == 1, (other, plan['problems'])
        else:
            assert mine == [] and plan['problems'] == [], (other, plan['problems'])


def test_node_plan_with_fail_on_problems_names_the_variable(facts):
    result, _calls = NP.run({'roles': ['shm', 'memlock'], 'gather': 'never', 'fail_on_problems': True},
                            {'nodeprep_shm_size': INF, 'ansible_facts': copy.deepcopy(facts)})
    assert result['failed'] is True
    assert result['msg'] == ('shm on gpu-a01: invalid settings: nodeprep_shm_size=Infinity: an infinite number; '
                             '{0} (role shm: docs/roles/shm.md)'.format(NUMBER_ALLOWED))


# ---------------------------------------------------------------------------------------------------------------
# Paths on the node.

PATHS = [(role, name, entry) for role in _plans.SITE_ROLES
         for name, entry in sorted(_plans.RULES[role].SETTINGS.items()) if entry['type'] == 'path']


def test_every_setting_that_names_a_path_on_the_node_is_a_path_setting():
    names = [name for _role, name, _entry in PATHS]
    assert sorted(set(names)) == sorted([
        'nodeprep_gpu_settings_config_path', 'nodeprep_imex_config', 'nodeprep_memlock_limits_file',
        'nodeprep_nccl_conf_path',
        'nodeprep_nccl_torch_env_path', 'nodeprep_nvidia_driver_nouveau_conf', 'nodeprep_perf_tools_all_reduce_perf',
        'nodeprep_perf_tools_nvbandwidth', 'nodeprep_perf_tools_prefix', 'nodeprep_shm_path'])
    # Every other string setting whose default is a path is one of them.
    for role in _plans.SITE_ROLES:
        for name, entry in _plans.RULES[role].SETTINGS.items():
            default = entry.get('default')
            if isinstance(default, str) and default.startswith('/'):
                assert entry['type'] == 'path', name


def path_cases():
    out = []
    for role, name, entry in PATHS:
        default = entry['default'] or '/opt/site/bin/tool'
        base = posixpath.basename(default)
        for label, bad, words in [
                ('trailing newline', default + '\n', 'has a newline'),
                ('newline inside', default + '\n/etc/passwd', 'has a newline'),
                ('tab', default + '\t', 'has a control character'),
                ('trailing space', default + ' ', 'has a space at one end'),
                ('leading space', ' ' + default, 'has a space at one end'),
                ('~', '~/' + base, '~ is not expanded on the node'),
                ('~user', '~root/' + base, '~ is not expanded on the node'),
                ('$HOME', '$HOME/' + base, '$ is not expanded on the node'),
                ('${VAR}', '/srv/${SITE}/' + base, '$ is not expanded on the node'),
                ('relative', 'etc/' + base, 'not an absolute path'),
                ('trailing /', default + '/', 'ends with /'),
                ('//', '/etc//' + base, 'has an empty, . or .. part'),
                ('.', '/etc/./' + base, 'has an empty, . or .. part'),
                ('..', '/etc/../' + base, 'has an empty, . or .. part'),
                ('/', '/', 'has an empty, . or .. part'),
                ('a number', 42, 'not a path'),
                ('a list', [default], 'not a path'),
                ('true', True, 'not a path'),
                ('null', None, 'not a path')]:
            out.append(pytest.param(role, name, entry, bad, words, id='{0}:{1}'.format(name, label)))
        if entry['default']:
            out.append(pytest.param(role, name, entry, '', 'not a path', id='{0}:empty'.format(name)))
    return out


@pytest.mark.parametrize('role, name, entry, bad, words', path_cases())
def test_a_path_that_is_not_a_path_on_the_node_is_refused(role, name, entry, bad, words):
    settings, problems = _plans.typed_settings(role, {name: bad})
    # The memlock rule says which files pam_limits reads: its words come first there.
    own = _plans._PATH_WORDS[name] + '; ' if name in _plans._PATH_WORDS else ''
    assert problems == ['{0}={1}: {2}; {3}{4}{5} (role {6}: docs/roles/{6}.md)'.format(
        name, _plan.show(bad), words, own, _plans.PATH_ALLOWED,
        ", or '' (the default)" if entry['default'] == '' else '', role)]
    assert settings[name] == entry['default']


@pytest.mark.parametrize('role, name, entry', PATHS, ids=[p[1] for p in PATHS])
def test_a_path_is_taken_as_written(role, name, entry):
    for good in ([entry['default']] if entry['default'] else ['']) + ['/srv/site files/nodeprep~1/x.conf']:
        settings, problems = _plans.typed_settings(role, {name: good})
        assert (settings[name], problems) == (good, [])


# ---------------------------------------------------------------------------------------------------------------
# Lists of strings.

LISTS = [(role, name, entry) for role in _plans.SITE_ROLES
         for name, entry in sorted(_plans.RULES[role].SETTINGS.items())
         if entry['type'] == 'list' and entry.get('elements', 'str') == 'str']


@pytest.mark.parametrize('role, name, entry', LISTS, ids=[p[1] for p in LISTS])
def test_an_empty_list_item_is_refused_naming_the_variable(role, name, entry):
    for bad in ('', 'a,,b', ['a', ''], [' ']):
        settings, problems = _plans.typed_settings(role, {name: bad})
        assert len(problems) == 1 and problems[0].startswith('{0}={1}: '.format(name, _plan.show(bad))), problems
        assert settings[name] == entry['default']


def test_an_empty_list_item_has_its_words():
    assert _plans.typed_settings('memlock', {'nodeprep_memlock_services': 'slurmd,,sshd'})[1] == [
        'nodeprep_memlock_services="slurmd,,sshd": has an empty item; allowed: a list of non-empty items; [] for none '
        '(-e \'{"name": []}\') (role memlock: docs/roles/memlock.md)']


# ---------------------------------------------------------------------------------------------------------------
# Text the node cannot be asked about: a unit name with a space in a list setting made the plan raise while it
# listed what to gather (parsers/_node_records.unit_name), and node_plan lost every role's plan.

ODD_TEXTS = ['nvidia pm', '-x', 'a\nb', 'a, b c', '../x', '*', '{x}', ' ', 'a\x00b', '[', '/', '1.2.3.4.5', '-1']


def text_cases():
    return [pytest.param(role, name, text, id='{0}:{1!r}'.format(name, text)) for role in _plans.SITE_ROLES
            for name, entry in sorted(_plans.RULES[role].SETTINGS.items())
            if entry['type'] in ('str', 'list', 'raw', 'path') for text in ODD_TEXTS]


@pytest.mark.parametrize('role, name, text', text_cases())
def test_odd_text_in_any_setting_is_planned_or_refused_never_raised(role, name, text, facts):
    settings, problems = _plans.typed_settings(role, {name: text})
    _plans.gather_request([role], {role: settings})
    plan = _plans.plan_role(role, copy.deepcopy(facts), settings, problems, _plan.new_context(host='gpu-a01'))
    assert plan['run'] is not None
    assert all(problem.startswith('nodeprep_') for problem in problems)


def test_a_unit_the_node_cannot_be_asked_about_is_refused_naming_the_variable(facts):
    name = 'nodeprep_nvidia_driver_persistence_conflicting_units'
    settings, problems = _plans.typed_settings('nvidia_driver', {name: 'nvidia-pm,gpu mode'})
    assert problems == [
        name + '="nvidia-pm,gpu mode": the node cannot be asked about it: units: \'gpu mode\' is not a unit name '
        "(allowed: a name such as nvidia-persistenced or nvidia-persistenced.service, without spaces, not starting "
        "with '-') (role nvidia_driver: docs/roles/nvidia_driver.md)"]
    assert settings[name] == _plans.RULES['nvidia_driver'].SETTINGS[name]['default']
    result, _calls = NP.run({'gather': 'never'}, {name: ['gpu mode'], 'ansible_facts': copy.deepcopy(facts)})
    plans = result['ansible_facts']['nodeprep_plans']
    assert sorted(plans) == sorted(_plans.SITE_ROLES)
    assert plans['nvidia_driver']['problems'][0].startswith(name + '=["gpu mode"]: the node cannot be asked')
