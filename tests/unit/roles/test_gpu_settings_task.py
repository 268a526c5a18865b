# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gpu_settings role's nvidia_gpu task passes the plan's arguments through unchanged (templated with Ansible's
own Templar: a controller-side test, so it lives here and not under tests/unit/plugins/module_utils, which
ansible-test units runs with module_utils imports only)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT
from ansible_collections.gpufleet.nodeprep.tests.unit.plugins.module_utils.plans import test__plan_gpu_settings as PG

try:
    from ansible.template import trust_as_template
except ImportError:  # ansible-core before 2.19 templates every string
    def trust_as_template(value):
        return value


OMIT = '__omit_place_holder__test'


def _nvidia_gpu_task():
    with open(os.path.join(ROOT, 'roles', 'gpu_settings', 'tasks', 'work.yml')) as handle:
        tasks = yaml.safe_load(handle)
    found = [task for task in tasks if 'gpufleet.nodeprep.nvidia_gpu' in task]
    assert len(found) == 1
    return found[0]


def _trusted(value):
    if isinstance(value, dict):
        return dict((key, _trusted(item)) for key, item in value.items())
    return trust_as_template(value) if isinstance(value, str) else value


def _same(passed, planned):
    # ansible-core before 2.19 renders an int as its text; the module's argument spec reads both alike.
    return passed == planned or (isinstance(planned, int) and not isinstance(planned, bool) and passed == str(planned))


@pytest.mark.parametrize('given, power_limit', [
    ({'power_limit': '72.5%', 'locked_gpu_clocks': {'min': 1500, 'max': 1965}}, '725'),
    ({'power_limit': '700W', 'persistence_mode': None}, '700'),
    ({'power_limit': None, 'locked_memory_clocks': {'min': 3996, 'max': 3996}}, None),
])
def test_the_role_passes_the_plans_arguments_through(given, power_limit):
    plan = PG.pg.plan(PG.node(), PG.settings(**given), PG.context())
    args = plan['args']['nvidia_gpu']
    assert args['power_limit'] == power_limit
    task = _nvidia_gpu_task()
    assert task['vars'] == {'__args': '{{ ansible_facts.nodeprep_plans.gpu_settings.args.nvidia_gpu }}'}
    templar = Templar(loader=DataLoader(), variables={'__args': args, 'omit': OMIT})
    passed = dict((key, value) for key, value in templar.template(_trusted(task['gpufleet.nodeprep.nvidia_gpu'])).items()
                  if value != OMIT)
    planned = dict((key, value) for key, value in args.items() if value is not None)
    assert sorted(passed) == sorted(planned)
    assert [key for key in planned if not _same(passed[key], planned[key])] == []
    # Every argument the plan makes is a task argument (none is dropped on the way), and nothing else is.
    assert sorted(task['gpufleet.nodeprep.nvidia_gpu']) == sorted(args)
