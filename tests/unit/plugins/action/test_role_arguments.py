# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/action/role_arguments.py: the roles' own argument specifications, checked in one task."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.nodeprep.plugins.action import role_arguments


def run(args, variables):
    task = MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = False
    task.diff = False
    action = role_arguments.ActionModule(task, MagicMock(), PlayContext(), loader=DataLoader(),
                                         templar=Templar(loader=DataLoader()), shared_loader_obj=None)
    return action.run(task_vars=dict(variables, inventory_hostname='gpu-a01'))


def test_every_settings_role_has_a_specification():
    assert {'gpu_settings', 'kernel', 'memlock', 'nccl', 'nic_offload', 'nvidia_driver', 'shm'} <= set(
        role_arguments.available_roles())


def test_valid_variables_pass():
    result = run({'roles': ['shm', 'gpufleet.nodeprep.memlock']},
                 {'nodeprep_shm_size': '64G', 'nodeprep_shm_fstab': True, 'nodeprep_memlock_value': 'unlimited'})
    assert not result.get('failed'), result
    assert result['roles'] == ['shm', 'memlock']
    assert result['changed'] is False


def test_a_value_of_the_wrong_type_fails_naming_host_role_and_variable():
    result = run({'roles': ['shm', 'memlock']},
                 {'nodeprep_shm_fstab': 'perhaps', 'nodeprep_memlock_domains': 'root'})
    assert result['failed'] is True
    assert sorted(result['argument_errors']) == ['shm']
    assert 'nodeprep_shm_fstab' in result['argument_errors']['shm'][0]
    assert result['msg'].startswith('Invalid role variables on gpu-a01: role shm: ')
    assert 'nodeprep_shm_fstab' in result['msg']


def test_a_choice_outside_the_specification_fails():
    result = run({'roles': ['nvidia_driver']}, {'nodeprep_nvidia_driver_module_type': 'closed-source'})
    assert result['failed'] is True
    assert 'nodeprep_nvidia_driver_module_type' in result['argument_errors']['nvidia_driver'][0]


def test_variables_the_play_does_not_know_count_as_not_given():
    result = run({'roles': ['nccl']}, {})
    assert not result.get('failed'), result


def test_an_unknown_role_is_refused_naming_the_roles_there_are():
    with pytest.raises(AnsibleActionFail) as err:
        run({'roles': ['shm', 'gpu_setings']}, {})
    assert 'gpu_setings is not a role of gpufleet.nodeprep' in str(err.value)
    assert 'gpu_settings, kernel' in str(err.value)


def test_a_specification_without_main_is_refused(tmp_path):
    meta = tmp_path / 'odd' / 'meta'
    meta.mkdir(parents=True)
    (meta / 'argument_specs.yml').write_text('argument_specs:\n  other: {options: {}}\n')
    with pytest.raises(AnsibleActionFail) as err:
        role_arguments.role_options('odd', roles_dir=str(tmp_path))
    assert 'has no argument_specs.main entry point' in str(err.value)
