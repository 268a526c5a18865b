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
    # readiness_textfile: each node's verdict for its node_exporter (nodeprep_readiness_node_textfile).
    assert sorted(found) == ['ansible.builtin.debug', 'ansible.builtin.fail', 'ansible.builtin.import_tasks',
                             'gpufleet.nodeprep.readiness_info', 'gpufleet.nodeprep.readiness_report',
                             'gpufleet.nodeprep.readiness_textfile', 'gpufleet.nodeprep.rolling_slurm']


def test_one_task_per_node_before_the_report():
    """The per-node work is one task (gather and judge); the report runs once; the verdict is the other per-node
    task (controller CPU per node: each per-node task costs a slot per host); the node textfile is one opt-in task
    per node (skipped when nodeprep_readiness_node_textfile is false)."""
    tasks = _load('roles', 'readiness', 'tasks', 'main.yml')
    # Slurm's state of the nodes, for the performance gates (opt-in): once, on the Slurm controller, not per node.
    assert tasks[0]['run_once'] is True and tasks[0]['gpufleet.nodeprep.rolling_slurm']['op'] == 'state'
    assert tasks[0]['when'][0] == ("(nodeprep_readiness_performance | string | lower) in ['true', 'yes', 'on', '1', "
                                   "'y', 't']")
    tasks = tasks[1:]
    assert [t['name'] for t in tasks] == ['Gather each node once and judge it on the controller',
                                          'Write the report on the controller',
                                          "Publish each node's verdict for node_exporter's textfile collector "
                                          '(nodeprep_readiness_node_textfile)',
                                          'Act on the verdict in Slurm (nodeprep_readiness_slurm=drain)',
                                          'Fail the nodes that are not ready']
    assert tasks[2]['when'][0] == 'nodeprep_readiness_node_textfile | bool'
    assert tasks[0]['register'] == 'nodeprep_readiness'
    assert all(t.get('run_once') for t in _load('roles', 'readiness', 'tasks', 'report.yml'))
    assert all(t.get('run_once') for t in _load('roles', 'readiness', 'tasks', 'slurm.yml'))
    assert len(_load('roles', 'readiness', 'tasks', 'verdict.yml')) == 1


def test_the_slurm_task_templates_its_delegate_without_a_slurm_head():
    """Ansible templates delegate_to before the task's `when` (nodeprep_readiness_slurm=report skips it): in an
    inventory without the group slurm_head the expression must template (it failed every readiness run there)."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template
    # Both Slurm tasks: the verdict's (slurm.yml) and the performance gates' read of the nodes' state (main.yml).
    tasks = [item for name in ('slurm.yml', 'main.yml') for item in _load('roles', 'readiness', 'tasks', name)
             if 'gpufleet.nodeprep.rolling_slurm' in item]
    assert len(tasks) == 2
    base = {'nodeprep_readiness_slurm_controller': '', 'inventory_hostname': 'gpu-a01'}
    for task in tasks:
        for groups, wanted in (({'all': ['gpu-a01']}, 'gpu-a01'), ({'slurm_head': ['head-01']}, 'head-01')):
            templar = Templar(loader=DataLoader(), variables=dict(base, groups=groups))
            assert templar.template(trust_as_template(task['delegate_to'])) == wanted
        templar = Templar(loader=DataLoader(), variables=dict(base, groups={}, nodeprep_readiness_slurm_controller='ctl'))
        assert templar.template(trust_as_template(task['delegate_to'])) == 'ctl'


def test_the_rolling_verify_step_hands_readiness_its_slurm_controller():
    """In a rolling batch's verify step the performance gates (opt-in) ask the run's own Slurm controller where they
    may run: the batch is drained there (roles/readiness/tasks/main.yml reads nodeprep_readiness_slurm_controller)."""
    plays = _load('playbooks', 'rolling_upgrade.yml')
    tasks = [t for play in plays for t in play.get('tasks') or []]
    verify = [t for t in tasks if t.get('name') == 'Verify the node (readiness)']
    assert len(verify) == 1
    assert verify[0]['vars']['nodeprep_readiness_slurm_controller'] == '{{ nodeprep_rolling_settings.controller }}'
    assert verify[0]['vars']['nodeprep_readiness_slurm'] == 'report'
