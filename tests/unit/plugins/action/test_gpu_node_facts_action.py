# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of plugins/action/gpu_node_facts.py: the module runs on the node, the limits it read are resolved here."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from unittest.mock import MagicMock

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.nodeprep.plugins.action import gpu_node_facts
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ansible_adhoc

READ = {'debian': False, 'nr_open': None, 'proc1_limits': None,
        'files': [{'path': '/etc/security/limits.d/99-site.conf', 'not_utf8': False, 'error': None,
                   'text': '* hard memlock 65536\n* soft memlock -5\n'}],
        'accounts': {'*': {'uid': None, 'gid': None, 'groups': [], 'gids': []}},
        'systemd': {'files': [], 'manager': None, 'services': {}, 'reason': 'systemctl not found in PATH'},
        'slurm': None}


def run(args, module_result):
    task = MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = False
    task.diff = False
    action = gpu_node_facts.ActionModule(task, MagicMock(), PlayContext(), loader=DataLoader(),
                                         templar=Templar(loader=DataLoader()), shared_loader_obj=None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, module_args))
        return module_result
    action._execute_module = execute
    return action.run(task_vars={}), calls


def test_the_module_runs_then_the_limits_are_resolved():
    result, calls = run({'gather_subset': ['limits'], 'limits_users': ['*']},
                        {'changed': False, 'warnings': ['from the node'],
                         'ansible_facts': {'nodeprep_gathered': ['limits'], 'nodeprep_errors': {},
                                           'limits': {'read': READ}}})
    assert calls == [('gpufleet.nodeprep.gpu_node_facts', {'gather_subset': ['limits'], 'limits_users': ['*']})]
    limits = result['ansible_facts']['limits']
    assert limits['effective']['*']['memlock'] == {'soft': 65536, 'hard': 65536}
    # The namespace's warnings are the task's, as when the module resolved them on the node.
    assert result['warnings'] == ['from the node', "limits: /etc/security/limits.d/99-site.conf:2: value '-5' for item "
                                  "'memlock' is read by pam_limits as unlimited (strtoull wraps a negative number "
                                  "around)"]


@pytest.mark.parametrize('flag', [True, 'no'])
def test_an_unknown_user(flag):
    read = dict(READ, accounts={'ghost': None})
    result, _calls = run({'fail_on_error': flag}, {'ansible_facts': {'nodeprep_errors': {}, 'limits': {'read': read}}})
    message = ("limits facts: user 'ghost' given in users does not exist on this host (pwd lookup failed); pass its "
               "groups in 'groups' to evaluate it anyway")
    if flag is True:
        assert (result['failed'], result['msg'], 'ansible_facts' in result) == (True, message, False)
    else:
        assert result['ansible_facts'] == {'nodeprep_errors': {'limits': message}}


def test_a_failed_module_is_the_result():
    result, _calls = run({}, {'failed': True, 'msg': 'nvidia facts: nvidia-smi hung'})
    assert result['failed'] is True and result['msg'] == 'nvidia facts: nvidia-smi hung'


def test_through_ansible():
    """``ansible -m gpufleet.nodeprep.gpu_node_facts`` runs the action plugin: the limits arrive resolved."""
    result = ansible_adhoc('gpu_node_facts', {'gather_subset': ['limits'], 'limits_users': ['root', '*']})
    limits = result['ansible_facts']['limits']
    assert 'read' not in limits
    assert set(limits['effective']) == {'root', '*'}
    assert set(limits['effective']['*']['memlock']) == {'soft', 'hard'}
