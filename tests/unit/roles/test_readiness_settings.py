# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The readiness role's settings: every name the checks read, each falling back to the owning role's default.

A default has one home, the owning role's defaults/main.yml. The readiness play does not run that role, so
roles/readiness/vars/main.yml repeats the value as the fallback of ``nodeprep_x | default(...)``; this test fails as
soon as the two differ, and when the readiness role reads another role's files.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os
import shutil

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.gpufleet.nodeprep.plugins.module_utils import _readiness as r

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils import test_readiness_facts as F  # noqa: E402

try:
    from ansible.template import trust_as_template
except ImportError:  # ansible-core before 2.19 templates every string
    def trust_as_template(value):
        return value

OWNERS = ('kernel', 'nvidia_driver', 'gpu_settings', 'memlock', 'shm', 'nccl', 'nic_offload', 'rdma', 'readiness')
# Variables no role's defaults define (docs/contracts.md: unset means 0).
UNOWNED = {'nodeprep_expected_gpus': 0}


def _load(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


def _trusted(value):
    if isinstance(value, dict):
        return dict((key, _trusted(item)) for key, item in value.items())
    return trust_as_template(value) if isinstance(value, str) else value


def owning_defaults():
    found = {}
    for role in OWNERS:
        for name, value in (_load('roles', role, 'defaults', 'main.yml') or {}).items():
            found[name] = (role, value)
    return found


def test_names_are_exactly_the_checks_settings():
    assert list(_load('roles', 'readiness', 'vars', 'main.yml')['__nodeprep_readiness_settings']) == \
        list(r.SETTING_NAMES)


@pytest.mark.parametrize('name', r.SETTING_NAMES)
def test_fallback_is_the_owning_roles_default(name):
    fallback = F.role_settings()[name]
    owners = owning_defaults()
    if name in UNOWNED:
        assert name not in owners
        assert fallback == UNOWNED[name]
        return
    role, value = owners[name]
    assert fallback == value, '{0}: readiness falls back to {1!r}, role {2} defaults to {3!r}'.format(
        name, fallback, role, value)


# The readiness role alone (copied where no other role is): its settings template to the owning roles' defaults, or
# to what the inventory gives, without any other role's files.
@pytest.mark.parametrize('inventory, expected', [
    ({}, {'nodeprep_expected_gpus': 0, 'nodeprep_readiness_xid_fail': [48, 62, 64, 74, 79, 94, 95, 119, 120, 154],
          'nodeprep_readiness_skip_checks': [], 'nodeprep_rdma_path': 'auto'}),
    ({'nodeprep_expected_gpus': 8, 'nodeprep_readiness_xid_fail': [79], 'nodeprep_readiness_skip_checks': ['xid'],
      'nodeprep_rdma_path': 'dmabuf'},
     {'nodeprep_expected_gpus': 8, 'nodeprep_readiness_xid_fail': [79], 'nodeprep_readiness_skip_checks': ['xid'],
      'nodeprep_rdma_path': 'dmabuf'}),
])
def test_the_role_alone_templates_its_settings(tmp_path, inventory, expected):
    alone = tmp_path / 'roles' / 'readiness'
    shutil.copytree(os.path.join(ROOT, 'roles', 'readiness'), str(alone))
    loader = DataLoader()
    loader.set_basedir(str(alone))
    variables = dict(loader.load_from_file(str(alone / 'defaults' / 'main.yml')))
    variables.update(loader.load_from_file(str(alone / 'vars' / 'main.yml')))
    variables.update(inventory, role_path=str(alone))
    templar = Templar(loader=loader, variables=variables)
    assert templar.template(_trusted(variables['__nodeprep_readiness_settings'])) == expected


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
    # rolling_slurm: the verdict in Slurm (nodeprep_readiness_slurm=drain), the rolling maintenance backend.
    assert sorted(found) == ['ansible.builtin.debug', 'ansible.builtin.fail', 'ansible.builtin.import_tasks',
                             'ansible.builtin.set_fact', 'gpufleet.nodeprep.node_plan',
                             'gpufleet.nodeprep.readiness_info', 'gpufleet.nodeprep.readiness_report',
                             'gpufleet.nodeprep.rolling_slurm']
