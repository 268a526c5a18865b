# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/site.yml names the roles only through its one list (the site_roles lookup, _plans.SITE_ROLES), and
`--tags <role>` still selects that role: the settings play's task is tagged with the settings roles from the list.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import re
import subprocess

import pytest
import yaml

from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT, ansible_bin, ansible_env

SITE = os.path.join(ROOT, 'playbooks', 'site.yml')
SETTINGS_TASK = 'Run each settings role whose plan has something to do or say on this node'


def code_strings(node, key=None):
    """Every string of a play that Ansible evaluates (task and play names are words for people, left out)."""
    if isinstance(node, dict):
        for name, value in node.items():
            yield from code_strings(value, name)
    elif isinstance(node, list):
        for value in node:
            yield from code_strings(value, key)
    elif isinstance(node, str) and key != 'name':
        yield node


def plays():
    with open(SITE) as handle:
        return yaml.safe_load(handle)


def test_the_batched_play_imports_the_disruptive_roles_in_order():
    batched = [play for play in plays() if 'nodeprep_kernel_driver_work' in str(play.get('hosts'))
               and any('block' in task for task in play['tasks'])]
    assert len(batched) == 1
    imported = [step['ansible.builtin.import_role']['name'] for task in batched[0]['tasks'] for step in task['block']
                if 'ansible.builtin.import_role' in step]
    assert imported == ['gpufleet.nodeprep.' + role for role in _plans.DISRUPTIVE_ROLES]


@pytest.mark.parametrize('role', _plans.SITE_ROLES)
def test_no_other_place_in_site_yml_names_a_role(role):
    """Outside the batched play's blocks (import_role is static), site.yml takes the roles from the site_roles
    lookup: a new role is added to _plans.SITE_ROLES only."""
    for play in plays():
        if any('block' in task for task in play.get('tasks') or []):
            continue
        for text in code_strings(play):
            # As a value of its own (a tag, a list item), quoted in Jinja, or as an attribute (reasons.kernel).
            named = text.strip() == role or re.search(r"""['"]{0}['"]|\.{0}\b""".format(role), text)
            assert not named, (play.get('name'), text)


def test_tags_select_each_settings_role(tmp_path):
    """One --list-tasks: the settings task carries exactly the settings roles as tags (so --tags shm selects it and
    --tags kernel does not), templated from the list."""
    proc = subprocess.run([ansible_bin('ansible-playbook'), '-i', 'localhost,', SITE, '--list-tasks'],
                          cwd=str(tmp_path), env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout
    line = [entry for entry in proc.stdout.splitlines() if SETTINGS_TASK in entry]
    assert len(line) == 1, proc.stdout
    tags = re.search(r'TAGS: \[(.*)\]', line[0]).group(1).split(', ')
    assert sorted(tags) == sorted(_plans.SETTINGS_ROLES)


def test_the_first_play_spends_one_task_per_node_already_right():
    """The gather-and-plan is the first play's only task on a node that answers (the rescue runs only on a node that
    left): it records for the summary and puts the node in the groups of its plays itself (no group_by task)."""
    first = plays()[0]
    assert len(first['tasks']) == 1
    block = first['tasks'][0]
    assert [list(task)[1] for task in block['block']] == ['gpufleet.nodeprep.node_plan']
    args = block['block'][0]['gpufleet.nodeprep.node_plan']
    assert args['site_groups'] is True and args['record'] is True and args['keep'] == 'summary'
    assert 'group_by' not in str(first)
