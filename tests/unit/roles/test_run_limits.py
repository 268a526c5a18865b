# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run's limits and slice variables have one home, plugins/plugin_utils/_run_settings.py: the playbooks and the
readiness role repeat a default only as the fallback of ``<name> | default(<value>)`` (Ansible's task keyword
``timeout`` is templated before any action of ours runs), and this test fails as soon as one differs. Every remote
step of the no-op site.yml path and of the readiness role has a limit."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re

import yaml

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_settings
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_settings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FILES = ('playbooks/site.yml', 'playbooks/merge_slices.yml', 'roles/readiness/tasks/main.yml')
FALLBACK = re.compile(r'\b(nodeprep_[a-z_]+) \| default\(([^)]*)\)')


def text(path):
    with open(os.path.join(ROOT, path)) as handle:
        return handle.read()


def test_every_fallback_is_the_settings_default():
    seen = set()
    for path in FILES:
        for name, value in FALLBACK.findall(text(path)):
            if name in _run_settings.SETTINGS:
                seen.add(name)
                assert yaml.safe_load(value) == _run_settings.SETTINGS[name]['default'], (path, name, value)
    assert seen == {'nodeprep_gather_timeout'}


def tasks(path):
    """Every task of a task list or of a playbook's plays, blocks and rescues flattened."""
    data = yaml.safe_load(text(path))
    out = []

    def walk(items):
        for item in items or []:
            if 'block' in item:
                walk(item['block'])
                walk(item.get('rescue'))
                walk(item.get('always'))
            elif 'tasks' in item:
                walk(item['tasks'])
            else:
                out.append(item)
    walk(data)
    return out


def test_every_gather_has_the_whole_step_limit():
    gathers = [task for task in tasks('playbooks/site.yml')
               if 'gpufleet.nodeprep.node_plan' in task and (task['gpufleet.nodeprep.node_plan'] or {}).get('gather')]
    assert len(gathers) == 2
    for task in gathers:
        assert 'nodeprep_gather_timeout' in str(task.get('timeout')), task['name']
    # readiness: one task gathers and judges (the readiness_info action; it passes nodeprep_command_timeout itself)
    # (The other readiness_info task only types the settings, once: settings_only, no gather.)
    checks = [task for task in tasks('roles/readiness/tasks/main.yml') if 'gpufleet.nodeprep.readiness_info' in task
              and not (task['gpufleet.nodeprep.readiness_info'] or {}).get('settings_only')]
    assert len(checks) == 1
    step = checks[0]['timeout']
    assert 'nodeprep_gather_timeout | default(' in step and 'nodeprep_readiness_dcgm_timeout' in step


def test_site_records_the_limit_a_node_hit_and_lets_it_leave_as_it_was_lost():
    play = yaml.safe_load(text('playbooks/site.yml'))[0]
    block = play['tasks'][0]
    assert block['block'][0]['gpufleet.nodeprep.node_plan']['on_unreachable'] == 'fail'
    assert [list(task)[1] for task in block['rescue']] == ['gpufleet.nodeprep.run_summary'] * 2
    assert 'error' in block['rescue'][0]['gpufleet.nodeprep.run_summary']
    assert 'leave' in block['rescue'][1]['gpufleet.nodeprep.run_summary']


def test_the_readiness_role_documents_what_it_reads():
    for name in _run_settings.READINESS_READS:
        assert _readiness_settings.SETTINGS[name] == _run_settings.SETTINGS[name], name
