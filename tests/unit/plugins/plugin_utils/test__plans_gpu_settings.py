# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gpu_settings variables as users write them (-e k=v, INI inventories), typed once by _plans.typed_settings
before the plan sees them: the defects of issue #22 for this role, each a case."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_gpu_settings as pg
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans.test__plan_gpu_settings import (
    ALL, B200, SETTLED, node, settle)


def plan_of(facts, provided, **context):
    settings, problems = _plans.typed_settings('gpu_settings', provided)
    return _plans.plan_role('gpu_settings', facts, settings, problems, _plan.new_context(host='node1', **context))


def test_gpu_settings_plans_in_python():
    assert _plans.RULES['gpu_settings'] is pg
    assert _plans.role_files('gpu_settings')['script'].startswith('# -*- coding: utf-8 -*-\n')


def test_clamp_given_as_the_string_false_does_not_clamp():
    """-e nodeprep_gpu_settings_power_limit_clamp=false reached Python as "false", which is true: a 5000 W limit
    was silently clamped.  Typed once, it is False and the out-of-range limit fails on the node."""
    plan_ = plan_of(SETTLED, {'nodeprep_gpu_settings_power_limit': '5000',
                              'nodeprep_gpu_settings_power_limit_clamp': 'false'})
    assert plan_['settings']['nodeprep_gpu_settings_power_limit_clamp'] is False
    assert plan_['errors'] == ['GPU 0 (00000000:8F:00.0) on node1: power_limit 5000 W is outside the allowed range '
                               '200.00-1000.00 W']
    assert 'nvidia_gpu' not in plan_['args']
    clamped = plan_of(SETTLED, {'nodeprep_gpu_settings_power_limit': '5000',
                                'nodeprep_gpu_settings_power_limit_clamp': 'yes'})
    assert clamped['args']['nvidia_gpu']['power_limit'] == '1000'


def test_gpus_ALL_is_refused_before_any_gpu_is_read():
    plan_ = plan_of(SETTLED, {'nodeprep_gpu_settings_gpus': 'ALL'})
    assert plan_['problems'] == [
        'nodeprep_gpu_settings_gpus=["ALL"]: "ALL" is not a GPU index, UUID or PCI bus id; expected "all", or a list '
        'of GPU indexes (0), UUIDs (GPU-...) or PCI bus ids (00000000:8F:00.0)']
    assert (plan_['args'], plan_['files']) == ({}, [])


def test_gpus_as_a_comma_separated_string_is_a_list():
    plan_ = plan_of(node(), {'nodeprep_gpu_settings_gpus': '0,1', 'nodeprep_gpu_settings_power_limit': '70%'})
    assert plan_['problems'] == []
    assert plan_['args']['nvidia_gpu']['gpus'] == ['00000000:8F:00.0', '00000000:90:00.0']
    assert plan_['reasons'][4] == 'GPUs 0, 1: power limit 1000 W, wanted 700 W'


@pytest.mark.parametrize('apply, status', [('false', 'skip'), ('no', 'skip'), ('true', 'fail'), ('yes', 'fail')])
def test_readiness_reads_apply_as_the_role_does(apply, status):
    """readiness took apply/boot_persist from text with its own reading; now it reads the role's typed plan."""
    plan_ = plan_of(node(), {'nodeprep_gpu_settings_power_limit': '70%', 'nodeprep_gpu_settings_apply': apply,
                             'nodeprep_gpu_settings_boot_persist': 'false'})
    assert plan_['settings']['nodeprep_gpu_settings_boot_persist'] is False
    assert _readiness.plan_check('gpu.power_limit', plan_)['status'] == status
    assert plan_['files'] == []


@pytest.mark.parametrize('name, value', [
    ('nodeprep_gpu_settings_apply', 'maybe'),
    ('nodeprep_gpu_settings_timeout', 'soon'),
    ('nodeprep_gpu_settings_applications_clocks', 'fast'),
    ('nodeprep_gpu_settings_persistence_mode', 'on-ish'),
])
def test_values_that_do_not_type_are_problems(name, value):
    plan_ = plan_of(SETTLED, {name: value})
    assert plan_['problems'], plan_
    for problem in plan_['problems']:    # the validator's words, one or more per value
        assert problem.startswith('{0}={1}: '.format(name, _plan.show(value)))
        assert problem.endswith('(role gpu_settings: docs/roles/gpu_settings.md)')
    assert _readiness.plan_check('gpu.power_limit', plan_)['status'] == 'fail'


def test_the_power_cap_path_from_the_inventory_to_the_report():
    """The setting as an inventory gives it, the plan, the node after the run, a cap set out of band."""
    provided = {'nodeprep_gpu_settings_power_limit': '70%'}
    first = plan_of(node(), provided)
    assert first['reasons'][4] == ALL + ': power limit 1000 W, wanted 700 W'
    capped = settle(node(), first, cap_w=500.0)
    assert [g['enforced_power_limit_w'] for g in capped['nvidia']['gpus']] == [500.0] * len(B200['gpus'])
    again = plan_of(copy.deepcopy(capped), provided)
    assert again['reasons'] == []
    check = _readiness.plan_check('gpu.power_limit', again)
    assert check['status'] == 'warn'
    assert check['observed'] == ('all 8 GPUs at 500 W; ' + ALL + ': the enforced power limit is 500 W, not the 700 W '
                                 'set: a cap set out of band (a BMC, DCGM or another power policy) limits the GPU; no '
                                 'run of gpu_settings changes it')
