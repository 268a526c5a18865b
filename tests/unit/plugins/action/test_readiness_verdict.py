# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpufleet.nodeprep.readiness_verdict: the readiness role's last step per node in one task: the node textfile when
nodeprep_readiness_node_textfile is on (not on an unreachable node), then the node fails when it is not ready and
nodeprep_readiness_fail is on; the three settings typed with the role's SETTINGS ("false" is false, "maybe" is
refused naming it, before anything is written)."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from unittest.mock import MagicMock

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.nodeprep.plugins.action import readiness_verdict

READY = {'changed': False, 'ready': True, 'checks': [{'id': 'gpu.count', 'status': 'pass'},
                                                     {'id': 'shm.size', 'status': 'warn'}]}
NOT_READY = {'changed': False, 'ready': False, 'checks': [{'id': 'gpu.count', 'status': 'fail'},
                                                          {'id': 'shm.size', 'status': 'pass'},
                                                          {'id': 'nccl.config', 'status': 'fail'}]}
UNREACHABLE = {'unreachable': True, 'msg': 'Failed to connect to the host via ssh: Connection timed out'}
FAILED = {'failed': True, 'msg': 'readiness check: nodeprep_readiness_mig=sometimes: value must be one of ...'}
PATH = '/var/lib/node_exporter/textfile_collector/nodeprep.prom'


def run(result, variables, module_result=None, check_mode=False):
    task = MagicMock()
    task.args = {'result': result}
    task.async_val = 0
    task.check_mode = check_mode
    context = PlayContext()
    context.check_mode = check_mode
    action = readiness_verdict.ActionModule(task, MagicMock(), context, loader=DataLoader(),
                                            templar=Templar(loader=DataLoader()), shared_loader_obj=None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, module_args))
        return module_result if module_result is not None else {'changed': True, 'path': module_args['path']}
    action._execute_module = execute
    return action.run(task_vars=dict(variables, inventory_hostname='gpu-a01')), calls


def test_a_ready_node_passes_and_nothing_is_written_by_default():
    result, calls = run(READY, {})
    assert calls == []
    assert not result.get('failed') and result['ready'] is True and result['changed'] is False


def test_a_node_that_failed_checks_fails_naming_them():
    result, calls = run(NOT_READY, {})
    assert calls == []
    assert result['failed'] is True and result['ready'] is False
    assert result['msg'] == ('gpu-a01 is not ready: gpu.count, nccl.config failed (details in the report; '
                             'nodeprep_readiness_fail=false reports without failing).')


@pytest.mark.parametrize('readiness, why', [
    (UNREACHABLE, 'Failed to connect to the host via ssh: Connection timed out'),
    (FAILED, FAILED['msg']),
    ({}, 'no readiness result'),
])
def test_a_node_that_could_not_be_checked_fails_with_the_reason(readiness, why):
    result, calls = run(readiness, {})
    assert calls == []
    assert result['failed'] is True and result['msg'] == 'gpu-a01 could not be checked: ' + why


@pytest.mark.parametrize('value', [False, 'false', 'no', 'off', '0'])
def test_fail_false_reports_without_failing_whatever_its_spelling(value):
    result, _calls = run(NOT_READY, {'nodeprep_readiness_fail': value})
    assert not result.get('failed') and result['ready'] is False


def test_the_textfile_is_written_first_then_the_node_fails():
    result, calls = run(NOT_READY, {'nodeprep_readiness_node_textfile': 'true'})
    assert calls == [('gpufleet.nodeprep.readiness_textfile', {'path': PATH, 'checks': NOT_READY['checks']})]
    assert result['textfile'] == {'path': PATH, 'changed': True} and result['changed'] is True
    assert result['failed'] is True


def test_the_textfile_of_a_node_whose_facts_were_not_read_and_none_on_an_unreachable_node():
    _result, calls = run(FAILED, {'nodeprep_readiness_node_textfile': True,
                                  'nodeprep_readiness_node_textfile_path': '/srv/ne/nodeprep.prom'})
    # As before: an empty list (written as one failed facts.gather).
    assert calls == [('gpufleet.nodeprep.readiness_textfile', {'path': '/srv/ne/nodeprep.prom', 'checks': []})]
    _result, calls = run(UNREACHABLE, {'nodeprep_readiness_node_textfile': True})
    assert calls == []


def test_a_textfile_that_cannot_be_written_fails_the_task_with_the_modules_words():
    result, _calls = run(READY, {'nodeprep_readiness_node_textfile': True},
                         module_result={'failed': True, 'msg': 'path: the directory /var/lib/x does not exist'})
    assert result['failed'] is True and result['msg'] == 'path: the directory /var/lib/x does not exist'


@pytest.mark.parametrize('variables, named', [
    ({'nodeprep_readiness_fail': 'maybe'}, 'nodeprep_readiness_fail="maybe"'),
    ({'nodeprep_readiness_node_textfile': 'sometimes'}, 'nodeprep_readiness_node_textfile="sometimes"'),
])
def test_a_setting_that_does_not_type_is_refused_naming_it_before_anything_is_written(variables, named):
    result, calls = run(READY, dict(variables, nodeprep_readiness_node_textfile_path=PATH))
    assert calls == []
    assert result['failed'] is True and result['msg'].startswith('readiness verdict: ' + named), result['msg']
    assert 'Valid booleans include' in result['msg']
