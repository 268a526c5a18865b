# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The readiness role's settings: typed once, by the readiness_info action, from SETTINGS; no fallback repeats a role's
default.

The checks read the readiness role's own variables (plugins/plugin_utils/_readiness_settings.py SETTINGS) and the
collection-wide nodeprep_expected_gpus (typed with the nvidia_driver role's SETTINGS); the roles' own variables reach
their checks through the roles' plans, made by the action from the same SETTINGS as the roles use.  The role has no
vars/main.yml to keep equal to another role's defaults (its fallbacks of earlier versions are gone), and reads no
other role's files.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import yaml

from ansible_collections.gpufleet.nodeprep.plugins.action import readiness_info
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_nvidia_driver
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness as r
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_settings
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_settings
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.action import test_readiness_info as RI

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _load(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


def test_every_setting_the_checks_read_has_one_home():
    homes = dict((name, 'readiness') for name in _readiness_settings.SETTINGS)
    homes.update((name, 'nvidia_driver') for name in readiness_info.SHARED)
    assert sorted(homes[name] for name in r.SETTING_NAMES) == ['nvidia_driver'] + ['readiness'] * 9
    assert all(name in _plan_nvidia_driver.SETTINGS for name in readiness_info.SHARED)


def test_no_fallback_repeats_another_roles_default():
    assert not os.path.exists(os.path.join(ROOT, 'roles', 'readiness', 'vars'))
    assert not os.path.exists(os.path.join(ROOT, 'roles', 'readiness', 'tasks', 'settings.yml'))
    defaults = _load('roles', 'readiness', 'defaults', 'main.yml')
    # The collection-wide variables of a run (the limits, a slice's identity) are not the role's defaults.
    assert sorted(defaults) == sorted(name for name in _readiness_settings.SETTINGS
                                      if name not in _run_settings.READINESS_READS)


def test_the_role_alone_types_its_settings_from_the_settings_defaults():
    """Nothing in the inventory: the readiness role's defaults and nodeprep_expected_gpus 0 (compare nvidia-smi with
    the PCI bus only); what the inventory gives wins, typed ("8" is 8)."""
    own, _roles, problems = readiness_info.type_settings({})
    assert problems == []
    assert dict((name, own[name]) for name in r.SETTING_NAMES) == {
        'nodeprep_expected_gpus': 0, 'nodeprep_readiness_xid_fail': [48, 62, 64, 74, 79, 94, 95, 119, 120, 154],
        'nodeprep_readiness_skip_checks': [], 'nodeprep_readiness_kernel_log_lines': 20000,
        'nodeprep_readiness_thresholds': {}, 'nodeprep_readiness_mig': 'disabled',
        'nodeprep_readiness_performance': False, 'nodeprep_readiness_node_idle': False,
        'nodeprep_readiness_performance_thresholds': {}, 'nodeprep_readiness_performance_timeout': 600}
    own, _roles, problems = readiness_info.type_settings({
        'nodeprep_expected_gpus': '8', 'nodeprep_readiness_xid_fail': '79', 'nodeprep_readiness_skip_checks': 'gpu.health',
        'nodeprep_readiness_kernel_log_lines': '100', 'nodeprep_readiness_thresholds': {'pcie_width': 8},
        'nodeprep_readiness_mig': 'any', 'nodeprep_readiness_performance': 'true',
        'nodeprep_readiness_node_idle': 'false', 'nodeprep_readiness_performance_thresholds': {'allreduce_busbw_gbps': 400},
        'nodeprep_readiness_performance_timeout': '900'})
    assert problems == []
    assert dict((name, own[name]) for name in r.SETTING_NAMES) == {
        'nodeprep_expected_gpus': 8, 'nodeprep_readiness_xid_fail': [79], 'nodeprep_readiness_skip_checks': ['gpu.health'],
        'nodeprep_readiness_kernel_log_lines': 100, 'nodeprep_readiness_thresholds': {'pcie_width': 8},
        'nodeprep_readiness_mig': 'any', 'nodeprep_readiness_performance': True,
        'nodeprep_readiness_node_idle': False, 'nodeprep_readiness_performance_thresholds': {'allreduce_busbw_gbps': 400},
        'nodeprep_readiness_performance_timeout': 900}
    # A threshold that is not one stops the check before anything is gathered, naming it.
    _own, _roles, problems = readiness_info.type_settings({'nodeprep_readiness_thresholds': {'pcie_width': 'x16'}})
    assert problems == ["nodeprep_readiness_thresholds.pcie_width='x16': a threshold is a number above 0"]
    # A performance threshold must be a number: the inventory's string is refused naming it (nothing is read).
    _own, _roles, problems = readiness_info.type_settings({'nodeprep_readiness_performance_thresholds':
                                                           {'allreduce_busbw_gbps': '400'}})
    assert problems == ["nodeprep_readiness_performance_thresholds: allreduce_busbw_gbps='400': a threshold is a "
                        'number above 0']


def _modules(tasks):
    found = []
    for task in tasks or []:
        for key in ('block', 'rescue', 'always'):
            found.extend(_modules(task.get(key)))
        found.extend(name for name in task if '.' in name)
    return found


def test_the_role_runs_only_its_own_modules():
    """The modules the role's tasks call, all of them: none reads another role's files (no include_vars, no
    include_role, no template or copy of a file of the collection)."""
    found = set()
    folder = os.path.join(ROOT, 'roles', 'readiness', 'tasks')
    for name in os.listdir(folder):
        found.update(_modules(_load('roles', 'readiness', 'tasks', name)))
    # rolling_slurm: the verdict in Slurm (nodeprep_readiness_slurm=drain), the rolling maintenance backend;
    # readiness_verdict: each node's verdict for its node_exporter (nodeprep_readiness_node_textfile, through the
    # readiness_textfile module) and the failure of the nodes that are not ready, in one task.
    assert sorted(found) == ['ansible.builtin.debug', 'ansible.builtin.fail', 'ansible.builtin.import_tasks',
                             'gpufleet.nodeprep.readiness_info', 'gpufleet.nodeprep.readiness_report',
                             'gpufleet.nodeprep.readiness_verdict', 'gpufleet.nodeprep.rolling_slurm']


def test_one_task_per_node_before_the_report():
    """The per-node work is one task (gather and judge); the settings are typed once for the run-once steps; the report
    runs once; the verdict is the other per-node task (controller CPU per node: each per-node task costs a slot per
    host), with the opt-in node textfile in it."""
    tasks = _load('roles', 'readiness', 'tasks', 'main.yml')
    # The settings of the run-once steps, typed by the action (once, on the first host).
    assert tasks[0]['run_once'] is True and tasks[0]['gpufleet.nodeprep.readiness_info'] == {'settings_only': True}
    assert tasks[0]['register'] == '__nodeprep_readiness_settings'
    # Slurm's state of the nodes, for the performance gates (opt-in): once, on the Slurm controller, not per node.
    assert tasks[1]['run_once'] is True and tasks[1]['gpufleet.nodeprep.rolling_slurm']['op'] == 'state'
    assert tasks[1]['when'][0] == '__nodeprep_readiness_settings.settings.nodeprep_readiness_performance'
    tasks = tasks[2:]
    assert [t['name'] for t in tasks] == ['Gather each node once and judge it on the controller',
                                          'Write the report on the controller',
                                          'Act on the verdict in Slurm (nodeprep_readiness_slurm=drain)',
                                          "Publish each node's verdict and fail the nodes that are not ready"]
    assert tasks[0]['register'] == 'nodeprep_readiness'
    assert all(t.get('run_once') for t in _load('roles', 'readiness', 'tasks', 'report.yml'))
    assert all(t.get('run_once') for t in _load('roles', 'readiness', 'tasks', 'slurm.yml'))
    assert len(_load('roles', 'readiness', 'tasks', 'verdict.yml')) == 1


def _per_node_tasks(tasks):
    """The tasks of the role that run on every node (not run_once), the imported files' included."""
    found = []
    for task in tasks:
        if 'ansible.builtin.import_tasks' in task:
            found.extend(_per_node_tasks(_load('roles', 'readiness', 'tasks', task['ansible.builtin.import_tasks'])))
        elif not task.get('run_once'):
            found.append(task['name'])
    return found


def test_readiness_yml_spends_two_task_slots_per_node():
    """readiness_info and the verdict, nothing else per node: the role's argument spec is not validated by a task of
    its own in readiness.yml (readiness_info types every variable of it on every node)."""
    assert _per_node_tasks(_load('roles', 'readiness', 'tasks', 'main.yml')) == [
        'Gather each node once and judge it on the controller',
        "Publish the node's verdict for node_exporter (nodeprep_readiness_node_textfile), fail the node when it is "
        'not ready']
    play = _load('playbooks', 'readiness.yml')
    role = [t['ansible.builtin.import_role'] for t in play[0]['tasks'] if 'ansible.builtin.import_role' in t]
    assert role == [{'name': 'gpufleet.nodeprep.readiness', 'rolespec_validate': False}]
    spec = _load('roles', 'readiness', 'meta', 'argument_specs.yml')['argument_specs']['main']['options']
    assert sorted(spec) == sorted(_readiness_settings.SETTINGS)


# The settings the role's steps act on: read only as its actions typed them, never from the variables in Jinja.
ACTED_ON = ('nodeprep_readiness_performance', 'nodeprep_readiness_report', 'nodeprep_readiness_report_dir',
            'nodeprep_readiness_prometheus_textfile', 'nodeprep_readiness_slurm', 'nodeprep_readiness_slurm_controller',
            'nodeprep_readiness_fail', 'nodeprep_readiness_node_textfile', 'nodeprep_readiness_node_textfile_path')


def _code(node, key=None):
    if isinstance(node, dict):
        for name, value in node.items():
            if name != 'name':
                yield from _code(value, name)
    elif isinstance(node, list):
        for value in node:
            yield from _code(value, key)
    elif isinstance(node, str) and key != 'msg':
        yield node


def test_the_tasks_read_no_setting_they_act_on_untyped():
    import re
    folder = os.path.join(ROOT, 'roles', 'readiness', 'tasks')
    for name in sorted(os.listdir(folder)):
        for text in _code(_load('roles', 'readiness', 'tasks', name)):
            untyped = [setting for setting in ACTED_ON if re.search(r'(?<![.\w])' + setting + r'\b', text)]
            assert not untyped, (name, untyped, text)


def test_the_slurm_tasks_delegate_to_the_controller_of_its_one_rule():
    """Ansible templates delegate_to before the task's `when` (nodeprep_readiness_slurm=report skips it): in an
    inventory without the group slurm_head the delegate must still name a host (it failed every readiness run there).
    Both Slurm tasks read it from the settings step, whose action decides it with _readiness_settings.slurm_controller
    (one home: no fallback expression in the tasks)."""
    tasks = [item for name in ('slurm.yml', 'main.yml') for item in _load('roles', 'readiness', 'tasks', name)
             if 'gpufleet.nodeprep.rolling_slurm' in item]
    assert len(tasks) == 2
    assert [t['delegate_to'] for t in tasks] == ['{{ __nodeprep_readiness_settings.slurm_delegate }}'] * 2
    for groups, variables, controller, delegate in (
            ({'all': ['gpu-a01']}, {}, None, 'gpu-a01'),
            ({'slurm_head': ['head-01', 'head-02']}, {}, 'head-01', 'head-01'),
            ({}, {'nodeprep_readiness_slurm_controller': 'ctl'}, 'ctl', 'ctl'),
            ({'slurm_head': ['head-01']}, {'nodeprep_readiness_slurm_controller': 'ctl'}, 'ctl', 'ctl')):
        result, calls = RI.run(dict(variables, groups=groups), args={'settings_only': True})
        assert calls == []  # nothing is gathered
        assert (result['slurm_controller'], result['slurm_delegate']) == (controller, delegate), (groups, variables)


def test_the_rolling_verify_step_hands_readiness_its_slurm_controller():
    """In a rolling batch's verify step the performance gates (opt-in) ask the run's own Slurm controller where they
    may run: the batch is drained there (roles/readiness/tasks/main.yml reads nodeprep_readiness_slurm_controller)."""
    plays = _load('playbooks', 'rolling_upgrade.yml')
    tasks = [t for play in plays for t in play.get('tasks') or []]
    verify = [t for t in tasks if t.get('name') == 'Verify the node (readiness)']
    assert len(verify) == 1
    assert verify[0]['vars']['nodeprep_readiness_slurm_controller'] == '{{ nodeprep_rolling_settings.controller }}'
    assert verify[0]['vars']['nodeprep_readiness_slurm'] == 'report'
