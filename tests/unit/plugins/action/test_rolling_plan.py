# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/action/rolling_plan.py: the nodeprep_rolling_* variables typed once (strings behave as the typed
values, bad values are clear errors naming what is allowed), the AWX/AAP slice refusal, the plan."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re
from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.nodeprep.plugins.action import rolling_plan

EL, UB = 'el9-b200-01', 'ubuntu2404-h200-01'
ON_TARGET = {'kernel': {'reasons': [], 'reboot': {'needed': False, 'why': []}, 'run': []},
             'nvidia_driver': {'reasons': [], 'reboot': {'needed': False, 'why': []}, 'run': []}}


def run(variables, args=None):
    task = MagicMock()
    task.args = dict({'hosts': [EL, UB]}, **(args or {}))
    task.async_val = 0
    task.check_mode = False
    task.diff = False
    action = rolling_plan.ActionModule(task, MagicMock(), PlayContext(), loader=DataLoader(),
                                       templar=Templar(loader=DataLoader()), shared_loader_obj=None)
    hostvars = dict((h, {'ansible_facts': {'nodeprep_plans': ON_TARGET}}) for h in (EL, UB))
    task_vars = dict(variables, hostvars=hostvars, groups={'slurm_head': ['slurm-head']})
    return action.run(task_vars=task_vars)


def test_defaults_and_strings_typed_once():
    got = run({})['settings']
    assert got['batch'] == 1 and got['busy'] == 'skip' and got['include_held'] is False
    assert got['controller'] == 'slurm-head' and got['reboot_timeout'] == 1800
    assert re.match(r'^[0-9]{8}T[0-9]{6}$', got['run_id'])
    got = run({'nodeprep_rolling_include_held': 'false', 'nodeprep_rolling_retry_failed': 'yes',
               'nodeprep_rolling_min_available': '2', 'nodeprep_rolling_batch': '25%',
               'nodeprep_rolling_run_id': 'maint-1', 'nodeprep_nvidia_driver_reboot_timeout': '600',
               'nodeprep_kernel_reboot_timeout': '300'})['settings']
    assert got['include_held'] is False and got['retry_failed'] is True and got['min_available'] == 2
    assert got['batch'] == '25%' and got['run_id'] == 'maint-1' and got['reboot_timeout'] == 600


def test_the_run_id_of_the_first_call_is_kept():
    got = run({}, {'run_id': 'r7'})
    assert got['run_id'] == 'r7' and got['settings']['run_id'] == 'r7'


@pytest.mark.parametrize('variables, message', [
    ({'nodeprep_rolling_batch': '\u00b2'}, "nodeprep_rolling_batch: '\u00b2' is not allowed; give a count (1 or more) "
                                           'or a percentage ("25%")'),
    ({'nodeprep_rolling_include_held': 'maybe'}, "nodeprep_rolling_include_held='maybe'"),
    ({'nodeprep_rolling_busy': 'later'}, "nodeprep_rolling_busy='later': value of nodeprep_rolling_busy must be one of: "
                                         'skip, wait, fail'),
    ({'nodeprep_rolling_run_id': 'r1\n'}, "nodeprep_rolling_run_id: 'r1\\n' is not allowed"),
    ({'nodeprep_rolling_drain_timeout': -5}, 'nodeprep_rolling_drain_timeout=-5 is not allowed; give a whole number, '
                                             '0 or more'),
    ({'nodeprep_nvidia_driver_reboot_timeout': 'soon'}, 'nodeprep_nvidia_driver_reboot_timeout='),
])
def test_bad_values_are_refused_naming_them(variables, message):
    with pytest.raises(AnsibleActionFail) as err:
        run(variables)
    assert str(err.value).startswith('rolling maintenance refused, nothing changed: ')
    assert message in str(err.value)


def test_no_controller_is_a_clear_error():
    task_vars_groups = {}
    with pytest.raises(AnsibleActionFail, match='nodeprep_rolling_controller is not set and the inventory has no '
                                                'group slurm_head'):
        task = MagicMock()
        task.args = {'hosts': [EL]}
        task.async_val = 0
        task.check_mode = False
        action = rolling_plan.ActionModule(task, MagicMock(), PlayContext(), loader=DataLoader(),
                                           templar=Templar(loader=DataLoader()), shared_loader_obj=None)
        action.run(task_vars={'hostvars': {EL: {}}, 'groups': task_vars_groups})


def test_a_slice_of_a_sliced_awx_job_is_refused():
    with pytest.raises(AnsibleActionFail, match='run the rolling job unsliced'):
        run({'awx_workflow_job_id': 12, 'awx_workflow_job_name': 'rolling', 'awx_job_template_name': 'rolling'})
    # a job template inside a workflow of another name is not a slice
    assert run({'awx_workflow_job_id': 12, 'awx_workflow_job_name': 'monthly', 'awx_job_template_name': 'rolling'})


def test_on_target_asks_slurm_nothing():
    got = run({})
    assert got['need_slurm'] == [] and got['work'] == [] and got['batch_size'] == 0 and got['polls'] == []
